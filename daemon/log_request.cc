#include "daemon/log_request.h"

#include <limits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "core/app_status.h"
#include "core/json_reader.h"
#include "core/unique_fd.h"
#include "logfiles/safe_file.h"
#include "seam/as_user.h"

namespace torchxd::daemon {
namespace {

using nlohmann::json;

constexpr size_t kSliceBytes = 256 * 1024;     // read per loop turn
constexpr size_t kBatchBytes = 64 * 1024;      // lines per event
// A follower's backlog: it reads on only while what its client has not taken,
// and one more slice (JSON-escaped, at most twice its bytes), stay within 1 MiB
// (as an `events -f` follower's), so a reader that stopped costs that much.
constexpr size_t kMaxQueuedBytes = (1 << 20) - 2 * kSliceBytes;
constexpr size_t kMaxLineBytes = 1 << 20;      // longer lines are sent in pieces of this size

// Start of the last `n` lines of the stream (a final newline does not start a line).
uint64_t TailStart(const logfiles::LogStreamLayout& layout, int n) {
  if (n <= 0) return layout.end_offset;
  int newlines = 0;
  bool skipped_final = false;
  char buf[65536];
  for (auto seg = layout.segments.rbegin(); seg != layout.segments.rend(); ++seg) {
    UniqueFd fd = logfiles::OpenRegular(seg->path, O_RDONLY);
    if (!fd.valid()) continue;
    uint64_t end = seg->size;
    while (end > 0) {
      uint64_t len = std::min<uint64_t>(sizeof(buf), end);
      ssize_t got = ::pread(fd.get(), buf, len, static_cast<off_t>(end - len));
      if (got <= 0) break;
      for (ssize_t i = got - 1; i >= 0; --i) {
        if (buf[i] != '\n') continue;
        uint64_t at = seg->start + end - len + static_cast<uint64_t>(i);
        if (!skipped_final && at + 1 == layout.end_offset) {
          skipped_final = true;
          continue;
        }
        if (++newlines == n) return at + 1;
      }
      end -= len;
    }
  }
  return layout.first_offset;
}

// The offset after the first newline at or after `from` (within the first MiB).
uint64_t NextLineStart(const logfiles::LogStreamLayout& layout, uint64_t from) {
  char buf[65536];
  for (const auto& seg : layout.segments) {
    if (from >= seg.start + seg.size) continue;
    UniqueFd fd = logfiles::OpenRegular(seg.path, O_RDONLY);
    if (!fd.valid()) return from;
    for (uint64_t at = from; at < seg.start + seg.size && at < from + (1 << 20);) {
      ssize_t got = ::pread(fd.get(), buf, sizeof(buf), static_cast<off_t>(at - seg.start));
      if (got <= 0) return from;
      for (ssize_t i = 0; i < got; ++i) {
        if (buf[i] == '\n') return at + static_cast<uint64_t>(i) + 1;
      }
      at += static_cast<uint64_t>(got);
    }
    return from;
  }
  return from;
}

}  // namespace

Result<LogCursor> ParseLogCursor(const std::string& text) {
  LogCursor c;
  std::string_view digits = text;
  if (!digits.empty() && digits.back() == 'a') {
    c.attempt_sent = true;
    digits.remove_suffix(1);
  }
  if (digits.empty() || digits.size() > 19 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return Fail(Error::InvalidArgument("`" + text + "` is not a log cursor (pass one an event carried)"));
  }
  c.offset = std::stoull(std::string(digits));
  return c;
}

Result<LogQuery> ParseLogQuery(const json& params) {
  core::JsonReader r(params, "params", {"app_handle", "stream", "role", "replicas", "regex", "since_ms",
                                        "until_ms", "follow", "tail_lines", "attempt", "cursors", "app_events"});
  r.Field("app_handle");
  LogQuery q;
  q.stream = r.String("stream", "combined");
  q.role = r.OptionalString("role");
  if (const json* reps = r.Field("replicas"); reps != nullptr && !reps->is_null()) {
    if (!reps->is_array()) {
      r.SetError("params.replicas", "must be an array of replica ids");
    } else {
      for (size_t i = 0; i < reps->size(); ++i) {
        auto id = core::IntInRange((*reps)[i], core::JsonPathIndex("params.replicas", i), 0,
                                   std::numeric_limits<int>::max());
        if (!id) {
          r.SetError("params.replicas", id.error().message.substr(id.error().message.find(": ") + 2));
          break;
        }
        q.replicas.push_back(static_cast<int>(*id));
      }
    }
  }
  q.regex = r.OptionalString("regex");
  q.since_ms = r.OptionalInt("since_ms", INT64_MIN, INT64_MAX);
  q.until_ms = r.OptionalInt("until_ms", INT64_MIN, INT64_MAX);
  q.follow = r.Bool("follow", false);
  q.app_events = r.String("app_events", "");
  if (auto n = r.OptionalInt("tail_lines", 0, std::numeric_limits<int>::max())) q.tail_lines = static_cast<int>(*n);
  if (auto n = r.OptionalInt("attempt", 0, std::numeric_limits<int>::max())) q.attempt = static_cast<int>(*n);
  if (const json* cursors = r.Field("cursors"); cursors != nullptr && !cursors->is_null()) {
    if (!cursors->is_object()) {
      r.SetError("params.cursors", "must be an object of \"role/replica\": cursor");
    } else {
      for (const auto& [who, text] : cursors->items()) {
        auto cursor = text.is_string() ? ParseLogCursor(text.get<std::string>())
                                       : Result<LogCursor>(Fail(Error::InvalidArgument("not a string")));
        if (!cursor) {
          r.SetError("params.cursors." + who, cursor.error().message);
          break;
        }
        q.cursors[who] = *cursor;
      }
    }
  }
  if (auto ok = r.Finish(); !ok) return Fail(ok.error());
  if (q.app_events != "" && q.app_events != "new" && q.app_events != "all") {
    return Fail(Error::InvalidArgument("params.app_events: must be \"new\" or \"all\", got \"" + q.app_events + "\""));
  }
  if (q.stream != "combined" && q.stream != "stdout" && q.stream != "stderr") {
    return Fail(Error::InvalidArgument("params.stream: must be combined, stdout or stderr, got \"" + q.stream + "\""));
  }
  if (q.tail_lines && *q.tail_lines < 0) return Fail(Error::InvalidArgument("params.tail_lines: must be >= 0"));
  return q;
}

struct LogRequest::Cursor {
  LogTarget target;
  logfiles::LogStreamLayout layout;
  uint64_t pos = 0;
  uint64_t end = UINT64_MAX;  // stop before this offset
  LogCursor mark;             // where a client resumes after the events sent so far
  std::string partial;
  uint64_t partial_start = 0;
  size_t next_attempt = 0;
  json batch = json::array();
  size_t batch_bytes = 0;
  uint64_t lines = 0;
  bool finished = false;
  std::string warned;  // the last problem a follower was told
  std::vector<json> notices;  // prepared: sent once every cursor is ready
  UniqueFd fd;
  uint64_t fd_start = 0;
  uint64_t fd_end = UINT64_MAX;  // UINT64_MAX: the live segment
  ino_t fd_inode = 0;
  uint64_t ticket = 0;      // a FileWorker job under way for this cursor (0: none)
  bool reloading = false;   // its layout is being read again: wait for it
  uint64_t reload_pos = UINT64_MAX;  // where it was last read again, and at which wake
  uint64_t reload_wake = 0;
};

namespace {

// Where a cursor starts reading, worked out on the FileWorker: its layout,
// then the reads that place the start (the tail's lines, the first whole line).
struct Prepared {
  logfiles::LogStreamLayout layout;
  uint64_t pos = 0;
  uint64_t end = UINT64_MAX;
  LogCursor mark;
  size_t next_attempt = 0;
  std::vector<json> notices;  // events to send before its lines, in order
};

Result<Prepared> PrepareCursor(const LogTarget& target, const LogQuery& query) {
  Prepared c;
  auto layout = logfiles::LoadLogStream(target.dir, query.stream);
  if (!layout && layout.error().code != ErrorCode::kNotFound) {
    return Fail(layout.error().WithContext(target.Key().String()));
  }
  if (!layout) {
    // Not written yet (a replica still starting): an empty stream.
    layout = logfiles::LogStreamLayout{};
    layout->segments.push_back({target.dir + "/" + query.stream + ".log", 0, 0});
  }
  c.layout = std::move(*layout);
  c.pos = c.layout.first_offset;
  if (query.attempt) {
    const auto& attempts = c.layout.attempts;
    auto it = std::find_if(attempts.begin(), attempts.end(),
                           [&](const logfiles::LogAttempt& a) { return a.attempt == *query.attempt; });
    if (it == attempts.end()) {
      return Fail(Error::InvalidArgument(target.Key().String() + " has no attempt " +
                                         std::to_string(*query.attempt) + " (it has " +
                                         std::to_string(attempts.size()) + ")"));
    }
    c.pos = std::max(c.pos, it->offset);
    if (std::next(it) != attempts.end()) c.end = std::next(it)->offset;
  }
  auto resume = query.cursors.find(target.Key().String());
  if (resume != query.cursors.end()) {
    // Everything before the cursor was delivered, the notices included.
    c.pos = std::min(std::max(c.pos, resume->second.offset), c.layout.end_offset);
    if (resume->second.offset < c.layout.first_offset) c.pos = resume->second.offset;  // missed_bytes
    bool attempt_sent = resume->second.attempt_sent && c.pos == resume->second.offset;
    while (c.next_attempt < c.layout.attempts.size() &&
           (c.layout.attempts[c.next_attempt].offset < c.pos ||
            (attempt_sent && c.layout.attempts[c.next_attempt].offset == c.pos))) {
      ++c.next_attempt;
    }
    c.mark = {c.pos, attempt_sent};
    if (!query.follow) c.end = std::min(c.end, c.layout.end_offset);
    return c;
  }
  if (query.since_ms) c.pos = std::max(c.pos, c.layout.OffsetAtTime(*query.since_ms));
  if (query.tail_lines) c.pos = std::max(c.pos, TailStart(c.layout, *query.tail_lines));
  if (!query.follow) c.end = std::min(c.end, c.layout.end_offset);
  c.mark = {c.pos, false};
  if (c.pos == c.layout.first_offset && c.layout.first_offset > 0) {
    // Rotation cut the oldest line: start at the next whole one and count the
    // fragment as dropped too.
    c.pos = NextLineStart(c.layout, c.pos);
    c.mark = {c.pos, false};
    c.notices.push_back({{"dropped_bytes", c.pos}});
  }
  while (c.next_attempt < c.layout.attempts.size() && c.layout.attempts[c.next_attempt].offset <= c.pos) {
    ++c.next_attempt;
  }
  if (target.lost_bytes > 0) c.notices.push_back({{"lost_bytes", target.lost_bytes}});  // the logs have a hole
  return c;
}

}  // namespace

LogRequest::LogRequest(uv_loop_t* loop, seam::LogStore* logs, std::string app_key,
                       std::vector<LogTarget> targets, LogQuery query,
                       std::function<bool()> app_live, std::shared_ptr<Responder> responder,
                       std::function<void(LogRequest*)> on_done, FileOwner read_as, seam::FileWorker* worker)
    : loop_(loop),
      worker_(worker),
      read_as_(read_as),
      logs_(logs),
      app_key_(std::move(app_key)),
      query_(std::move(query)),
      app_live_(std::move(app_live)),
      responder_(std::move(responder)),
      on_done_(std::move(on_done)) {
  for (auto& t : targets) {
    auto c = std::make_unique<Cursor>();
    c->target = std::move(t);
    cursors_.push_back(std::move(c));
  }
}

LogRequest::~LogRequest() {
  if (subscription_ != 0) logs_->Unsubscribe(subscription_);
  if (feed_subscription_ != 0) feed_->Unsubscribe(feed_subscription_);
}

void LogRequest::SendAppEvent(const seam::AppEvent& event) {
  if (done_ || event.seq <= last_app_event_) return;
  last_app_event_ = event.seq;
  responder_->Event({{"app_event", event.ToJson()}});
}

Result<void> LogRequest::Start() {
  if (query_.regex) {
    auto compiled = core::LineRegex::Compile(*query_.regex);
    if (!compiled) return Fail(compiled.error());
    regex_.emplace(std::move(*compiled));
  }
  idle_ = NewUvHandle<uv_idle_t>(this);
  uv_idle_init(loop_, idle_.get());
  responder_->OnGone([this] {
    done_ = true;
    Schedule();  // finish on the loop, never inside the connection's callback
  });
  if (query_.follow && !query_.app_events.empty() && feed_ != nullptr) {
    for (const seam::AppEvent& e : event_history_) SendAppEvent(e);
    event_history_.clear();
    feed_subscription_ = feed_->Subscribe(app_key_, [this](const seam::AppEvent& e) { SendAppEvent(e); });
  }
  preparing_ = cursors_.size();
  if (preparing_ == 0) return Begin();
  for (size_t i = 0; i < cursors_.size(); ++i) {
    Cursor& c = *cursors_[i];
    c.ticket = worker_->Post(read_as_.uid, read_as_.uid, read_as_.gid,
                             [this, i, target = c.target, query = query_]() -> std::function<void()> {
                               auto prepared = std::make_shared<Result<Prepared>>(PrepareCursor(target, query));
                               return [this, i, prepared] { OnPrepared(i, prepared); };
                             });
  }
  return {};
}

void LogRequest::OnPrepared(size_t index, const std::shared_ptr<void>& result) {
  auto& prepared = *std::static_pointer_cast<Result<Prepared>>(result);
  Cursor& c = *cursors_[index];
  c.ticket = 0;
  if (!prepared) {
    if (!first_error_) first_error_ = prepared.error();
  } else {
    c.layout = std::move(prepared->layout);
    c.pos = prepared->pos;
    c.end = prepared->end;
    c.mark = prepared->mark;
    c.next_attempt = prepared->next_attempt;
    c.notices = std::move(prepared->notices);
  }
  if (--preparing_ > 0) return;
  if (first_error_) {
    responder_->Error(*first_error_);
    return Finish();  // destroys this
  }
  if (auto ok = Begin(); !ok) {
    responder_->Error(ok.error());
    Finish();
  }
}

Result<void> LogRequest::Begin() {
  for (auto& c : cursors_) {
    for (auto& notice : c->notices) Event(*c, std::move(notice));
    c->notices.clear();
  }
  if (query_.follow) {
    subscription_ = logs_->Subscribe(app_key_, [this] {
      ++wakes_;
      Schedule();
    });
  }
  Schedule();
  return {};
}

void LogRequest::Reload(Cursor& c) {
  c.reloading = true;
  c.reload_pos = c.pos;
  c.reload_wake = wakes_;
  Cursor* cursor = &c;
  c.ticket = worker_->Post(read_as_.uid, read_as_.uid, read_as_.gid,
                           [this, cursor, dir = c.target.dir, stream = query_.stream]() -> std::function<void()> {
                             auto layout = std::make_shared<Result<logfiles::LogStreamLayout>>(
                                 logfiles::LoadLogStream(dir, stream));
                             return [this, cursor, layout] {
                               cursor->ticket = 0;
                               cursor->reloading = false;
                               if (*layout) cursor->layout = std::move(**layout);
                               Schedule();
                             };
                           });
}

void LogRequest::Schedule() {
  if (scheduled_ || !idle_) return;
  scheduled_ = true;
  uv_idle_start(idle_.get(), [](uv_idle_t* h) {
    auto* self = static_cast<LogRequest*>(h->data);
    if (self == nullptr) return;
    uv_idle_stop(h);
    self->scheduled_ = false;
    self->Step();
  });
}

void LogRequest::Step() {
  if (preparing_ > 0) {  // the first reads are under way; the client may have left meanwhile
    if (done_ || !responder_->alive()) Finish();
    return;
  }
  if (done_ || !responder_->alive()) return Finish();
  if (responder_->QueuedBytes() >= kMaxQueuedBytes) {  // the client lags: wait for it
    responder_->WhenDrained([this] { Schedule(); });
    return;
  }
  seam::AsUser as(read_as_.uid, read_as_.gid);  // the owner's files, read with the owner's rights
  size_t budget = kSliceBytes;
  bool all_caught_up = true;
  bool reloading = false;  // a cursor waits for its layout: its reload wakes us
  for (auto& c : cursors_) {
    if (c->finished) continue;
    if (c->reloading) {
      reloading = true;
      continue;
    }
    bool caught_up = Pump(*c, budget) && !c->reloading;
    reloading = reloading || c->reloading;
    all_caught_up = all_caught_up && caught_up;
    if (budget == 0) break;
  }
  for (auto& c : cursors_) {
    Flush(*c);
    Warn(*c);
  }
  if (budget == 0 || (!all_caught_up && !reloading)) return Schedule();
  if (reloading) return;
  if (query_.follow && app_live_()) return;  // the log store wakes us when more arrives
  // Everything is read. On one loop thread no output can land between the
  // last read and this check, and an app is terminal only after its pipes closed.
  for (auto& c : cursors_) {
    if (!c->partial.empty()) EmitLine(*c, c->partial, c->partial_start, c->partial_start + c->partial.size());
    c->partial.clear();
    Flush(*c);
  }
  json counts = json::array();
  for (const auto& c : cursors_) {
    json count = {{"role", c->target.role}, {"replica", c->target.replica}, {"lines", c->lines}};
    std::string problem = problem_ ? problem_(c->target.Key().String()) : "";
    if (!problem.empty()) count["unreadable"] = problem;
    counts.push_back(std::move(count));
  }
  responder_->Result({{"replicas", counts}});
  Finish();
}

bool LogRequest::Pump(Cursor& c, size_t& budget) {
  char buf[65536];
  while (budget > 0 && c.pos < c.end) {
    if (c.pos < c.layout.first_offset) {
      uint64_t missed = c.layout.first_offset - c.pos;
      c.pos = c.layout.first_offset;
      c.partial.clear();
      Flush(c);
      c.mark = {c.pos, false};
      Event(c, {{"missed_bytes", missed}});
    }
    if (!c.fd.valid() || c.pos < c.fd_start || c.pos >= c.fd_end) {
      const logfiles::LogSegment* seg = nullptr;
      for (size_t i = 0; i < c.layout.segments.size(); ++i) {
        const auto& s = c.layout.segments[i];
        bool live = i + 1 == c.layout.segments.size();
        if (c.pos >= s.start && (live || c.pos < s.start + s.size)) seg = &s;
      }
      if (seg == nullptr) {  // a segment vanished under us (rotation): look again, once per wake
        if (c.reload_pos != c.pos || c.reload_wake != wakes_) Reload(c);
        return true;
      }
      c.fd = logfiles::OpenRegular(seg->path, O_RDONLY);
      if (!c.fd.valid()) return true;
      struct stat st;
      ::fstat(c.fd.get(), &st);
      c.fd_inode = st.st_ino;
      c.fd_start = seg->start;
      c.fd_end = seg == &c.layout.segments.back() ? UINT64_MAX : seg->start + seg->size;
    }
    uint64_t want = std::min<uint64_t>({sizeof(buf), budget, c.end - c.pos,
                                        c.fd_end == UINT64_MAX ? UINT64_MAX : c.fd_end - c.pos});
    ssize_t got = ::pread(c.fd.get(), buf, want, static_cast<off_t>(c.pos - c.fd_start));
    if (got <= 0) {
      // End of the live segment: was it rotated away since we opened it?
      struct stat st;
      std::string live = c.target.dir + "/" + query_.stream + ".log";
      if (c.fd_end == UINT64_MAX && ::stat(live.c_str(), &st) == 0 && st.st_ino != c.fd_inode &&
          (c.reload_pos != c.pos || c.reload_wake != wakes_)) {
        c.fd.reset();
        Reload(c);
      }
      return true;
    }
    budget -= static_cast<size_t>(got);
    std::string_view data(buf, static_cast<size_t>(got));
    uint64_t data_start = c.pos;
    c.pos += static_cast<uint64_t>(got);
    size_t from = 0;
    for (size_t nl; (nl = data.find('\n', from)) != std::string_view::npos; from = nl + 1) {
      uint64_t line_end = data_start + nl + 1;
      if (c.partial.empty() && nl - from <= kMaxLineBytes) {
        EmitLine(c, data.substr(from, nl - from), data_start + from, line_end);
      } else {
        AppendToLine(c, data.substr(from, nl - from), data_start + from);
        EmitLine(c, c.partial, c.partial_start, line_end);
        c.partial.clear();
      }
    }
    AppendToLine(c, data.substr(from), data_start + from);
  }
  return c.pos >= c.end || budget > 0;
}

void LogRequest::AppendToLine(Cursor& c, std::string_view piece, uint64_t piece_start) {
  // A line without an end is sent in pieces of kMaxLineBytes from its start:
  // memory and frames stay bounded whatever a replica prints.
  while (!piece.empty()) {
    if (c.partial.empty()) c.partial_start = piece_start;
    if (c.partial.size() == kMaxLineBytes) {
      EmitLine(c, c.partial, c.partial_start, c.partial_start + kMaxLineBytes);
      c.partial.clear();
      continue;
    }
    size_t take = std::min(piece.size(), kMaxLineBytes - c.partial.size());
    c.partial.append(piece.substr(0, take));
    piece.remove_prefix(take);
    piece_start += take;
  }
}

void LogRequest::EmitLine(Cursor& c, std::string_view line, uint64_t line_start, uint64_t line_end) {
  while (c.next_attempt < c.layout.attempts.size() &&
         c.layout.attempts[c.next_attempt].offset <= line_start) {
    Flush(c);
    int attempt = c.layout.attempts[c.next_attempt++].attempt;
    if (attempt > 1) {
      c.mark = {line_start, true};
      Event(c, {{"attempt", attempt}});
    }
  }
  c.mark = {line_end, false};  // consumed, whether it is sent or filtered out
  int64_t t = line_start < c.layout.end_offset ? c.layout.TimeAt(line_start) : core::UnixNowMs();
  if (query_.since_ms && t < *query_.since_ms) return;
  if (query_.until_ms && t >= *query_.until_ms) {
    if (!query_.follow) c.end = c.pos;  // the index is ordered: nothing later qualifies
    return;
  }
  if (regex_ && !regex_->Matches(line)) return;
  c.batch.push_back({t, std::string(line)});
  c.batch_bytes += line.size() + 16;
  ++c.lines;
  if (c.batch_bytes >= kBatchBytes) Flush(c);
}

void LogRequest::Flush(Cursor& c) {
  if (c.batch.empty()) return;
  responder_->Event({{"role", c.target.role},
                     {"replica", c.target.replica},
                     {"stream", query_.stream},
                     {"lines", std::move(c.batch)},
                     {"cursor", c.mark.ToString()}});
  c.batch = json::array();
  c.batch_bytes = 0;
}

void LogRequest::Event(Cursor& c, json event) {
  event["role"] = c.target.role;
  event["replica"] = c.target.replica;
  event["cursor"] = c.mark.ToString();
  responder_->Event(std::move(event));
}

void LogRequest::Warn(Cursor& c) {
  if (!query_.follow || !problem_) return;
  std::string problem = problem_(c.target.Key().String());
  if (problem == c.warned) return;
  c.warned = problem;
  if (!problem.empty()) Event(c, {{"warning", problem}});
}

void LogRequest::Finish() {
  if (!idle_) return;
  idle_.reset();
  for (auto& c : cursors_) {
    if (c->ticket != 0) worker_->Cancel(c->ticket);
    c->ticket = 0;
  }
  if (subscription_ != 0) logs_->Unsubscribe(subscription_);
  subscription_ = 0;
  if (feed_subscription_ != 0) feed_->Unsubscribe(feed_subscription_);
  feed_subscription_ = 0;
  auto on_done = std::move(on_done_);
  if (on_done) on_done(this);  // destroys this
}

}  // namespace torchxd::daemon
