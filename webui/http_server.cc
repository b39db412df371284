#include "webui/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "core/text.h"

#include "webui/mhd_api.h"

namespace torchxd::webui {
namespace {

constexpr size_t kDrainedBytes = 64 << 10;

// Set once libmicrohttpd is loaded (the first connection); every MHD call goes through it.
const MhdApi* mhd_api = nullptr;

}  // namespace

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
      spdlog::error("http request failed error={}", e.what());
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
    exchange->Gone();
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

  static void Log(void* /*cls*/, const char* format, va_list args) {
    char line[512];
    std::vsnprintf(line, sizeof(line), format, args);
    std::string text(line);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    spdlog::debug("http server said={}", text);
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
  // libmicrohttpd is loaded when the first browser knocks (mhd_api.h says why).
  waiting_ = NewUvHandle<uv_poll_t>(this);
  uv_poll_init(loop_, waiting_.get(), listen_fd);
  uv_poll_start(waiting_.get(), UV_READABLE, [](uv_poll_t* h, int, int) {
    if (h->data != nullptr) static_cast<HttpServer*>(h->data)->OnFirstConnection();
  });
  return {};
}

void HttpServer::OnFirstConnection() {
  waiting_.reset();
  auto api = LoadMhd();
  if (!api) {
    spdlog::error("web page unavailable: {}", api.error().message);
    ::close(std::exchange(listen_fd_, -1));
    running_ = false;
    return;
  }
  mhd_api = *api;
  if (auto ok = StartMhd(); !ok) {
    spdlog::error("web page unavailable: {}", ok.error().message);
    running_ = false;
  }
}

Result<void> HttpServer::StartMhd() {
  int listen_fd = std::exchange(listen_fd_, -1);
  mhd_ = mhd_api->start_daemon(
      MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, nullptr, nullptr,
      &MhdCallbacks::Access, this, MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned>(limits_.max_connections), MHD_OPTION_CONNECTION_TIMEOUT, limits_.idle_timeout_seconds,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<size_t>(64 << 10), MHD_OPTION_NOTIFY_COMPLETED,
      &MhdCallbacks::Completed, this, MHD_OPTION_EXTERNAL_LOGGER, &MhdCallbacks::Log, this, MHD_OPTION_END);
  if (mhd_ == nullptr) {
    ::close(listen_fd);
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
  waiting_.reset();
  if (listen_fd_ >= 0) ::close(std::exchange(listen_fd_, -1));  // no browser ever came
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
  mhd_api->stop_daemon(mhd);  // closes the listener; Completed() runs for every connection
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
    if (unix_socket_) {
      const MHD_ConnectionInfo* info = mhd_api->get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
      ucred cred{};
      socklen_t len = sizeof(cred);
      if (info != nullptr && ::getsockopt(info->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        r.peer.uid = cred.uid;
        r.peer.gid = cred.gid;
        r.peer.pid = cred.pid;
      }
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
