#include "seam/store.h"

#include "core/unique_fd.h"
#include "seam/app_record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>

namespace torchxd::seam {
namespace {

// Migration N brings the schema from version N to N+1.
const char* const kMigrations[] = {
    R"sql(
    CREATE TABLE apps(
      scheduler TEXT NOT NULL, app_id TEXT NOT NULL, state INTEGER NOT NULL,
      created_ms INTEGER NOT NULL, record TEXT NOT NULL,
      PRIMARY KEY(scheduler, app_id));
    CREATE INDEX apps_by_created ON apps(created_ms);
    CREATE TABLE replicas(
      scheduler TEXT NOT NULL, app_id TEXT NOT NULL, role TEXT NOT NULL,
      replica_id INTEGER NOT NULL, attempt INTEGER NOT NULL, state INTEGER NOT NULL,
      record TEXT NOT NULL,
      PRIMARY KEY(scheduler, app_id, role, replica_id, attempt));
    CREATE TABLE events(
      seq INTEGER PRIMARY KEY AUTOINCREMENT, scheduler TEXT NOT NULL, app_id TEXT NOT NULL,
      time_ms INTEGER NOT NULL, what TEXT NOT NULL, state INTEGER NOT NULL, msg TEXT NOT NULL);
    CREATE INDEX events_by_app ON events(scheduler, app_id);
    )sql",
    // An app's parts fixed at submit (its AppDef) in a row of their own,
    // written once, and its launch inputs (the client's environment, its
    // replicas' requests) in another, written when they change: its row in
    // apps holds the rest, so that a change of state rewrites only that
    // (sqlite rewrites a row whole). An app written whole has no parts.
    R"sql(
    CREATE TABLE app_parts(
      scheduler TEXT NOT NULL, app_id TEXT NOT NULL, part INTEGER NOT NULL, text TEXT NOT NULL,
      PRIMARY KEY(scheduler, app_id, part));
    )sql",
    // No table changes: a local app's replicas may share their role's variables,
    // kept once in its record (role_envs; each request's shares_role_env). A
    // torchxd that does not know them would start replicas without them, so it
    // must refuse this database rather than read it.
    R"sql(
    -- records may hold role_envs
    )sql",
};

std::string_view ColumnView(sqlite3_stmt* s, int column) {
  const unsigned char* text = sqlite3_column_text(s, column);
  return text == nullptr ? std::string_view()
                         : std::string_view(reinterpret_cast<const char*>(text),
                                            static_cast<size_t>(sqlite3_column_bytes(s, column)));
}

std::string ColumnText(sqlite3_stmt* s, int column) {
  const unsigned char* text = sqlite3_column_text(s, column);
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text),
                                                       static_cast<size_t>(sqlite3_column_bytes(s, column)));
}

struct Stmt {
  sqlite3_stmt* s;
  ~Stmt() { sqlite3_reset(s); sqlite3_clear_bindings(s); }
};

// Not copied (a record can be megabytes): each binding is cleared by a Stmt
// guard, or the statement finalized, while the text it points to lives.
void BindText(sqlite3_stmt* s, int i, std::string_view v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
}

}  // namespace

namespace {

// How much of the database start-up's reads may map (address space, not memory).
constexpr int64_t kStartupMapBytes = int64_t{1} << 30;

// The records hold users' environments and arguments: the database and its
// -wal and -shm (sqlite gives them the database's mode) are the daemon's alone.
Result<void> MakePrivate(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Fail(Error::Io("open " + path + ": " + strerror(errno)));
  if (::fchmod(fd.get(), 0600) != 0) return Fail(Error::Io("chmod " + path + ": " + strerror(errno)));
  for (const char* suffix : {"-wal", "-shm"}) {
    std::string side = path + suffix;
    if (::chmod(side.c_str(), 0600) != 0 && errno != ENOENT) {
      return Fail(Error::Io("chmod " + side + ": " + strerror(errno)));
    }
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, std::string* warning) {
  for (int round = 0; round < 2; ++round) {
    if (auto ok = MakePrivate(path); !ok) return Fail(ok.error());
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                                    SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
      sqlite3_close(db);
      return Fail(Error::Io("open " + path + ": " + msg));
    }
    std::unique_ptr<Store> store(new Store(db));
    sqlite3_busy_timeout(db, 5000);
    auto check = store->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA mmap_size=" +
                             std::to_string(kStartupMapBytes) + ";");
    bool ok = check.has_value();
    if (ok) {
      sqlite3_stmt* q = nullptr;
      ok = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &q, nullptr) == SQLITE_OK &&
           sqlite3_step(q) == SQLITE_ROW &&
           std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 0))) == "ok";
      sqlite3_finalize(q);
    }
    if (ok) {
      if (auto migrated = store->Migrate(); !migrated) return Fail(migrated.error());
      if (auto checkpointer = StoreCheckpointer::Open(path); checkpointer) {
        store->checkpointer_ = std::move(*checkpointer);
        // The hook replaces sqlite's automatic checkpoints on this connection.
        sqlite3_wal_hook(db, &Store::OnWalCommit, store.get());
      } else if (warning) {
        *warning += (warning->empty() ? "" : "; ") + checkpointer.error().message +
                    "; checkpoints run on the loop thread";
      }
      return store;
    }
    store.reset();
    if (round == 1) return Fail(Error::Io("cannot create a usable database at " + path));
    std::string aside = path + ".corrupt-" + std::to_string(std::time(nullptr));
    std::error_code ec;
    std::filesystem::rename(path, aside, ec);
    std::filesystem::remove(path + "-wal", ec);
    std::filesystem::remove(path + "-shm", ec);
    if (warning) *warning = "database " + path + " was corrupt; moved it to " + aside + " and started a new one";
  }
  return Fail(Error::Internal("unreachable"));
}

Store::~Store() {
  (void)Commit();
  for (auto* s : statements_) sqlite3_finalize(s);
  checkpointer_.reset();  // closed first: the loop's connection, the last, checkpoints on close
  sqlite3_close(db_);
}

int Store::OnWalCommit(void* self, sqlite3* /*db*/, const char* /*name*/, int pages) {
  if (pages >= kCheckpointPages) static_cast<Store*>(self)->checkpointer_->Request();
  return SQLITE_OK;
}

Error Store::SqlError(const std::string& what) const {
  return Error::Io("sqlite " + what + ": " + sqlite3_errmsg(db_));
}

Result<void> Store::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Fail(Error::Io("sqlite: " + msg));
  }
  return {};
}

Result<void> Store::Migrate() {
  if (auto ok = Exec("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
      !ok) {
    return ok;
  }
  int version = 0;
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db_, "SELECT value FROM meta WHERE key='schema_version'", -1, &q, nullptr);
  if (sqlite3_step(q) == SQLITE_ROW) version = std::atoi(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)));
  sqlite3_finalize(q);
  if (version > kSchemaVersion) {
    return Fail(Error::InvalidArgument("the database has schema version " + std::to_string(version) +
                                       ", newer than this torchxd (" +
                                       std::to_string(kSchemaVersion) + "); use a newer torchxd"));
  }
  for (; version < kSchemaVersion; ++version) {
    std::string sql = std::string("BEGIN;") + kMigrations[version] +
                      "INSERT OR REPLACE INTO meta VALUES('schema_version','" +
                      std::to_string(version + 1) + "'); COMMIT;";
    if (auto ok = Exec(sql); !ok) {
      (void)Exec("ROLLBACK");
      return ok;
    }
  }
  return {};
}

Result<void> Store::StepOnce(sqlite3_stmt*& stmt, const char* sql) {
  if (stmt == nullptr) {
    auto prepared = Prepare(sql);
    if (!prepared) return Fail(prepared.error());
    stmt = *prepared;
  }
  int rc = sqlite3_step(stmt);
  Result<void> out = rc == SQLITE_DONE ? Result<void>{} : Result<void>(Fail(SqlError(sql)));
  sqlite3_reset(stmt);
  return out;
}

Result<void> Store::EnsureTransaction() {
  if (in_transaction_) return {};
  if (auto ok = StepOnce(begin_, "BEGIN"); !ok) return ok;
  in_transaction_ = true;
  return {};
}

Result<void> Store::Commit() {
  if (!in_transaction_) return {};
  in_transaction_ = false;
  auto committed = StepOnce(commit_, "COMMIT");
  if (committed) {
    if (!awaiting_rewrite_) RunStored();
    return {};
  }
  awaiting_rewrite_ = true;
  // Whether or not sqlite already rolled back (it does on a full disk), the
  // turn's writes are gone: the owners of that state must write it again.
  if (sqlite3_get_autocommit(db_) == 0) (void)Exec("ROLLBACK");
  lost_writes_ = true;
  return Fail(committed.error());
}

void Store::Rollback() {
  if (!in_transaction_) return;
  in_transaction_ = false;
  if (sqlite3_get_autocommit(db_) == 0) (void)Exec("ROLLBACK");
  lost_writes_ = true;
  awaiting_rewrite_ = true;
}

void Store::WhenStored(std::function<void()> fn) {
  if (!in_transaction_ && !awaiting_rewrite_) return fn();
  when_stored_.push_back(std::move(fn));
}

void Store::Rewritten() {
  awaiting_rewrite_ = false;
  if (!in_transaction_) RunStored();
}

void Store::RunStored() {
  std::vector<std::function<void()>> ready;
  ready.swap(when_stored_);
  for (auto& fn : ready) fn();
}

bool Store::TakeLostWrites() {
  bool lost = lost_writes_;
  lost_writes_ = false;
  return lost;
}

Result<sqlite3_stmt*> Store::Prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
    return Fail(SqlError("prepare"));
  }
  statements_.push_back(s);
  return s;
}

Result<void> Store::PutApp(const std::string& scheduler, const std::string& app_id, int state,
                           int64_t created_ms, const nlohmann::json& record) {
  return PutAppText(scheduler, app_id, state, created_ms,
                    record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<void> Store::PutAppText(const std::string& scheduler, const std::string& app_id, int state,
                               int64_t created_ms, const std::string& record) {
  if (auto ok = EnsureTransaction(); !ok) return ok;
  if (auto ok = WriteAppsRow(scheduler, app_id, state, created_ms, true, record); !ok) return ok;
  if (auto ok = StepWith(drop_app_parts_, "DELETE FROM app_parts WHERE scheduler=?1 AND app_id=?2", scheduler, app_id);
      !ok) {
    return ok;
  }
  if (on_change_) on_change_();
  return {};
}

Result<void> Store::WriteAppsRow(const std::string& scheduler, const std::string& app_id, int state,
                                 int64_t created_ms, bool insert, std::string_view record) {
  sqlite3_stmt*& cached = insert ? put_app_ : update_app_;
  if (cached == nullptr) {
    auto s = Prepare(insert ? "INSERT OR REPLACE INTO apps VALUES(?1,?2,?3,?4,?5)"
                            : "UPDATE apps SET state=?3, record=?5 WHERE scheduler=?1 AND app_id=?2");
    if (!s) return Fail(s.error());
    cached = *s;
  }
  sqlite3_stmt* stmt = cached;
  Stmt guard{stmt};
  BindText(stmt, 1, scheduler);
  BindText(stmt, 2, app_id);
  sqlite3_bind_int(stmt, 3, state);
  if (insert) sqlite3_bind_int64(stmt, 4, created_ms);
  BindText(stmt, 5, record);
  if (sqlite3_step(stmt) != SQLITE_DONE) return Fail(SqlError("write app " + app_id));
  if (!insert && sqlite3_changes(db_) == 0) {
    return Fail(Error::Io("write app " + app_id + ": its row is not in the store"));  // the caller writes it whole next
  }
  return {};
}

Result<void> Store::StepWith(sqlite3_stmt*& cached, const char* sql, const std::string& scheduler,
                             const std::string& app_id, std::optional<int> part, std::string_view text) {
  if (cached == nullptr) {
    auto s = Prepare(sql);
    if (!s) return Fail(s.error());
    cached = *s;
  }
  sqlite3_stmt* stmt = cached;
  Stmt guard{stmt};
  BindText(stmt, 1, scheduler);
  BindText(stmt, 2, app_id);
  if (part) {
    sqlite3_bind_int(stmt, 3, *part);
    BindText(stmt, 4, text);
  }
  if (sqlite3_step(stmt) != SQLITE_DONE) return Fail(SqlError("write app " + app_id));
  return {};
}

Result<void> Store::PutAppParts(const std::string& scheduler, const std::string& app_id, int state,
                                int64_t created_ms, const std::string* fixed, const std::string* launch,
                                std::string_view changing) {
  if (fixed != nullptr && launch == nullptr) {
    return Fail(Error::Internal("write app " + app_id + ": a whole row needs its launch inputs"));
  }
  if (auto ok = EnsureTransaction(); !ok) return ok;
  if (auto ok = WriteAppsRow(scheduler, app_id, state, created_ms, fixed != nullptr, changing); !ok) return ok;
  constexpr const char* kPut = "INSERT OR REPLACE INTO app_parts VALUES(?1,?2,?3,?4)";
  for (auto [part, text] : {std::pair{kFixedPart, fixed}, std::pair{kLaunchPart, launch}}) {
    if (text == nullptr) continue;
    if (auto ok = StepWith(put_app_part_, kPut, scheduler, app_id, part, *text); !ok) return ok;
  }
  if (on_change_) on_change_();
  return {};
}

Result<void> Store::PutReplica(const std::string& scheduler, const std::string& app_id,
                               const std::string& role, int replica_id, int attempt, int state,
                               std::string_view record) {
  if (auto ok = EnsureTransaction(); !ok) return ok;
  if (put_replica_ == nullptr) {
    auto s = Prepare("INSERT OR REPLACE INTO replicas VALUES(?,?,?,?,?,?,?)");
    if (!s) return Fail(s.error());
    put_replica_ = *s;
  }
  sqlite3_stmt* stmt = put_replica_;
  Stmt guard{stmt};
  BindText(stmt, 1, scheduler);
  BindText(stmt, 2, app_id);
  BindText(stmt, 3, role);
  sqlite3_bind_int(stmt, 4, replica_id);
  sqlite3_bind_int(stmt, 5, attempt);
  sqlite3_bind_int(stmt, 6, state);
  BindText(stmt, 7, record);
  if (sqlite3_step(stmt) != SQLITE_DONE) return Fail(SqlError("write replica of " + app_id));
  if (on_change_) on_change_();
  if (attempt <= kAttemptsKept) return {};
  // Each restart adds an attempt: the one that falls out of the window goes.
  if (trim_attempts_ == nullptr) {
    auto s = Prepare("DELETE FROM replicas WHERE scheduler=? AND app_id=? AND role=? AND replica_id=? AND attempt<=?");
    if (!s) return Fail(s.error());
    trim_attempts_ = *s;
  }
  Stmt trim{trim_attempts_};
  BindText(trim_attempts_, 1, scheduler);
  BindText(trim_attempts_, 2, app_id);
  BindText(trim_attempts_, 3, role);
  sqlite3_bind_int(trim_attempts_, 4, replica_id);
  sqlite3_bind_int(trim_attempts_, 5, attempt - kAttemptsKept);
  if (sqlite3_step(trim_attempts_) != SQLITE_DONE) return Fail(SqlError("trim attempts of " + app_id));
  return {};
}

Result<uint64_t> Store::AddEvent(const std::string& scheduler, const std::string& app_id,
                                 int64_t time_ms, const std::string& what, int state,
                                 const std::string& msg, size_t keep) {
  if (auto ok = EnsureTransaction(); !ok) return Fail(ok.error());
  if (add_event_ == nullptr) {
    auto s = Prepare("INSERT INTO events(scheduler,app_id,time_ms,what,state,msg) VALUES(?,?,?,?,?,?)");
    if (!s) return Fail(s.error());
    add_event_ = *s;
  }
  sqlite3_stmt* stmt = add_event_;
  Stmt guard{stmt};
  BindText(stmt, 1, scheduler);
  BindText(stmt, 2, app_id);
  sqlite3_bind_int64(stmt, 3, time_ms);
  BindText(stmt, 4, what);
  sqlite3_bind_int(stmt, 5, state);
  BindText(stmt, 6, msg);
  if (sqlite3_step(stmt) != SQLITE_DONE) return Fail(SqlError("write event of " + app_id));
  auto seq = static_cast<uint64_t>(sqlite3_last_insert_rowid(db_));
  if (keep == 0) return seq;
  // Unknown at first (written by an earlier daemon): assume full, trim after a quarter more.
  size_t& stored = events_kept_.try_emplace(scheduler + "/" + app_id, keep).first->second;
  if (++stored <= keep + keep / 4) return seq;
  if (trim_events_ == nullptr) {
    auto s = Prepare(
        "DELETE FROM events WHERE scheduler=?1 AND app_id=?2 AND seq <= (SELECT seq FROM events WHERE "
        "scheduler=?1 AND app_id=?2 ORDER BY seq DESC LIMIT 1 OFFSET ?3)");
    if (!s) return Fail(s.error());
    trim_events_ = *s;
  }
  Stmt trim{trim_events_};
  BindText(trim_events_, 1, scheduler);
  BindText(trim_events_, 2, app_id);
  sqlite3_bind_int64(trim_events_, 3, static_cast<int64_t>(keep));
  if (sqlite3_step(trim_events_) != SQLITE_DONE) return Fail(SqlError("trim events of " + app_id));
  stored = keep;
  return seq;
}

Result<std::vector<StoredEvent>> LoadEventsWith(sqlite3* db, sqlite3_stmt* statement, const std::string& scheduler,
                                                const std::string& app_id, uint64_t after_seq, size_t limit) {
  Stmt guard{statement};
  BindText(statement, 1, scheduler);
  BindText(statement, 2, app_id);
  sqlite3_bind_int64(statement, 3, static_cast<int64_t>(std::min<uint64_t>(after_seq, INT64_MAX)));
  sqlite3_bind_int64(statement, 4, static_cast<int64_t>(limit));
  std::vector<StoredEvent> out;
  int rc;
  while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
    StoredEvent e;
    e.seq = static_cast<uint64_t>(sqlite3_column_int64(statement, 0));
    e.time_ms = sqlite3_column_int64(statement, 1);
    e.what = ColumnText(statement, 2);
    e.state = sqlite3_column_int(statement, 3);
    e.msg = ColumnText(statement, 4);
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return Fail(Error::Io("sqlite read events of " + app_id + ": " + sqlite3_errmsg(db)));
  std::reverse(out.begin(), out.end());
  return out;
}

Result<std::vector<StoredEvent>> Store::LoadEvents(const std::string& scheduler, const std::string& app_id,
                                                   uint64_t after_seq, size_t limit) {
  if (load_events_ == nullptr) {
    auto s = Prepare(kLoadEventsSql);
    if (!s) return Fail(s.error());
    load_events_ = *s;
  }
  return LoadEventsWith(db_, load_events_, scheduler, app_id, after_seq, limit);
}

Result<void> Store::DeleteApp(const std::string& scheduler, const std::string& app_id) {
  if (auto ok = EnsureTransaction(); !ok) return ok;
  events_kept_.erase(scheduler + "/" + app_id);
  for (const char* table : {"apps", "app_parts", "replicas", "events"}) {
    std::string sql = std::string("DELETE FROM ") + table + " WHERE scheduler=? AND app_id=?";
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr);
    BindText(s, 1, scheduler);
    BindText(s, 2, app_id);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return Fail(SqlError("delete " + app_id));
  }
  if (on_change_) on_change_();
  return {};
}

nlohmann::json StoredApp::ParseWithout(const std::string& text, std::initializer_list<std::string_view> keys) {
  auto keep = [&keys](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth != 1 || event != nlohmann::json::parse_event_t::key) return true;
    const auto& key = parsed.get_ref<const std::string&>();
    return std::find(keys.begin(), keys.end(), key) == keys.end();
  };
  return nlohmann::json::parse(text, keep, false);
}

Result<std::vector<StoredApp>> Store::LoadApps() {
  if (auto ok = Commit(); !ok) return Fail(ok.error());
  std::vector<StoredApp> apps;
  std::map<std::pair<std::string, std::string>, size_t> index;
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db_,
                     "SELECT a.scheduler, a.app_id, a.record, a.state, f.text, l.text FROM apps a "
                     "LEFT JOIN app_parts f ON f.scheduler=a.scheduler AND f.app_id=a.app_id AND f.part=0 "
                     "LEFT JOIN app_parts l ON l.scheduler=a.scheduler AND l.app_id=a.app_id AND l.part=1 "
                     "ORDER BY a.created_ms",
                     -1, &s, nullptr);
  while (sqlite3_step(s) == SQLITE_ROW) {
    StoredApp app;
    app.scheduler = ColumnText(s, 0);
    app.app_id = ColumnText(s, 1);
    // An empty row is no record, whatever parts it has: it is set aside.
    app.record = ColumnView(s, 2).empty() ? std::string() : JoinRecordText(ColumnView(s, 4), ColumnView(s, 5), ColumnView(s, 2));
    app.state = sqlite3_column_int(s, 3);
    index[{app.scheduler, app.app_id}] = apps.size();
    apps.push_back(std::move(app));
  }
  sqlite3_finalize(s);
  // The latest attempt of each replica.
  sqlite3_prepare_v2(db_,
                     "SELECT scheduler, app_id, record FROM replicas r WHERE attempt = (SELECT "
                     "MAX(attempt) FROM replicas x WHERE x.scheduler=r.scheduler AND "
                     "x.app_id=r.app_id AND x.role=r.role AND x.replica_id=r.replica_id)",
                     -1, &s, nullptr);
  while (sqlite3_step(s) == SQLITE_ROW) {
    auto it = index.find({reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                          reinterpret_cast<const char*>(sqlite3_column_text(s, 1))});
    if (it == index.end()) continue;
    apps[it->second].replicas.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 2)));
  }
  sqlite3_finalize(s);
  (void)Exec("PRAGMA mmap_size=0");  // a truncated or unreadable file is then an error, not a SIGBUS
  return apps;
}

}  // namespace torchxd::seam
