// What a daemon finds in its store is read as hostile input: a record that an
// older torchxd wrote, a hand edit, or a bug stored can hold any value of any
// type in any field, and the daemon must still start, serve, and keep every
// other app. An app it cannot read is set aside (logged), never a crash.
#include <sqlite3.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>

#include "core/scheduler_opts.h"
#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kOneGpu[] = R"({"gpus": [{"index": 0, "uuid": "GPU-0", "numa_node": 0}]})";

class StoredRecordsTest : public DaemonFixture {
 protected:
  struct Row {
    std::string scheduler, app_id;
    int state = 0;
    int64_t created_ms = 0;
    json record;
  };
  struct ReplicaRow {
    std::string scheduler, app_id, role;
    int replica_id = 0, attempt = 0, state = 0;
    json record;
  };

  sqlite3* Open() {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2((state_dir_ + "/torchxd.db").c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
    return db;
  }
  static std::string Text(sqlite3_stmt* q, int column) {
    const unsigned char* t = sqlite3_column_text(q, column);
    return t == nullptr ? "" : reinterpret_cast<const char*>(t);
  }
  std::vector<Row> Apps(sqlite3* db) {
    std::vector<Row> rows;
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT scheduler, app_id, state, created_ms, record, "
                       "COALESCE((SELECT text FROM app_parts p WHERE p.scheduler=a.scheduler AND p.app_id=a.app_id "
                       "AND p.part=0), ''), "
                       "COALESCE((SELECT text FROM app_parts p WHERE p.scheduler=a.scheduler AND p.app_id=a.app_id "
                       "AND p.part=1), '') FROM apps a",
                       -1, &q, nullptr);
    while (sqlite3_step(q) == SQLITE_ROW) {
      // The whole record: the parts fixed at submit and the launch inputs
      // (rows of their own) and the rest.
      json record = json::object();
      for (int column : {5, 6, 4}) {
        if (!Text(q, column).empty()) record.update(json::parse(Text(q, column)));
      }
      rows.push_back({Text(q, 0), Text(q, 1), sqlite3_column_int(q, 2), sqlite3_column_int64(q, 3), record});
    }
    sqlite3_finalize(q);
    return rows;
  }
  std::vector<ReplicaRow> Replicas(sqlite3* db, const std::string& app_id) {
    std::vector<ReplicaRow> rows;
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db, "SELECT scheduler, app_id, role, replica_id, attempt, state, record FROM replicas "
                           "WHERE app_id = ?1", -1, &q, nullptr);
    sqlite3_bind_text(q, 1, app_id.c_str(), -1, SQLITE_TRANSIENT);
    while (sqlite3_step(q) == SQLITE_ROW) {
      rows.push_back({Text(q, 0), Text(q, 1), Text(q, 2), sqlite3_column_int(q, 3), sqlite3_column_int(q, 4),
                      sqlite3_column_int(q, 5), json::parse(Text(q, 6))});
    }
    sqlite3_finalize(q);
    return rows;
  }
  static void Put(sqlite3* db, const Row& a) {
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db, "INSERT INTO apps VALUES (?1, ?2, ?3, ?4, ?5)", -1, &q, nullptr);
    std::string record = a.record.dump();
    sqlite3_bind_text(q, 1, a.scheduler.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(q, 2, a.app_id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(q, 3, a.state);
    sqlite3_bind_int64(q, 4, a.created_ms);
    sqlite3_bind_text(q, 5, record.c_str(), -1, SQLITE_TRANSIENT);
    EXPECT_EQ(sqlite3_step(q), SQLITE_DONE) << sqlite3_errmsg(db);
    sqlite3_finalize(q);
  }
  static void Put(sqlite3* db, const ReplicaRow& r) {
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db, "INSERT INTO replicas VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", -1, &q, nullptr);
    std::string record = r.record.dump();
    sqlite3_bind_text(q, 1, r.scheduler.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(q, 2, r.app_id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(q, 3, r.role.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(q, 4, r.replica_id);
    sqlite3_bind_int(q, 5, r.attempt);
    sqlite3_bind_int(q, 6, r.state);
    sqlite3_bind_text(q, 7, record.c_str(), -1, SQLITE_TRANSIENT);
    EXPECT_EQ(sqlite3_step(q), SQLITE_DONE) << sqlite3_errmsg(db);
    sqlite3_finalize(q);
  }
  // A box of one GPU (--gpu-topology).
  fs::path OneGpuTopology() {
    fs::path topology = dir_ / "one.json";
    std::ofstream(topology) << kOneGpu;
    return topology;
  }
  // A role of one replica that holds the GPU until `release` exists.
  static json WaitsFor(const fs::path& release) {
    return {{"name", "w"}, {"entrypoint", "sh"}, {"num_replicas", 1},
            {"args", {"-c", "until [ -e " + release.string() + " ]; do sleep 0.05; done"}},
            {"resource", {{"cpu", 1}, {"gpu", 1}, {"memMB", 64}}}};
  }
  // Every value of a type the field does not have, and the extremes of its own.
  static std::vector<json> BadValues() {
    return {nullptr, "x", -1, 1.5, 9223372036854775807LL, true, json::object(), json::array(),
            json::array({nullptr}), json::object({{"k", nullptr}})};
  }
};

// Three apps as a daemon left them (one ended, one running, one queued behind
// it for the box's one GPU), each copied once per field and bad value, its
// replicas' records too; a restart serves them all, the originals as they
// were.
TEST_F(StoredRecordsTest, ADaemonStartsAndServesWhateverTypesItsRecordsHold) {
  fs::path topology = OneGpuTopology();
  fs::path release = dir_ / "release";
  json waits = WaitsFor(release);
  StartDaemon({"--gpu-topology", topology.string(), "--live-restore"});
  std::string ended = Run(App("ended", {FakeRole("r", {"--stdout", "hi"})}),
                          {{"restart_backoff", 0.5}, {"max_duration", "1h"}});
  ASSERT_EQ(Wait(ended)["state"], "SUCCEEDED");
  std::string running = Run(App("running", {waits}), {{"restart_backoff", 0.5}});
  ASSERT_TRUE(WaitUntil([&] { return Status(running)["state"] == "RUNNING"; }));
  std::string queued = Run(App("queued", {waits}), {{"priority", 3}, {"restart_backoff_max", 2.0}});
  ASSERT_EQ(Status(queued)["state"], "PENDING");
  StopDaemon(SIGKILL);

  sqlite3* db = Open();
  ASSERT_NE(db, nullptr);
  std::vector<Row> originals = Apps(db);
  ASSERT_EQ(originals.size(), 3u);
  int copies = 0;
  sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
  for (const Row& original : originals) {
    std::vector<ReplicaRow> replicas = Replicas(db, original.app_id);
    // The fields of the record, and those of the objects in it, by JSON pointer.
    std::vector<json::json_pointer> fields;
    for (const auto& [key, value] : original.record.items()) {
      fields.emplace_back("/" + key);
      if (!value.is_object()) continue;
      int inner_fields = 0;  // a few of each object's: client_env holds the whole environment of this test
      for (const auto& [inner, unused] : value.items()) {
        if (inner_fields++ == 3) break;
        fields.emplace_back("/" + key + "/" + inner);
      }
    }
    fields.emplace_back("/app/roles/0/num_replicas");
    fields.emplace_back("/app/roles/0/resource/gpu");
    fields.emplace_back("/replicas/0/state");
    fields.emplace_back("/requests/0/env");
    for (const auto& field : fields) {
      for (const json& bad : BadValues()) {
        Row copy = original;
        copy.app_id = original.app_id + "-c" + std::to_string(copies++);
        copy.record["app_id"] = copy.app_id;
        if (!copy.record.contains(field.parent_pointer())) continue;
        copy.record[field] = bad;
        if (copy.record.contains("app_log_dir") && copy.record["app_log_dir"].is_string()) {
          copy.record["app_log_dir"] = (dir_ / "copies" / copy.app_id).string();  // never the original's
        }
        Put(db, copy);
        for (ReplicaRow r : replicas) {
          r.app_id = copy.app_id;
          // A copy never re-attaches to the original's monitor: its attempts ended.
          r.state = 5;
          r.record["state"] = 5;
          Put(db, r);
        }
      }
    }
    // The replicas' records, field by field, under copies of the record.
    for (const ReplicaRow& replica : replicas) {
      for (const auto& [key, unused] : replica.record.items()) {
        for (const json& bad : BadValues()) {
          Row copy = original;
          copy.app_id = original.app_id + "-r" + std::to_string(copies++);
          copy.record["app_id"] = copy.app_id;
          copy.record["app_log_dir"] = (dir_ / "copies" / copy.app_id).string();
          Put(db, copy);
          ReplicaRow r = replica;
          r.app_id = copy.app_id;
          r.record["monitor"] = json::object();  // never the original's monitor
          r.record[key] = bad;
          Put(db, r);
        }
      }
    }
  }
  EXPECT_EQ(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  ASSERT_GT(copies, 300);
  ASSERT_LT(copies, 2000) << "a restart of a sanitized daemon reads them within the fixture's wait";

  StartDaemon({"--gpu-topology", topology.string(), "--live-restore"});
  // The originals, as they were.
  EXPECT_EQ(Status(ended)["state"], "SUCCEEDED");
  EXPECT_EQ(ReadLog(ended, "r", 0), "hi\n") << "no record's figures cost another app its logs";
  EXPECT_EQ(Status(running)["state"], "RUNNING");
  EXPECT_EQ(Status(queued)["state"], "PENDING");
  // Every copy the daemon kept answers; the list answers whole.
  json list = CallOk("list", {{"limit", 5000}});
  std::set<std::string> listed;
  for (const auto& row : list["apps"]) listed.insert(row[1].get<std::string>());
  EXPECT_TRUE(listed.count(running.substr(running.rfind('/') + 1)));
  for (const std::string& id : listed) {
    auto st = Call("status", {{"app_handle", "local_cwd://torchx/" + id}});
    EXPECT_TRUE(st.has_value() || st.error().code == ErrorCode::kNotFound) << id << ": " << st.error().message;
  }
  EXPECT_GT(listed.size(), 3u) << "copies with a readable record are served";
  std::ofstream(release) << "go";
  EXPECT_EQ(Wait(running)["state"], "SUCCEEDED");
  EXPECT_EQ(StopDaemon(SIGTERM), 0) << ReadFile(daemon_log_);
}

// A queued app whose stored requests share a role's variables that its record
// no longer holds started without that role's replicas (and SUCCEEDED): a
// record whose requests do not read is set aside, saying so, and the daemon
// starts and serves the rest.
TEST_F(StoredRecordsTest, AnAppWhoseSharedVariablesDoNotReadIsSetAsideNotStartedWithoutThem) {
  fs::path topology = OneGpuTopology();
  fs::path release = dir_ / "release";
  json waits = WaitsFor(release);
  StartDaemon({"--gpu-topology", topology.string(), "--live-restore"});
  std::string holder = Run(App("holder", {waits}));
  ASSERT_TRUE(WaitUntil([&] { return Status(holder)["state"] == "RUNNING"; }));
  json a = waits, b = waits;
  a["name"] = "a";
  a["env"] = {{"X", "x-a"}};
  b["name"] = "b";
  b["env"] = {{"X", "x-b"}};
  b["resource"]["gpu"] = 0;
  std::string queued = Run(App("two", {a, b}));
  ASSERT_EQ(Status(queued)["state"], "PENDING");
  StopDaemon(SIGKILL);
  sqlite3* db = Open();
  ASSERT_NE(db, nullptr);
  std::string id = queued.substr(queued.rfind('/') + 1);
  std::string sql = "UPDATE app_parts SET text = json_remove(text, '$.role_envs.a') WHERE app_id = '" + id + "' AND part = 1";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  ASSERT_EQ(sqlite3_changes(db), 1) << "its launch inputs are a part of their own";
  sqlite3_close(db);
  StartDaemon({"--gpu-topology", topology.string(), "--live-restore"});
  EXPECT_EQ(Status(holder)["state"], "RUNNING");
  auto gone = Call("status", {{"app_handle", queued}});
  ASSERT_FALSE(gone.has_value()) << gone->dump();
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(ReadFile(daemon_log_), ::testing::HasSubstr("set aside"));
  EXPECT_THAT(ReadFile(daemon_log_), ::testing::HasSubstr("does not read"));
  std::ofstream(release) << "go";
  EXPECT_EQ(Wait(holder)["state"], "SUCCEEDED");
}

// A run option given as JSON null is TorchX's None: its default. A request
// with one was once stored and then refused, and every later start died
// reading it back.
TEST_F(StoredRecordsTest, ANullRunOptionIsItsDefaultAndTheDaemonStartsAgain) {
  StartDaemon();
  auto opts = core::SchedulerRunOpts("local_cwd");
  ASSERT_TRUE(opts.has_value());
  std::vector<std::string> handles;
  for (const auto& opt : (*opts)->options()) {
    SCOPED_TRACE(opt.name);
    json cfg = {{opt.name, nullptr}};
    auto r = Call("run", {{"app", App("null", {FakeRole("r", {"--sleep", "30"})})}, {"cfg", cfg},
                          {"scheduler", "local_cwd"}, {"cwd", dir_.string()}, {"env", json::object()}});
    ASSERT_TRUE(r.has_value()) << r.error().message;
    handles.push_back((*r)["app_handle"]);
  }
  StopDaemon(SIGKILL);
  StartDaemon();
  for (const auto& h : handles) {
    json st = Status(h);
    EXPECT_NE(st["state"], "UNKNOWN") << st.dump();
    CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
  }
  EXPECT_EQ(StopDaemon(SIGTERM), 0);
}

}  // namespace
}  // namespace torchxd::testing
