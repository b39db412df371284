#include "webui/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>


#include "core/log.h"
#include "core/text.h"

#include "webui/mhd_api.h"
#include "webui/peer_uid.h"

namespace torchxd::webui {
namespace {

constexpr size_t kDrainedBytes = 64 << 10;

// Set once libmicrohttpd is loaded (the first connection); every MHD call goes through it.
const MhdApi* mhd_api = nullptr;

}  // namespace

// One connection we accepted and handed to MHD: whom it counts against, and
// its deadline for a whole request head.
struct HttpServer::Conn {
  HttpServer* server = nullptr;
  int fd = -1;
  std::string key;  // "uid N" or "address A": what the per-peer limit counts
  HttpPeer peer;
  bool started = false;    // MHD knows it (NOTIFY_STARTED)
  bool requested = false;  // a request head arrived
  UvHandle<uv_timer_t> head_timer;
};

// The C callbacks MHD calls; each finds its C++ owner and never lets an exception out.
struct MhdCallbacks {
  static MHD_Result Access(void* cls, MHD_Connection* connection, const char* url, const char* method,
                           const char* /*version*/, const char* upload_data, size_t* upload_data_size,
                           void** con_cls) {
    try {
      return static_cast<HttpServer*>(cls)->Access(connection, url, method, upload_data, upload_data_size, con_cls)
                 ? MHD_YES
                 : MHD_NO;
    } catch (const std::exception& e) {
      logging::error("http request failed error={}", e.what());
      return MHD_NO;
    }
  }

  static void Completed(void* /*cls*/, MHD_Connection* /*connection*/, void** con_cls,
                        MHD_RequestTerminationCode /*toe*/) {
    auto* holder = static_cast<std::shared_ptr<HttpExchange>*>(*con_cls);
    if (holder == nullptr) return;
    *con_cls = nullptr;
    std::shared_ptr<HttpExchange> exchange = std::move(*holder);
    delete holder;
    exchange->server_->live_.erase(exchange.get());
    bool big = exchange->pending_.capacity() > (1 << 20);
    exchange->Gone();
    exchange.reset();
    // A client that made us hold a lot leaves that memory with glibc: give it back.
    if (big) ::malloc_trim(0);
  }

  static ssize_t Read(void* cls, uint64_t /*pos*/, char* buf, size_t max) {
    return static_cast<HttpExchange*>(cls)->Read(buf, max);
  }

  static MHD_Result Value(void* cls, MHD_ValueKind kind, const char* key, const char* value) {
    auto* request = static_cast<HttpRequest*>(cls);
    if (key == nullptr) return MHD_YES;
    std::string v = value == nullptr ? "" : value;
    if (kind == MHD_HEADER_KIND) {
      request->headers[core::ToLower(key)] = std::move(v);
    } else if (kind == MHD_GET_ARGUMENT_KIND) {
      request->query[key] = std::move(v);
    } else if (kind == MHD_COOKIE_KIND) {
      request->cookies[key] = std::move(v);
    }
    return MHD_YES;
  }

  static void Notify(void* cls, MHD_Connection* connection, void** socket_context,
                     MHD_ConnectionNotificationCode code) {
    auto* server = static_cast<HttpServer*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      const MHD_ConnectionInfo* info = mhd_api->get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
      if (info == nullptr) return;
      for (auto& [raw, conn] : server->conns_) {
        if (conn->fd == info->connect_fd && !conn->started) {
          conn->started = true;
          *socket_context = raw;
          return;
        }
      }
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context != nullptr) {
      server->OnConnectionClosed(static_cast<HttpServer::Conn*>(*socket_context));
      *socket_context = nullptr;
    }
  }

  static void Log(void* /*cls*/, const char* format, va_list args) {
    char line[512];
    std::vsnprintf(line, sizeof(line), format, args);
    std::string text(line);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    logging::debug("http server said={}", text);
  }
};

void HttpExchange::Reply(int status, HttpHeaders headers, std::string body) {
  if (answer_ != Answer::kNone || gone_) return;
  answer_ = Answer::kWhole;
  status_ = status;
  headers_ = std::move(headers);
  pending_ = std::move(body);
  Resume();
}

void HttpExchange::StartStream(int status, HttpHeaders headers) {
  if (answer_ != Answer::kNone || gone_) return;
  answer_ = Answer::kStream;
  status_ = status;
  headers_ = std::move(headers);
  Resume();
}

void HttpExchange::Write(std::string_view bytes) {
  if (answer_ != Answer::kStream || ended_ || gone_ || bytes.empty()) return;
  if (pending_pos_ > 0 && pending_pos_ == pending_.size()) {
    pending_.clear();
    pending_pos_ = 0;
  }
  pending_.append(bytes);
  Resume();
}

void HttpExchange::End() {
  if (answer_ != Answer::kStream || ended_) return;
  ended_ = true;
  Resume();
}

void HttpExchange::WhenDrained(std::function<void()> callback) {
  if (gone_ || QueuedBytes() <= kDrainedBytes) return callback();
  drained_.push_back(std::move(callback));
}

void HttpExchange::OnGone(std::function<void()> callback) {
  if (gone_) return callback();
  gone_callbacks_.push_back(std::move(callback));
}

ssize_t HttpExchange::Read(char* buf, size_t max) {
  if (client_left_) return MHD_CONTENT_READER_END_WITH_ERROR;
  size_t n = std::min(max, pending_.size() - pending_pos_);
  if (n > 0) {
    std::memcpy(buf, pending_.data() + pending_pos_, n);
    pending_pos_ += n;
    if (pending_pos_ == pending_.size()) {
      pending_.clear();
      pending_pos_ = 0;
    } else if (pending_pos_ > (1 << 20)) {
      pending_.erase(0, pending_pos_);
      pending_pos_ = 0;
    }
    if (QueuedBytes() <= kDrainedBytes && !drained_.empty()) {
      auto callbacks = std::move(drained_);
      drained_.clear();
      for (auto& callback : callbacks) callback();  // may Write() more: it lands after these bytes
    }
    return static_cast<ssize_t>(n);
  }
  if (ended_ || gone_ || server_ == nullptr || !server_->running_) return MHD_CONTENT_READER_END_OF_STREAM;
  mhd_api->suspend_connection(connection_);
  suspended_ = true;
  WatchForHangUp();
  return 0;
}

// MHD does not look at a suspended connection, nor read while it sends a
// body: a browser that closed its tab would hold the connection (and its
// stream's work) until a write fails. So the stream's socket is watched while
// it waits; at its end (EOF or an error) the stream ends with an error, which
// makes MHD close the connection.
void HttpExchange::WatchForHangUp() {
  const MHD_ConnectionInfo* info = mhd_api->get_connection_info(connection_, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info == nullptr || client_left_) return;
  hangup_fd_ = info->connect_fd;
  hangup_ = NewUvHandle<uv_poll_t>(this);
  if (uv_poll_init(server_->loop_, hangup_.get(), hangup_fd_) != 0) {
    hangup_.reset();
    return;
  }
  uv_poll_start(hangup_.get(), UV_READABLE | UV_DISCONNECT, [](uv_poll_t* h, int, int) {
    if (h->data != nullptr) static_cast<HttpExchange*>(h->data)->OnReadable();
  });
}

void HttpExchange::OnReadable() {
  char c;
  ssize_t n = ::recv(hangup_fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
    hangup_.reset();  // bytes of a next request: not a hang-up, and not ours to read
    return;
  }
  client_left_ = true;
  Resume();
}

void HttpExchange::Resume() {
  hangup_.reset();  // before MHD may close the descriptor
  if (!suspended_ || connection_ == nullptr) return;
  suspended_ = false;
  mhd_api->resume_connection(connection_);
  server_->Kick();
}

void HttpExchange::Gone() {
  hangup_.reset();
  connection_ = nullptr;
  gone_ = true;
  suspended_ = false;
  drained_.clear();
  auto callbacks = std::move(gone_callbacks_);
  gone_callbacks_.clear();
  for (auto& callback : callbacks) callback();
}

HttpServer::HttpServer(uv_loop_t* loop, HttpHandler* handler, HttpLimits limits)
    : loop_(loop), handler_(handler), limits_(limits) {}

HttpServer::~HttpServer() { Stop(); }

Result<void> HttpServer::Start(int listen_fd, bool unix_socket) {
  unix_socket_ = unix_socket;
  listen_fd_ = listen_fd;
  running_ = true;
  accepting_ = NewUvHandle<uv_poll_t>(this);
  uv_poll_init(loop_, accepting_.get(), listen_fd);
  uv_poll_start(accepting_.get(), UV_READABLE, [](uv_poll_t* h, int, int) {
    if (h->data != nullptr) static_cast<HttpServer*>(h->data)->OnAcceptable();
  });
  return {};
}

void HttpServer::OnAcceptable() {
  if (mhd_ == nullptr) {
    // libmicrohttpd is loaded when the first browser knocks (mhd_api.h says why).
    auto api = LoadMhd();
    Result<void> ok = api ? Result<void>{} : Result<void>(Fail(api.error()));
    if (api) {
      mhd_api = *api;
      ok = StartMhd();
    }
    if (!ok) {
      logging::error("web page unavailable: {}", ok.error().message);
      accepting_.reset();
      ::close(std::exchange(listen_fd_, -1));
      running_ = false;
      return;
    }
  }
  for (int i = 0; i < 64; ++i) {  // a burst of connections: the rest on the next turn
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Admit(fd, addr, len);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE) {
      // The connection stays queued; polling for it now would spin. Look again in a moment.
      uv_poll_stop(accepting_.get());
      if (!accept_pause_) {
        accept_pause_ = NewUvHandle<uv_timer_t>(this);
        uv_timer_init(loop_, accept_pause_.get());
      }
      uv_timer_start(accept_pause_.get(), [](uv_timer_t* t) {
        auto* self = static_cast<HttpServer*>(t->data);
        if (self == nullptr || !self->accepting_) return;
        uv_poll_start(self->accepting_.get(), UV_READABLE, [](uv_poll_t* h, int, int) {
          if (h->data != nullptr) static_cast<HttpServer*>(h->data)->OnAcceptable();
        });
      }, 200, 0);
    }
    break;
  }
  Run();
}

void HttpServer::Admit(int fd, const sockaddr_storage& addr, socklen_t len) {
  auto conn = std::make_unique<Conn>();
  conn->fd = fd;
  conn->peer.unix_socket = unix_socket_;
  std::optional<uid_t> uid;
  if (unix_socket_) {
    ucred cred{};
    socklen_t cred_len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0) {
      conn->peer.uid = uid = cred.uid;
      conn->peer.gid = cred.gid;
      conn->peer.pid = cred.pid;
    }
  } else {
    uid = LoopbackPeerUid(fd);
  }
  if (uid) {
    conn->key = "uid " + std::to_string(*uid);
  } else {
    char host[INET6_ADDRSTRLEN] = "?";
    if (addr.ss_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, host, sizeof(host));
    } else if (addr.ss_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, host, sizeof(host));
    }
    conn->key = std::string("address ") + host;
  }
  size_t total = conns_.size(), mine = per_peer_[conn->key];
  bool over_own = mine >= limits_.max_connections_per_peer;
  bool in_reserve = total >= limits_.max_connections - std::min(limits_.reserved, limits_.max_connections);
  std::string refusal;
  if (total >= limits_.max_connections) {
    refusal = "the web page serves at most " + std::to_string(limits_.max_connections) + " connections; try again";
  } else if ((over_own || in_reserve) && !(uid && limits_.privileged && limits_.privileged(*uid))) {
    refusal = over_own ? conn->key + " already has " + std::to_string(limits_.max_connections_per_peer) +
                             " connections to the web page, the most one may hold (torchxd --max-connections-per-user)"
                       : "the web page serves at most " +
                             std::to_string(limits_.max_connections - limits_.reserved) + " connections for users (" +
                             std::to_string(limits_.reserved) + " more are kept for root and the admin group)";
  }
  if (per_peer_[conn->key] == 0 && !refusal.empty()) per_peer_.erase(conn->key);
  if (!refusal.empty()) {
    logging::debug("web connection refused peer={} reason={}", conn->key, refusal);
    std::string answer = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         "Connection: close\r\nRetry-After: 5\r\nContent-Length: " +
                         std::to_string(refusal.size() + 10) + "\r\n\r\ntorchxd: " + refusal + "\n";
    (void)!::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
    return;
  }
  ++per_peer_[conn->key];
  Conn* raw = conn.get();
  conns_[raw] = std::move(conn);
  // A whole request head within the deadline, or the connection goes (slow headers hold a slot).
  raw->server = this;
  raw->head_timer = NewUvHandle<uv_timer_t>(raw);
  uv_timer_init(loop_, raw->head_timer.get());
  uv_timer_start(raw->head_timer.get(), [](uv_timer_t* t) {
    auto* c = static_cast<Conn*>(t->data);
    if (c == nullptr) return;
    logging::debug("web connection without a request head in time peer={}", c->key);
    ::shutdown(c->fd, SHUT_RDWR);  // MHD sees the end and closes it
    c->server->Kick();
  }, static_cast<uint64_t>(limits_.header_timeout_seconds * 1000), 0);
  if (mhd_api->add_connection(mhd_, fd, reinterpret_cast<const sockaddr*>(&addr), len) != MHD_YES) {
    // MHD closed the socket; NOTIFY_CLOSED may or may not have come.
    if (conns_.count(raw) != 0) OnConnectionClosed(raw);
  }
}

void HttpServer::OnConnectionClosed(Conn* conn) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  auto peer = per_peer_.find(conn->key);
  if (peer != per_peer_.end() && --peer->second == 0) per_peer_.erase(peer);
  conns_.erase(it);  // closes its timer
}

HttpServer::Conn* HttpServer::ConnOf(MHD_Connection* connection) const {
  const MHD_ConnectionInfo* info = mhd_api->get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  if (info == nullptr || info->socket_context == nullptr) return nullptr;
  auto* conn = static_cast<Conn*>(info->socket_context);
  return conns_.count(conn) != 0 ? conn : nullptr;
}

Result<void> HttpServer::StartMhd() {
  mhd_ = mhd_api->start_daemon(
      MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET, 0, nullptr, nullptr,
      &MhdCallbacks::Access, this, MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(limits_.max_connections),
      MHD_OPTION_CONNECTION_TIMEOUT, limits_.idle_timeout_seconds, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      static_cast<size_t>(64 << 10), MHD_OPTION_NOTIFY_COMPLETED, &MhdCallbacks::Completed, this,
      MHD_OPTION_NOTIFY_CONNECTION, &MhdCallbacks::Notify, this, MHD_OPTION_EXTERNAL_LOGGER, &MhdCallbacks::Log, this,
      MHD_OPTION_END);
  if (mhd_ == nullptr) {
    return Fail(Error::Internal("libmicrohttpd refused to start on the web listener (see the daemon log)"));
  }
  const MHD_DaemonInfo* info = mhd_api->get_daemon_info(mhd_, MHD_DAEMON_INFO_EPOLL_FD);
  if (info == nullptr) {
    mhd_api->stop_daemon(std::exchange(mhd_, nullptr));
    return Fail(Error::Internal("libmicrohttpd has no epoll descriptor"));
  }
  poll_ = NewUvHandle<uv_poll_t>(this);
  uv_poll_init(loop_, poll_.get(), info->epoll_fd);
  uv_poll_start(poll_.get(), UV_READABLE, [](uv_poll_t* h, int, int) {
    if (h->data != nullptr) static_cast<HttpServer*>(h->data)->Run();
  });
  timer_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, timer_.get());
  Run();
  return {};
}

void HttpServer::OnTimer(uv_timer_t* handle) {
  if (handle->data != nullptr) static_cast<HttpServer*>(handle->data)->Run();
}

void HttpServer::Run() {
  if (mhd_ == nullptr) return;
  mhd_api->run(mhd_);
  if (mhd_ == nullptr || !timer_) return;
  MHD_UNSIGNED_LONG_LONG timeout = 0;
  if (mhd_api->get_timeout(mhd_, &timeout) == MHD_YES) {
    uv_timer_start(timer_.get(), &HttpServer::OnTimer, timeout, 0);
  } else {
    uv_timer_stop(timer_.get());
  }
}

// MHD must run after a resume: now, on this loop turn (the next Run re-arms
// the timer with MHD's own timeout).
void HttpServer::Kick() {
  if (timer_) uv_timer_start(timer_.get(), &HttpServer::OnTimer, 0, 0);
}

void HttpServer::Stop() {
  running_ = false;
  accepting_.reset();
  accept_pause_.reset();
  if (listen_fd_ >= 0) ::close(std::exchange(listen_fd_, -1));
  if (mhd_ == nullptr) return;
  poll_.reset();
  timer_.reset();
  for (HttpExchange* exchange : std::vector<HttpExchange*>(live_.begin(), live_.end())) {
    exchange->ended_ = true;
    exchange->hangup_.reset();
    if (exchange->suspended_ && exchange->connection_ != nullptr) {
      exchange->suspended_ = false;
      mhd_api->resume_connection(exchange->connection_);
    }
  }
  MHD_Daemon* mhd = std::exchange(mhd_, nullptr);
  mhd_api->stop_daemon(mhd);  // Completed() and NOTIFY_CLOSED run for every connection
  conns_.clear();
  per_peer_.clear();
}

bool HttpServer::Access(MHD_Connection* connection, const char* url, const char* method, const char* upload_data,
                        size_t* upload_data_size, void** con_cls) {
  auto* holder = static_cast<std::shared_ptr<HttpExchange>*>(*con_cls);
  if (holder == nullptr) {
    auto exchange = std::make_shared<HttpExchange>();
    exchange->server_ = this;
    exchange->connection_ = connection;
    HttpRequest& r = exchange->request_;
    r.method = method;
    r.path = url;
    mhd_api->get_connection_values(connection, MHD_HEADER_KIND, &MhdCallbacks::Value, &r);
    mhd_api->get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &MhdCallbacks::Value, &r);
    mhd_api->get_connection_values(connection, MHD_COOKIE_KIND, &MhdCallbacks::Value, &r);
    r.peer.unix_socket = unix_socket_;
    if (Conn* conn = ConnOf(connection)) {
      r.peer = conn->peer;
      conn->requested = true;  // its head came in time
      if (conn->head_timer) uv_timer_stop(conn->head_timer.get());
    }
    live_.insert(exchange.get());
    *con_cls = new std::shared_ptr<HttpExchange>(std::move(exchange));
    return true;
  }
  HttpExchange* exchange = holder->get();
  if (*upload_data_size > 0) {
    HttpRequest& r = exchange->request_;
    if (r.body.size() + *upload_data_size > limits_.max_body_bytes) {
      r.body_too_large = true;
    } else {
      r.body.append(upload_data, *upload_data_size);
    }
    *upload_data_size = 0;
    return true;
  }
  if (!exchange->dispatched_) {
    exchange->dispatched_ = true;
    auto keep = *holder;
    handler_->Handle(keep);
  }
  if (exchange->queued_) return true;
  if (exchange->answer_ == HttpExchange::Answer::kNone) {
    mhd_api->suspend_connection(connection);
    exchange->suspended_ = true;
    return true;
  }
  return Queue(exchange);
}

bool HttpServer::Queue(HttpExchange* exchange) {
  MHD_Response* response = nullptr;
  if (exchange->answer_ == HttpExchange::Answer::kWhole) {
    response = mhd_api->create_response_from_buffer(exchange->pending_.size(), exchange->pending_.data(),
                                               MHD_RESPMEM_MUST_COPY);
    exchange->pending_.clear();
  } else {
    response = mhd_api->create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10, &MhdCallbacks::Read, exchange,
                                                 nullptr);
  }
  if (response == nullptr) return false;
  for (const auto& [name, value] : exchange->headers_) {
    mhd_api->add_response_header(response, name.c_str(), value.c_str());
  }
  MHD_Result queued =
      mhd_api->queue_response(exchange->connection_, static_cast<unsigned>(exchange->status_), response);
  mhd_api->destroy_response(response);
  exchange->queued_ = true;
  return queued == MHD_YES;
}

}  // namespace torchxd::webui
