// Store: torchxd's sqlite3 database (WAL) in the state dir. It keeps every
// app (its AppDef, cfg, request and status), every replica attempt, and every
// state change (the events table). The daemon writes before it acknowledges.
//
// Writes are tiny single-row statements in WAL mode with synchronous=NORMAL
// (no fsync per commit), so they run on the loop thread; bench/ measures them.
// Checkpoints, which do fsync, run on a StoreCheckpointer's thread.
// Group commit: the writes of one loop turn share a transaction, which the
// daemon commits at the end of the turn; a `run` is committed before it is
// acknowledged, and refused if that commit fails.
// Schema changes are numbered migrations (schema_version in `meta`). A
// corrupt file is moved aside (torchxd.db.corrupt-<time>) and a new one made.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SEAM_STORE_H_
#define TORCHXD_SEAM_STORE_H_

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "seam/store_checkpointer.h"

namespace torchxd::seam {

struct StoredApp {
  std::string scheduler;
  std::string app_id;
  std::string record;                 // the AppRecord, as JSON text
  std::vector<std::string> replicas;  // the latest attempt of each replica, as JSON text
  int state = 0;                      // the app's state as stored beside it (a core::AppState)
  // The text parsed (discarded when unreadable). The scheduler that owns the
  // app parses it while it loads it, one app at a time: a start with
  // thousands of apps never holds all their parsed forms at once.
  static nlohmann::json Parse(const std::string& text) { return nlohmann::json::parse(text, nullptr, false); }
  // The same without the named top-level keys, which are skipped, not built.
  static nlohmann::json ParseWithout(const std::string& text, std::initializer_list<std::string_view> keys);
};

// One row of an app's event timeline, as stored (seam/app_events.h reads it).
struct StoredEvent {
  uint64_t seq = 0;
  int64_t time_ms = 0;
  std::string what;
  int state = 0;
  std::string msg;
};

// An app's events as either connection to the store reads them (the loop's
// Store, the FileWorker's StoreReader): `statement`, prepared on `db` from
// kLoadEventsSql, gives the newest `limit` after `after_seq`, returned oldest
// first; the statement is reset after, ending its read.
inline constexpr char kLoadEventsSql[] =
    "SELECT seq,time_ms,what,state,msg FROM events WHERE scheduler=?1 AND app_id=?2 AND seq>?3 "
    "ORDER BY seq DESC LIMIT ?4";
[[nodiscard]] Result<std::vector<StoredEvent>> LoadEventsWith(sqlite3* db, sqlite3_stmt* statement,
                                                              const std::string& scheduler, const std::string& app_id,
                                                              uint64_t after_seq, size_t limit);

class Store {
 public:
  [[nodiscard]] static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                                           std::string* warning);
  ~Store();

  [[nodiscard]] Result<void> PutApp(const std::string& scheduler, const std::string& app_id,
                                    int state, int64_t created_ms, const nlohmann::json& record);
  // The same with the record already JSON text.
  [[nodiscard]] Result<void> PutAppText(const std::string& scheduler, const std::string& app_id, int state,
                                        int64_t created_ms, const std::string& record);
  // The record as AppRecord::ChangedText gives it: with `fixed` (and
  // `launch`), the whole app; without, its state, its changing part and the
  // launch inputs if given (the app must be stored). Each part is a row of
  // its own: a change of state rewrites none of the big ones.
  [[nodiscard]] Result<void> PutAppParts(const std::string& scheduler, const std::string& app_id, int state,
                                         int64_t created_ms, const std::string* fixed, const std::string* launch,
                                         std::string_view changing);
  // `record`: the replica's JSON text (ReplicaInfoToJsonText).
  [[nodiscard]] Result<void> PutReplica(const std::string& scheduler, const std::string& app_id,
                                        const std::string& role, int replica_id, int attempt,
                                        int state, std::string_view record);
  // Keeps the app's newest `keep` events (0: all): older ones are deleted a
  // few at a time, so that a crash-looping replica's history stays bounded.
  // Returns the event's sequence number (increasing across all apps).
  [[nodiscard]] Result<uint64_t> AddEvent(const std::string& scheduler, const std::string& app_id,
                                          int64_t time_ms, const std::string& what, int state,
                                          const std::string& msg, size_t keep = 0);
  // The app's events after `after_seq`, oldest first, at most `limit` (the newest of them).
  [[nodiscard]] Result<std::vector<StoredEvent>> LoadEvents(const std::string& scheduler, const std::string& app_id,
                                                            uint64_t after_seq, size_t limit);
  [[nodiscard]] Result<void> DeleteApp(const std::string& scheduler, const std::string& app_id);
  // Every app with its replicas' latest attempts, oldest first. The database is read
  // through a memory map until then (start-up reads it whole: no read(2) per page), and
  // through read(2) after, as the loop's small queries need.
  [[nodiscard]] Result<std::vector<StoredApp>> LoadApps();
  // Commits the open transaction, if any. On failure (e.g. a full disk) the
  // transaction is rolled back and its writes are lost: TakeLostWrites() says
  // so once, and the daemon has every scheduler write its state again.
  [[nodiscard]] Result<void> Commit();
  // Is a transaction open (writes not committed yet)?
  bool pending() const { return in_transaction_; }
  // Abandons the open transaction (a write of it failed); its writes are lost as above.
  void Rollback();
  bool TakeLostWrites();
  // Called after every write of an app, a replica or a deletion (the apps changed).
  void OnChange(std::function<void()> callback) { on_change_ = std::move(callback); }
  // Runs `fn` once everything written so far is durable: at once when nothing
  // is pending, else after the next commit that succeeds while no failed one
  // awaits its rewrite (see Rewritten). What must not outlive a record that
  // was never stored waits here (an attempt's run directory and exit.json).
  void WhenStored(std::function<void()> fn);
  // Every app was written again after a failed commit, and committed.
  void Rewritten();

  // The checkpointer, or null where it could not open (then sqlite's own
  // checkpoints run on the loop, as a warning from Open says).
  StoreCheckpointer* checkpointer() { return checkpointer_.get(); }

  static constexpr int kSchemaVersion = 3;
  // The log's size, in pages, past which a commit asks for a checkpoint.
  static constexpr int kCheckpointPages = 1000;
  // Attempts kept per replica (the latest ones): each restart adds a row.
  static constexpr int kAttemptsKept = 8;

 private:
  explicit Store(sqlite3* db) : db_(db) {}
  [[nodiscard]] Result<void> Exec(const std::string& sql);
  // Runs a statement without rows (BEGIN, COMMIT), prepared once into `stmt`.
  [[nodiscard]] Result<void> StepOnce(sqlite3_stmt*& stmt, const char* sql);
  // Runs `sql` (prepared once into `cached`) with ?1 scheduler, ?2 app_id and,
  // with `part`, ?3 part and ?4 text.
  [[nodiscard]] Result<void> StepWith(sqlite3_stmt*& cached, const char* sql, const std::string& scheduler,
                                      const std::string& app_id, std::optional<int> part = std::nullopt,
                                      std::string_view text = {});
  // The app's row in `apps`: inserted (or replaced) whole, or its state and
  // record changed (an error when it is not there).
  [[nodiscard]] Result<void> WriteAppsRow(const std::string& scheduler, const std::string& app_id, int state,
                                          int64_t created_ms, bool insert, std::string_view record);
  static constexpr int kFixedPart = 0;   // app_parts.part of an app's fixed part
  static constexpr int kLaunchPart = 1;  // and of its launch inputs
  [[nodiscard]] Result<void> EnsureTransaction();
  [[nodiscard]] Result<void> Migrate();
  [[nodiscard]] Result<sqlite3_stmt*> Prepare(const char* sql);
  Error SqlError(const std::string& what) const;
  static int OnWalCommit(void* self, sqlite3* db, const char* name, int pages);

  sqlite3* db_;
  std::vector<sqlite3_stmt*> statements_;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* put_app_ = nullptr;
  sqlite3_stmt* update_app_ = nullptr;
  sqlite3_stmt* put_app_part_ = nullptr;
  sqlite3_stmt* drop_app_parts_ = nullptr;
  sqlite3_stmt* put_replica_ = nullptr;
  sqlite3_stmt* add_event_ = nullptr;
  sqlite3_stmt* trim_events_ = nullptr;
  sqlite3_stmt* load_events_ = nullptr;
  sqlite3_stmt* trim_attempts_ = nullptr;
  // Per "scheduler/app_id": events that may be stored now (the bound, after a trim).
  std::map<std::string, size_t> events_kept_;
  void RunStored();

  bool in_transaction_ = false;
  bool lost_writes_ = false;
  bool awaiting_rewrite_ = false;
  std::vector<std::function<void()>> when_stored_;
  std::function<void()> on_change_;
  std::unique_ptr<StoreCheckpointer> checkpointer_;
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_STORE_H_
