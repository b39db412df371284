#include "daemon/server.h"

#include "core/log.h"
#include "core/unique_fd.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include <malloc.h>

namespace torchxd::daemon {

// One client connection. Owned by the Server (shared_ptr, so Responders can
// hold weak references); its uv handle is closed when it is removed.
//
// Rules:
//  - Frames are taken from the input buffer one at a time by an iterative
//    loop: a handler that answers synchronously never recurses into the next
//    frame, and a turn handles at most kFramesPerTurn before yielding.
//  - A frame of kDecodeOffLoopBytes or more is parsed on the server's worker
//    thread, users in turn (core::FairWorker); the frames behind it wait.
//  - Reading stops while frames wait behind a request in flight (more than
//    kMaxPendingInputBytes of them) and while more than
//    kPauseReplyBytes of replies wait for the client to take them; it resumes
//    once they drain. A client that takes nothing for --idle-timeout while
//    paused, or whose replies pass kMaxQueuedReplyBytes, is dropped.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  explicit Connection(Server* server) : server_(server) {}

  bool Init(uv_stream_t* listener) {
    pipe_ = NewUvHandle<uv_pipe_t>(this);
    uv_pipe_init(server_->loop_, pipe_.get(), 0);
    pipe_->data = this;
    if (uv_accept(listener, Stream()) != 0) return false;
    idle_ = NewUvHandle<uv_timer_t>(this);
    uv_timer_init(server_->loop_, idle_.get());
    stall_ = NewUvHandle<uv_timer_t>(this);
    uv_timer_init(server_->loop_, stall_.get());
    resume_ = NewUvHandle<uv_idle_t>(this);
    uv_idle_init(server_->loop_, resume_.get());
    uv_os_fd_t fd;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (uv_fileno(reinterpret_cast<uv_handle_t*>(pipe_.get()), &fd) == 0 &&
        ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      peer_ = PeerInfo{cred.uid, cred.gid, cred.pid};
    }
    return true;
  }

  const PeerInfo& peer() const { return peer_; }

  void Start() {
    UpdateReading();
    ArmIdle();
  }

  void Send(std::string frame) {
    if (closed_ || hung_up_) return;
    queued_bytes_ += frame.size();
    peak_bytes_ = std::max(peak_bytes_, queued_bytes_ + buffer_.capacity());
    auto* req = new WriteReq{{}, std::move(frame), weak_from_this()};
    uv_buf_t buf = uv_buf_init(req->data.data(), static_cast<unsigned>(req->data.size()));
    int rc = uv_write(&req->req, Stream(), &buf, 1, [](uv_write_t* r, int) {
      auto* w = reinterpret_cast<WriteReq*>(r);
      if (auto c = w->owner.lock()) c->Written(w->data.size());
      delete w;
    });
    if (rc != 0) {
      delete req;
      return CloseSoon();
    }
    if (queued_bytes_ > kMaxQueuedReplyBytes) {
      logging::warn("dropping a client that does not read its replies pid={} uid={} queued_bytes={}", peer_.pid,
                   peer_.uid, queued_bytes_);
      return CloseSoon();
    }
    UpdateReading();
  }

  size_t queued_bytes() const { return queued_bytes_; }
  size_t peak_bytes() const { return peak_bytes_; }
  void WhenDrained(std::function<void()> cb) {
    if (queued_bytes_ <= kDrainedBytes) return cb();
    drained_callbacks_.push_back(std::move(cb));
  }

  // The final answer of the request in flight: the next one may start.
  void Finished() {
    in_flight_ = false;
    gone_callbacks_.clear();
    if (server_->closing_) return Drain();
    if (!processing_) ProcessFrames();  // else the loop in ProcessFrames goes on
  }

  // Reject and hang up once the reply is written.
  void RejectAndClose(const Error& error) {
    Send(protocol::EncodeError(0, error));
    Drain();
  }

  // Ends the request in flight without its answer: the client gets `event`,
  // then the connection is flushed and closed (a client that outlives daemons
  // reconnects, as after a crash). Nothing is sent after it.
  void Hangup(const nlohmann::json& event) {
    if (closed_ || hung_up_) return;
    if (in_flight_) Send(protocol::EncodeEvent(current_id_, event));
    hung_up_ = true;
    Drain();
  }

  // Stop reading, flush what is queued, then close.
  void Drain() {
    if (closed_ || draining_) return;
    draining_ = true;
    UpdateReading();
    auto* req = new uv_shutdown_t;
    req->data = new std::weak_ptr<Connection>(weak_from_this());
    auto done = [](uv_shutdown_t* r, int) {
      auto* weak = static_cast<std::weak_ptr<Connection>*>(r->data);
      if (auto c = weak->lock(); c && !c->closed_) c->CloseSoon();
      delete weak;
      delete r;
    };
    if (uv_shutdown(req, Stream(), done) != 0) {
      delete static_cast<std::weak_ptr<Connection>*>(req->data);
      delete req;
      CloseSoon();
    }
  }

  bool in_flight() const { return in_flight_; }

  void CloseSoon() {
    if (closed_) return;
    closed_ = true;
    auto callbacks = std::move(gone_callbacks_);
    for (auto& cb : callbacks) cb();
    server_->Remove(this);  // destroys this: nothing after
  }

  void AddGoneCallback(std::function<void()> cb) { gone_callbacks_.push_back(std::move(cb)); }
  bool closed() const { return closed_; }

 private:
  struct WriteReq {
    uv_write_t req;
    std::string data;
    std::weak_ptr<Connection> owner;
  };
  static constexpr size_t kDrainedBytes = 1 << 20;

  void Written(size_t bytes) {
    queued_bytes_ -= std::min(bytes, queued_bytes_);
    if (paused_for_replies_) ArmStall();  // progress: the client is reading
    UpdateReading();
    if (queued_bytes_ > kDrainedBytes || drained_callbacks_.empty()) return;
    auto callbacks = std::move(drained_callbacks_);
    drained_callbacks_.clear();
    for (auto& cb : callbacks) cb();
  }

  uv_stream_t* Stream() { return reinterpret_cast<uv_stream_t*>(pipe_.get()); }

  // Whether to take more input now (see the Rules above).
  void UpdateReading() {
    if (closed_) return;
    if (!paused_for_replies_ && queued_bytes_ > kPauseReplyBytes) {
      paused_for_replies_ = true;
      ArmStall();
    } else if (paused_for_replies_ && queued_bytes_ <= kDrainedBytes) {
      paused_for_replies_ = false;
      uv_timer_stop(stall_.get());
    }
    bool busy = in_flight_ || decoding_ || resume_scheduled_;
    bool backlog = busy && buffer_.size() - pos_ >= kMaxPendingInputBytes;
    bool want = !draining_ && !paused_for_replies_ && !backlog;
    if (want == reading_) return;
    reading_ = want;
    if (want) {
      uv_read_start(Stream(), OnAlloc, OnRead);
    } else {
      uv_read_stop(Stream());
    }
  }

  void ArmStall() {
    if (server_->limits_.idle_timeout_seconds <= 0) return;
    uv_timer_start(
        stall_.get(),
        [](uv_timer_t* t) {
          auto* self = static_cast<Connection*>(t->data);
          if (self == nullptr || !self->paused_for_replies_) return;
          logging::warn("dropping a client that stopped reading its replies pid={} uid={} queued_bytes={}",
                       self->peer_.pid, self->peer_.uid, self->queued_bytes_);
          auto keep = self->shared_from_this();
          self->CloseSoon();
        },
        static_cast<uint64_t>(server_->limits_.idle_timeout_seconds * 1000), 0);
  }

  void ArmIdle() {
    if (server_->limits_.idle_timeout_seconds <= 0) return;
    uv_timer_start(
        idle_.get(),
        [](uv_timer_t* t) {
          auto* self = static_cast<Connection*>(t->data);
          if (self == nullptr || self->in_flight_ || self->decoding_) return;
          auto keep = self->shared_from_this();
          self->CloseSoon();
        },
        static_cast<uint64_t>(server_->limits_.idle_timeout_seconds * 1000), 0);
  }

  static void OnAlloc(uv_handle_t*, size_t, uv_buf_t* buf) {
    static char buffer[64 * 1024];
    *buf = uv_buf_init(buffer, sizeof(buffer));
  }

  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
    auto* self = static_cast<Connection*>(stream->data);
    if (self == nullptr) return;
    auto keep = self->shared_from_this();  // a close below must not free us mid-call
    if (nread < 0) return self->CloseSoon();
    self->Append(std::string_view(buf->base, static_cast<size_t>(nread)));
  }

  void Append(std::string_view bytes) {
    size_t old_size = buffer_.size();
    buffer_.append(bytes);
    if (size_t nl = bytes.rfind('\n'); nl != std::string_view::npos) partial_start_ = old_size + nl + 1;
    if (buffer_.size() - partial_start_ > server_->limits_.max_frame_bytes) return TooLarge();
    ProcessFrames();
  }

  // The next complete, non-empty frame; false when none is buffered.
  bool NextFrame(std::string& frame) {
    if (partial_start_ <= pos_) return false;  // no newline behind pos_: not scanned again per read of a large frame
    for (;;) {
      size_t nl = buffer_.find('\n', pos_);
      if (nl == std::string::npos) return false;
      size_t start = pos_;
      pos_ = nl + 1;
      if (nl - start > server_->limits_.max_frame_bytes) {
        TooLarge();
        return false;
      }
      if (nl > start) {
        frame.assign(buffer_, start, nl - start);
        return true;
      }
    }
  }

  bool HasFrame() const { return partial_start_ > pos_ && buffer_.find('\n', pos_) != std::string::npos; }

  void TooLarge() {
    RejectAndClose(Error::InvalidArgument("frame larger than " +
                                          std::to_string(server_->limits_.max_frame_bytes) +
                                          " bytes (the protocol limit)"));
  }

  void ProcessFrames() {
    if (processing_ || closed_) return;
    auto self = shared_from_this();  // keep alive through the handlers
    processing_ = true;
    resume_scheduled_ = false;
    uv_idle_stop(resume_.get());
    std::string frame;
    for (int handled = 0; !closed_ && !draining_ && !in_flight_ && !decoding_;) {
      if (handled == kFramesPerTurn) {
        if (HasFrame()) ScheduleResume();  // let other clients in first
        break;
      }
      if (!NextFrame(frame)) break;
      ++handled;
      uv_timer_stop(idle_.get());
      if (frame.size() >= kDecodeOffLoopBytes) {
        DecodeOffLoop(std::move(frame));
        frame = std::string();
        break;
      }
      Handle(protocol::DecodeRequest(frame));
    }
    processing_ = false;
    if (closed_) return;
    if (pos_ > 0) {
      buffer_.erase(0, pos_);
      partial_start_ -= std::min(partial_start_, pos_);
      pos_ = 0;
    }
    if (buffer_.empty() && buffer_.capacity() > kMaxPendingInputBytes) buffer_.shrink_to_fit();
    if (!in_flight_ && !decoding_ && !resume_scheduled_ && !HasFrame()) ArmIdle();
    UpdateReading();
  }

  void Handle(Result<protocol::Request> request) {
    if (!request) return Send(protocol::EncodeError(0, request.error()));
    in_flight_ = true;
    current_id_ = request->id;
    auto responder = std::make_shared<ConnectionResponder>(weak_from_this(), request->id);
    server_->handler_->Handle(*request, peer_, responder);  // may answer (Finished) right away
  }

  // A large frame is parsed on the server's worker, in its user's turn, while
  // the loop serves others; the frames behind it wait.
  void DecodeOffLoop(std::string frame) {
    decoding_ = true;
    auto text = std::make_shared<std::string>(std::move(frame));
    std::weak_ptr<Connection> weak = weak_from_this();
    server_->decoder_.Post(peer_.uid, [text, weak]() -> std::function<void()> {
      auto decoded = std::make_shared<Result<protocol::Request>>(protocol::DecodeRequest(*text));
      *text = std::string();
      return [weak, decoded] {
        auto self = weak.lock();
        if (!self || self->closed_) return;
        self->decoding_ = false;
        if (!self->draining_) self->Handle(std::move(*decoded));
        if (!self->in_flight_) self->ProcessFrames();
      };
    });
  }

  void ScheduleResume() {
    resume_scheduled_ = true;
    uv_idle_start(resume_.get(), [](uv_idle_t* h) {
      auto* self = static_cast<Connection*>(h->data);
      if (self != nullptr) self->ProcessFrames();
    });
  }

  static constexpr int kFramesPerTurn = 64;
  static constexpr size_t kDecodeOffLoopBytes = 256 << 10;

  Server* server_;
  PeerInfo peer_;
  UvHandle<uv_pipe_t> pipe_;
  UvHandle<uv_timer_t> idle_;
  UvHandle<uv_timer_t> stall_;
  UvHandle<uv_idle_t> resume_;
  std::string buffer_;      // input not yet handled
  size_t pos_ = 0;           // next frame starts here
  size_t partial_start_ = 0; // the incomplete frame at the end starts here
  bool in_flight_ = false;
  bool decoding_ = false;    // a large frame is parsed off the loop
  bool processing_ = false;
  bool resume_scheduled_ = false;
  bool reading_ = false;
  bool paused_for_replies_ = false;
  bool closed_ = false;
  bool draining_ = false;
  bool hung_up_ = false;
  int64_t current_id_ = 0;  // the request in flight
  size_t queued_bytes_ = 0;
  size_t peak_bytes_ = 0;
  std::vector<std::function<void()>> drained_callbacks_;
  std::vector<std::function<void()>> gone_callbacks_;
};

void ConnectionResponder::Event(const nlohmann::json& event) {
  if (auto c = connection_.lock(); c && !done_) c->Send(protocol::EncodeEvent(id_, event));
}

void ConnectionResponder::ResultText(const std::string& result_json) {
  if (done_) return;
  done_ = true;
  if (auto c = connection_.lock()) {
    // One allocation: a result may be megabytes (queue --json with thousands pending).
    std::string head = "{\"v\":" + std::to_string(protocol::kVersion) + ",\"id\":" + std::to_string(id_) + ",\"result\":";
    std::string frame;
    frame.reserve(head.size() + result_json.size() + 2);
    frame += head;
    frame += result_json;
    frame += "}\n";
    c->Send(std::move(frame));
    c->Finished();
  }
}

void ConnectionResponder::Error(const torchxd::Error& error) {
  if (done_) return;
  done_ = true;
  if (auto c = connection_.lock()) {
    c->Send(protocol::EncodeError(id_, error));
    c->Finished();
  }
}

bool ConnectionResponder::alive() const {
  auto c = connection_.lock();
  return c && !c->closed() && !done_;
}

size_t ConnectionResponder::QueuedBytes() const {
  auto c = connection_.lock();
  return c ? c->queued_bytes() : 0;
}

void ConnectionResponder::WhenDrained(std::function<void()> callback) {
  if (auto c = connection_.lock()) c->WhenDrained(std::move(callback));
}

void ConnectionResponder::OnGone(std::function<void()> callback) {
  if (auto c = connection_.lock()) c->AddGoneCallback(std::move(callback));
}

Server::Server(uv_loop_t* loop, RequestHandler* handler, ServerLimits limits, std::optional<uid_t> only_uid,
               std::function<bool(const PeerInfo&)> privileged)
    : loop_(loop),
      handler_(handler),
      limits_(limits),
      only_uid_(only_uid),
      privileged_(std::move(privileged)),
      decoder_(loop) {}

Server::~Server() { DropAll(); }

Result<void> Server::Listen(const std::string& path, std::optional<gid_t> group) {
  // libuv 1.44 silently truncates a path longer than sun_path; refuse it instead.
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Fail(Error::InvalidArgument("socket path " + path + " is " + std::to_string(path.size()) +
                                       " bytes; Unix sockets allow at most " +
                                       std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) +
                                       " (pick a shorter --socket)"));
  }
  // Bound here rather than with uv_pipe_bind, which unlinks the path when the
  // handle closes: the daemon decides when the path goes (not on a restart,
  // where the next image keeps listening on the same socket). Bound under a
  // temporary name and renamed into place once listening, so the path never
  // exists without answering (a client that sees it can connect).
  std::string bound = path + ".new";
  if (bound.size() >= sizeof(sockaddr_un{}.sun_path)) bound = path;  // no room: bind in place
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Fail(Error::Io(std::string("socket: ") + strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, bound.c_str(), bound.size());
  if (bound != path) ::unlink(bound.c_str());  // a leftover of a daemon that died here
  mode_t old = ::umask(0177);  // the socket is created 0600
  int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0) return Fail(Error::Io("bind " + bound + ": " + strerror(errno)));
  auto drop = [&](const std::string& what) {
    std::string why = what + " " + bound + ": " + strerror(errno);
    if (bound != path) ::unlink(bound.c_str());
    return Fail(Error::Io(why));
  };
  if (group && (::chown(bound.c_str(), 0, *group) != 0 || ::chmod(bound.c_str(), 0660) != 0)) {
    return drop("chown/chmod");
  }
  if (auto ok = Adopt(fd.release()); !ok) {
    if (bound != path) ::unlink(bound.c_str());
    return ok;
  }
  if (bound != path && ::rename(bound.c_str(), path.c_str()) != 0) return drop("rename to " + path + ":");
  return {};
}

Result<void> Server::Adopt(int fd) {
  listener_ = NewUvHandle<uv_pipe_t>(this);
  uv_pipe_init(loop_, listener_.get(), 0);
  listener_->data = this;
  if (int rc = uv_pipe_open(listener_.get(), fd); rc != 0) {
    ::close(fd);
    return Fail(Error::Io(UvError("adopt the listening socket", rc)));
  }
  int rc = uv_listen(reinterpret_cast<uv_stream_t*>(listener_.get()), 128, [](uv_stream_t* s, int status) {
    auto* self = static_cast<Server*>(s->data);
    if (self != nullptr && status == 0) self->OnConnection();
  });
  if (rc != 0) return Fail(Error::Io(UvError("listen on the socket", rc)));
  return {};
}

int Server::listener_fd() const {
  uv_os_fd_t fd = -1;
  if (!listener_ || uv_fileno(reinterpret_cast<const uv_handle_t*>(listener_.get()), &fd) != 0) return -1;
  return fd;
}

void Server::Close() {
  listener_.reset();
  closing_ = true;
  // Idle connections go now (after flushing); busy ones when their request ends.
  std::vector<std::shared_ptr<Connection>> idle;
  for (auto& [raw, c] : connections_) {
    if (!c->in_flight()) idle.push_back(c);
  }
  for (auto& c : idle) c->Drain();
}

void Server::Hangup(const nlohmann::json& event, double seconds) {
  Close();
  std::vector<std::shared_ptr<Connection>> all;
  for (auto& [raw, c] : connections_) all.push_back(c);
  for (auto& c : all) c->Hangup(event);
  if (connections_.empty()) return;
  // A client that does not read keeps its flush from ending: it is cut off.
  hangup_timer_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, hangup_timer_.get());
  uv_timer_start(hangup_timer_.get(), [](uv_timer_t* t) {
    auto* self = static_cast<Server*>(t->data);
    if (self == nullptr || self->connections_.empty()) return;
    logging::warn("closing {} connections whose clients did not read their last frames", self->connections_.size());
    self->DropAll();
  }, static_cast<uint64_t>(seconds * 1000), 0);
  uv_unref(reinterpret_cast<uv_handle_t*>(hangup_timer_.get()));  // the connections keep the loop alive, not it
}

void Server::DropAll() {
  auto connections = std::move(connections_);
  connections_.clear();
  per_uid_.clear();
}

void Server::OnConnection() {
  auto connection = std::make_shared<Connection>(this);
  if (!connection->Init(reinterpret_cast<uv_stream_t*>(listener_.get()))) return;
  Connection* raw = connection.get();
  connections_[raw] = std::move(connection);
  uid_t uid = raw->peer().uid;
  size_t mine = ++per_uid_[uid];
  if (auto refusal = Refusal(raw->peer(), mine)) {
    logging::warn("connection refused uid={} pid={} connections={} of_uid={} reason={}", uid, raw->peer().pid,
                 connections_.size(), mine, refusal->message);
    return raw->RejectAndClose(*refusal);
  }
  if (only_uid_ && raw->peer().uid != *only_uid_) {
    return raw->RejectAndClose(Error::PermissionDenied(
        "this torchxd belongs to uid " + std::to_string(*only_uid_) + "; uid " +
        std::to_string(raw->peer().uid) + " must use its own daemon"));
  }
  raw->Start();
}

std::optional<Error> Server::Refusal(const PeerInfo& peer, size_t of_uid) const {
  size_t total = connections_.size();
  if (total > limits_.max_connections) {
    return Error::Unavailable("torchxd is serving its maximum of " + std::to_string(limits_.max_connections) +
                              " connections; try again");
  }
  bool over_own = of_uid > limits_.max_connections_per_user;
  bool in_reserve = total > limits_.max_connections - limits_.ReservedForAdmins();
  if (!over_own && !in_reserve) return std::nullopt;
  if (privileged_ && privileged_(peer)) return std::nullopt;  // bounded by the total only
  if (over_own) {
    return Error::Unavailable("uid " + std::to_string(peer.uid) + " already has " +
                              std::to_string(limits_.max_connections_per_user) +
                              " connections to torchxd, the most one user may hold (torchxd "
                              "--max-connections-per-user); close some (a `wait` or `log -f` holds one) and try again");
  }
  return Error::Unavailable("torchxd is serving its maximum of " +
                            std::to_string(limits_.max_connections - limits_.ReservedForAdmins()) +
                            " connections for users (" + std::to_string(limits_.ReservedForAdmins()) +
                            " more are kept for root and the admin group); try again");
}

void Server::Remove(Connection* connection) {
  untrimmed_bytes_ += connection->peak_bytes();
  auto it = per_uid_.find(connection->peer().uid);
  if (it != per_uid_.end() && --it->second == 0) per_uid_.erase(it);
  connections_.erase(connection);
  // Clients that made us buffer a lot, one big one or many followers of 1
  // MiB each, leave that memory with glibc: give it back.
  if (untrimmed_bytes_ > kTrimAfterBytes) {
    untrimmed_bytes_ = 0;
    ::malloc_trim(0);
  }
}

}  // namespace torchxd::daemon
