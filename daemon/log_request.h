// LogRequest: one `log` call (docs/protocol.md) in progress.
//
// It reads the selected replicas' stream files from disk in slices on the
// loop (never a large synchronous read; each replica's index and where its
// reading starts are worked out on the FileWorker, off the loop), sends lines as events in batches,
// and pauses while the client's socket is backed up, so a slow or stopped
// follower costs bounded memory and never blocks a replica: it just resumes
// from disk. Followers are woken by the LogStore, never by a timer; a follow
// ends once the app is terminal and everything was sent. Bytes a follower
// could not read because rotation removed them are reported, as are bytes
// before the first available one when reading from the start.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DAEMON_LOG_REQUEST_H_
#define TORCHXD_DAEMON_LOG_REQUEST_H_

#include <sys/types.h>
#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/line_regex.h"
#include "core/replica_key.h"
#include "core/result.h"
#include "core/uv_handle.h"
#include "daemon/server.h"
#include "logfiles/log_stream.h"
#include "seam/app_events.h"
#include "seam/file_worker.h"
#include "seam/log_store.h"

namespace torchxd::daemon {

// A position in one replica's stream that events carry, so a client can
// resume exactly after the last event it saw. On the wire it is an opaque
// string: "<offset>" or "<offset>a" (the attempt boundary at <offset> was
// already sent).
struct LogCursor {
  uint64_t offset = 0;
  bool attempt_sent = false;
  std::string ToString() const { return std::to_string(offset) + (attempt_sent ? "a" : ""); }
};
[[nodiscard]] Result<LogCursor> ParseLogCursor(const std::string& text);

struct LogQuery {
  std::string stream = "combined";  // combined | stdout | stderr
  std::optional<std::string> role;
  std::vector<int> replicas;  // empty: all
  std::optional<std::string> regex;
  std::optional<int64_t> since_ms;  // inclusive
  std::optional<int64_t> until_ms;  // exclusive
  bool follow = false;
  std::optional<int> tail_lines;
  std::optional<int> attempt;
  // Where a reconnecting follower stopped, per "role/replica": the `cursor` of
  // the last event it received. It replaces since/tail_lines for that replica.
  std::map<std::string, LogCursor> cursors;
  // A follower also hears the app's events (seam/app_events.h): "new" as
  // they happen, "all" the stored ones first; "" none.
  std::string app_events;
};
[[nodiscard]] Result<LogQuery> ParseLogQuery(const nlohmann::json& params);

struct LogTarget {
  std::string role;
  int replica = 0;
  std::string dir;          // the replica's log dir
  uint64_t lost_bytes = 0;  // output that could not be stored (a full log disk)

  core::ReplicaKey Key() const { return {role, replica}; }
};

// Whose rights the log files are read with (the daemon's own when it wrote them).
struct FileOwner {
  uid_t uid = 0;
  gid_t gid = 0;
};

class LogRequest {
 public:
  // `app_live` says whether more output may still come (follow mode).
  // The files are read with `read_as`'s rights; what their size decides (the
  // index, a tail) on `worker`, the lines in slices on the loop.
  LogRequest(uv_loop_t* loop, seam::LogStore* logs, std::string app_key, std::vector<LogTarget> targets,
             LogQuery query, std::function<bool()> app_live, std::shared_ptr<Responder> responder,
             std::function<void(LogRequest*)> on_done, FileOwner read_as, seam::FileWorker* worker);
  ~LogRequest();
  // Why a replica's log cannot be read now (by "role/replica"; "" = it can):
  // a follower gets each new reason as a `warning` event, a one-off read's
  // result names them (`unreadable`). Call before Start.
  void SetProblemSource(std::function<std::string(const std::string& replica_key)> problem) {
    problem_ = std::move(problem);
  }
  // A follower with app_events hears `history` first, then what `feed` tells. Call before Start.
  void SetAppEvents(seam::EventFeed* feed, std::vector<seam::AppEvent> history) {
    feed_ = feed;
    event_history_ = std::move(history);
  }
  // Starts reading; a bad query is an error here, a replica whose files
  // cannot be read an error the responder gets (and the request ends).
  [[nodiscard]] Result<void> Start();

 private:
  struct Cursor;
  void OnPrepared(size_t index, const std::shared_ptr<void>& result);
  [[nodiscard]] Result<void> Begin();  // every cursor is placed: send and follow
  void Reload(Cursor& c);              // reads its layout again, off the loop
  void Schedule();
  void Step();
  bool Pump(Cursor& c, size_t& budget);  // true when this cursor has nothing more for now
  void EmitLine(Cursor& c, std::string_view line, uint64_t line_start, uint64_t line_end);
  void AppendToLine(Cursor& c, std::string_view piece, uint64_t piece_start);
  void Flush(Cursor& c);
  void Event(Cursor& c, nlohmann::json event);
  void Warn(Cursor& c);  // a follower learns a new reason its replica's log cannot be read
  void Finish();
  void SendAppEvent(const seam::AppEvent& event);

  uv_loop_t* loop_;
  seam::FileWorker* worker_;
  FileOwner read_as_;
  seam::LogStore* logs_;
  std::string app_key_;
  LogQuery query_;
  std::optional<core::LineRegex> regex_;
  std::function<bool()> app_live_;
  std::function<std::string(const std::string&)> problem_;
  std::shared_ptr<Responder> responder_;
  std::function<void(LogRequest*)> on_done_;
  std::vector<std::unique_ptr<Cursor>> cursors_;
  UvHandle<uv_idle_t> idle_;
  uint64_t subscription_ = 0;
  bool scheduled_ = false;
  bool done_ = false;
  size_t preparing_ = 0;          // cursors whose start is being worked out
  std::optional<Error> first_error_;
  uint64_t wakes_ = 0;            // times the log store woke this follower
  seam::EventFeed* feed_ = nullptr;
  std::vector<seam::AppEvent> event_history_;
  uint64_t feed_subscription_ = 0;
  uint64_t last_app_event_ = 0;   // the seq of the last app event sent
};

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_LOG_REQUEST_H_
