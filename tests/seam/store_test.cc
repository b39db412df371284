#include "seam/store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace torchxd::seam {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("store_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path() { return (dir_ / "torchxd.db").string(); }
  fs::path dir_;
};

TEST_F(StoreTest, AppsAndLatestReplicaAttemptsRoundTrip) {
  {
    auto store = Store::Open(Path(), nullptr);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    ASSERT_TRUE((*store)->PutApp("local_cwd", "a-1", 3, 100, {{"k", "v"}}).has_value());
    ASSERT_TRUE((*store)->PutApp("local_cwd", "a-1", 4, 100, {{"k", "v2"}}).has_value());
    ASSERT_TRUE((*store)->PutReplica("local_cwd", "a-1", "r", 0, 1, 5, R"({"attempt":1})").has_value());
    ASSERT_TRUE((*store)->PutReplica("local_cwd", "a-1", "r", 0, 2, 4, R"({"attempt":2})").has_value());
    ASSERT_TRUE((*store)->AddEvent("local_cwd", "a-1", 1, "app", 4, "").has_value());
  }
  auto store = Store::Open(Path(), nullptr);
  auto apps = (*store)->LoadApps();
  ASSERT_TRUE(apps.has_value());
  ASSERT_EQ(apps->size(), 1u);
  EXPECT_EQ(StoredApp::Parse((*apps)[0].record)["k"], "v2");
  EXPECT_EQ((*apps)[0].state, 4);  // the state column, known before the record is parsed
  ASSERT_EQ((*apps)[0].replicas.size(), 1u);
  EXPECT_EQ(StoredApp::Parse((*apps)[0].replicas[0])["attempt"], 2);
  ASSERT_TRUE((*store)->DeleteApp("local_cwd", "a-1").has_value());
  EXPECT_TRUE((*store)->LoadApps()->empty());
}

// An app's fixed part is written once, with its row; its launch inputs
// then and when they change; later writes change the state and the rest
// alone, and a load joins the three into the whole record.
TEST_F(StoreTest, AnAppsFixedPartIsWrittenOnceAndLoadedWithTheRest) {
  const std::string fixed = R"({"app":{"name":"big"},"cwd":"/w"})";
  const std::string launch = R"({"requests":[1,2]})";
  const std::string ended = R"({"requests":[]})";
  {
    auto store = Store::Open(Path(), nullptr);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    auto& s = **store;
    auto orphan = s.PutAppParts("local_cwd", "never-written", 2, 100, nullptr, nullptr, R"({"state":2})");
    ASSERT_FALSE(orphan.has_value()) << "a change of a row that is not there was taken";
    EXPECT_NE(orphan.error().message.find("never-written"), std::string::npos) << orphan.error().message;
    EXPECT_FALSE(s.PutAppParts("local_cwd", "x", 1, 100, &fixed, nullptr, "{}").has_value())
        << "a whole row without its launch inputs was taken";
    ASSERT_TRUE(s.PutAppParts("local_cwd", "a-1", 1, 100, &fixed, &launch, R"({"state":1,"msg":""})").has_value());
    ASSERT_TRUE(s.PutAppParts("local_cwd", "a-1", 3, 100, nullptr, nullptr, R"({"state":3,"msg":"running"})"));
    ASSERT_TRUE(s.Commit().has_value());
  }
  auto row = [&] {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(Path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT (SELECT text FROM app_parts WHERE part=0), (SELECT text FROM app_parts WHERE part=1), "
                       "record, state FROM apps",
                       -1, &q, nullptr);
    std::vector<std::string> out;
    if (sqlite3_step(q) == SQLITE_ROW) {
      for (int c = 0; c < 3; ++c) out.push_back(reinterpret_cast<const char*>(sqlite3_column_text(q, c)));
      out.push_back(std::to_string(sqlite3_column_int(q, 3)));
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return out;
  };
  EXPECT_EQ(row(), (std::vector<std::string>{fixed, launch, R"({"state":3,"msg":"running"})", "3"}));
  auto store = Store::Open(Path(), nullptr);
  auto apps = (*store)->LoadApps();
  ASSERT_TRUE(apps.has_value());
  ASSERT_EQ(apps->size(), 1u);
  EXPECT_EQ(nlohmann::json::parse((*apps)[0].record),
            nlohmann::json::parse(R"({"app":{"name":"big"},"cwd":"/w","requests":[1,2],"state":3,"msg":"running"})"));
  ASSERT_TRUE((*store)->PutAppParts("local_cwd", "a-1", 5, 100, nullptr, &ended, R"({"state":5,"msg":""})"));
  ASSERT_TRUE((*store)->Commit().has_value());
  EXPECT_EQ(row(), (std::vector<std::string>{fixed, ended, R"({"state":5,"msg":""})", "5"}));
  // A row emptied (a corrupt file) is no record, whatever its parts: it is set aside, not made of them.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(Path().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE apps SET record=''", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  apps = (*store)->LoadApps();
  ASSERT_TRUE(apps.has_value());
  ASSERT_EQ(apps->size(), 1u);
  EXPECT_FALSE(nlohmann::json::accept((*apps)[0].record)) << (*apps)[0].record;
}

// A database of the first schema (each record whole, in one column) is
// brought to this one, and its apps load as they were.
TEST_F(StoreTest, AFirstSchemaDatabaseIsUpgradedAndItsAppsLoad) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(Path().c_str(), &db), SQLITE_OK);
    const char* v1 = R"sql(
      CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE apps(scheduler TEXT NOT NULL, app_id TEXT NOT NULL, state INTEGER NOT NULL,
        created_ms INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY(scheduler, app_id));
      CREATE INDEX apps_by_created ON apps(created_ms);
      CREATE TABLE replicas(scheduler TEXT NOT NULL, app_id TEXT NOT NULL, role TEXT NOT NULL,
        replica_id INTEGER NOT NULL, attempt INTEGER NOT NULL, state INTEGER NOT NULL, record TEXT NOT NULL,
        PRIMARY KEY(scheduler, app_id, role, replica_id, attempt));
      CREATE TABLE events(seq INTEGER PRIMARY KEY AUTOINCREMENT, scheduler TEXT NOT NULL, app_id TEXT NOT NULL,
        time_ms INTEGER NOT NULL, what TEXT NOT NULL, state INTEGER NOT NULL, msg TEXT NOT NULL);
      CREATE INDEX events_by_app ON events(scheduler, app_id);
      INSERT INTO meta VALUES('schema_version', '1');
      INSERT INTO apps VALUES('local_cwd', 'old-1', 4, 100, '{"app":{"name":"old"},"state":4}');
    )sql";
    ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto store = Store::Open(Path(), nullptr);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  auto apps = (*store)->LoadApps();
  ASSERT_TRUE(apps.has_value());
  ASSERT_EQ(apps->size(), 1u);
  EXPECT_EQ(nlohmann::json::parse((*apps)[0].record), nlohmann::json::parse(R"({"app":{"name":"old"},"state":4})"));
  // Its later writes go as any app's: the whole row once, then the changes.
  const std::string fixed = R"({"app":{"name":"old"}})";
  const std::string launch = R"({"requests":[]})";
  ASSERT_TRUE((*store)->PutAppParts("local_cwd", "old-1", 4, 100, &fixed, &launch, R"({"state":5})").has_value());
  ASSERT_TRUE((*store)->PutAppParts("local_cwd", "old-1", 6, 100, nullptr, nullptr, R"({"state":6})").has_value());
  apps = (*store)->LoadApps();
  ASSERT_EQ(apps->size(), 1u);
  EXPECT_EQ(nlohmann::json::parse((*apps)[0].record), nlohmann::json::parse(R"({"app":{"name":"old"},"requests":[],"state":6})"));
}

// A finished app's record is read without what only a launch reads: those top-level keys
// alone go, a key of the same name deeper in stays.
TEST(StoredAppTest, ParseWithoutSkipsTheNamedTopLevelKeysOnly) {
  std::string text =
      R"({"app":{"requests":[1]},"client_env":{"HOME":"/root"},"requests":[{"env":{"A":"1"}}],"state":3})";
  nlohmann::json all = StoredApp::Parse(text);
  nlohmann::json some = StoredApp::ParseWithout(text, {"client_env", "requests"});
  EXPECT_EQ(some, nlohmann::json({{"app", {{"requests", {1}}}}, {"state", 3}}));
  all.erase("client_env");
  all.erase("requests");
  EXPECT_EQ(some, all);
  EXPECT_TRUE(StoredApp::ParseWithout("{not json", {"requests"}).is_discarded());
}

// A crash-looping replica: thousands of attempts and events, a bounded history.
TEST_F(StoreTest, AttemptsAndEventsOfARestartingReplicaStayBounded) {
  {
    auto store = Store::Open(Path(), nullptr);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    ASSERT_TRUE((*store)->PutApp("local_cwd", "loop", 3, 100, {{"k", "v"}}).has_value());
    for (int attempt = 1; attempt <= 2000; ++attempt) {
      ASSERT_TRUE((*store)->PutReplica("local_cwd", "loop", "r", 0, attempt, 4, nlohmann::json{{"attempt", attempt}}.dump()).has_value());
      ASSERT_TRUE((*store)->AddEvent("local_cwd", "loop", attempt, "replica r/0 attempt " + std::to_string(attempt), 4,
                                     "", 100).has_value());
    }
    ASSERT_TRUE((*store)->Commit().has_value());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(Path().c_str(), &db), SQLITE_OK);
  auto count = [&](const char* sql) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &s, nullptr);
    int64_t n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return n;
  };
  EXPECT_EQ(count("SELECT COUNT(*) FROM replicas"), Store::kAttemptsKept);
  EXPECT_GE(count("SELECT COUNT(*) FROM events"), 100);
  EXPECT_LE(count("SELECT COUNT(*) FROM events"), 125);
  EXPECT_EQ(count("SELECT MAX(time_ms) FROM events"), 2000);  // the newest stay
  sqlite3_close(db);
  auto store = Store::Open(Path(), nullptr);
  auto apps = (*store)->LoadApps();
  ASSERT_EQ(apps->size(), 1u);
  ASSERT_EQ((*apps)[0].replicas.size(), 1u);
  EXPECT_EQ(StoredApp::Parse((*apps)[0].replicas[0])["attempt"], 2000);
}

// The records hold users' environments: the database and its side files are the daemon's alone.
TEST_F(StoreTest, TheDatabaseIsReadableByItsOwnerAlone) {
  std::ofstream(Path()) << "";
  fs::permissions(Path(), fs::perms::all);  // as an older torchxd may have left it
  auto store = Store::Open(Path(), nullptr);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  ASSERT_TRUE((*store)->PutApp("local_cwd", "a", 1, 1, {{"env", "SECRET"}}).has_value());
  ASSERT_TRUE((*store)->Commit().has_value());
  for (const char* suffix : {"", "-wal", "-shm"}) {
    struct stat st;
    ASSERT_EQ(::stat((Path() + suffix).c_str(), &st), 0) << suffix;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << suffix;
  }
}

TEST_F(StoreTest, ACorruptDatabaseIsMovedAsideAndReplaced) {
  std::ofstream(Path()) << std::string(4096, 'g');
  std::string warning;
  auto store = Store::Open(Path(), &warning);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  EXPECT_NE(warning.find("was corrupt; moved it to"), std::string::npos) << warning;
  bool aside = false;
  for (const auto& e : fs::directory_iterator(dir_)) {
    aside = aside || e.path().filename().string().find("torchxd.db.corrupt-") == 0;
  }
  EXPECT_TRUE(aside);
  EXPECT_TRUE((*store)->PutApp("local_cwd", "b", 1, 1, {}).has_value());
}

TEST_F(StoreTest, ANewerSchemaIsRefused) {
  {
    auto store = Store::Open(Path(), nullptr);
    ASSERT_TRUE(store.has_value());
  }
  std::string cmd = "sqlite3 " + Path() + " \"UPDATE meta SET value='99' WHERE key='schema_version'\" 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "sqlite3 command-line tool not installed";
  auto store = Store::Open(Path(), nullptr);
  ASSERT_FALSE(store.has_value());
  EXPECT_NE(store.error().message.find("newer than this torchxd"), std::string::npos);
}

// Checkpoints fsync, and fsyncs stall while another process floods the disk:
// they run on the checkpointer's thread, never in a commit on the loop.
TEST_F(StoreTest, ACheckpointCopiesTheLogIntoTheDatabaseOnItsOwnThread) {
  auto store = Store::Open(Path(), nullptr);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  StoreCheckpointer* checkpointer = (*store)->checkpointer();
  ASSERT_NE(checkpointer, nullptr);
  std::string big(2000, 'x');
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE((*store)->PutApp("local_cwd", "a-" + std::to_string(i), 1, i, {{"env", big}}).has_value());
    if (i % 100 == 99) {
      ASSERT_TRUE((*store)->Commit().has_value());
    }
  }
  // The first request comes once the log holds 1,000 frames (4 MiB of pages, some of them the
  // same page again: each commit rewrites the table's upper pages), and a checkpoint copies what
  // the log held when it began; what is written after it stays in the log until the next
  // request. So the file receives at least ~850 distinct pages, never all 6 MB: 2 MiB is what it
  // must have (a fresh database is a few KiB), whenever the checkpointer's thread got to run.
  for (int i = 0; i < 500 && (checkpointer->done() == 0 || fs::file_size(Path()) < (2u << 20)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(checkpointer->done(), 0u);
  EXPECT_GE(fs::file_size(Path()), 2u << 20) << "the database file did not receive the log's pages";
}

TEST_F(StoreTest, CommitsGoOnWhileTheCheckpointerIsHeld) {
  {
    auto store = Store::Open(Path(), nullptr);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    std::promise<void> entered, release;
    std::shared_future<void> released = release.get_future().share();
    bool once = false;
    (*store)->checkpointer()->BeforeEachForTest([&, released] {
      if (!once) {
        once = true;
        entered.set_value();
      }
      released.wait();
    });
    std::future<void> held = entered.get_future();
    std::string big(2000, 'y');
    int i = 0;
    for (; held.wait_for(std::chrono::seconds(0)) != std::future_status::ready && i < 100000; ++i) {
      ASSERT_TRUE((*store)->PutApp("local_cwd", "a-" + std::to_string(i), 1, i, {{"env", big}}).has_value());
      ASSERT_TRUE((*store)->Commit().has_value());
    }
    ASSERT_EQ(held.wait_for(std::chrono::seconds(0)), std::future_status::ready) << "no checkpoint was asked for";
    for (int more = 0; more < 2000; ++more, ++i) {  // ~4 MB more, the checkpoint held
      ASSERT_TRUE((*store)->PutApp("local_cwd", "a-" + std::to_string(i), 1, i, {{"env", big}}).has_value());
      ASSERT_TRUE((*store)->Commit().has_value());
    }
    release.set_value();
  }
  auto store = Store::Open(Path(), nullptr);
  auto apps = (*store)->LoadApps();
  ASSERT_TRUE(apps.has_value());
  EXPECT_GT(apps->size(), 2000u);
}

}  // namespace
}  // namespace torchxd::seam
