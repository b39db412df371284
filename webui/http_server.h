// HttpServer: libmicrohttpd driven from the daemon's libuv loop. MHD parses
// HTTP (no parser of ours); it runs in its external-event mode with epoll: one
// uv_poll watches MHD's epoll descriptor, one uv_timer its timeouts, and every
// MHD call happens on the loop thread.
//
// Each request becomes an HttpExchange handed to an HttpHandler once its body
// is in. The handler answers at once or later (the connection is suspended
// meanwhile, so nothing waits on the loop): Reply() with a whole body, or
// StartStream() then Write()/End() for a body that grows (Server-Sent Events,
// downloads). An exchange the client left stays safe to call (no-ops).
//
// Rules: MHD_queue_response is only legal inside MHD's access callback, so a
// late answer is stored and the connection resumed; MHD calls back and it is
// queued there. A stream reader with nothing to send suspends its connection
// (returning 0 would spin) and Write() resumes it.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_WEBUI_HTTP_SERVER_H_
#define TORCHXD_WEBUI_HTTP_SERVER_H_

#include <sys/socket.h>
#include <sys/types.h>
#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/uv_handle.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace torchxd::webui {

struct HttpPeer {
  bool unix_socket = false;
  // From SO_PEERCRED, on a Unix socket only.
  std::optional<uid_t> uid;
  gid_t gid = 0;
  pid_t pid = 0;
};

// How a listener's connections are bounded, counted when they are accepted
// (before a byte of HTTP is read): per peer (a uid on the Unix socket and for
// loopback TCP, whose socket's owner the kernel tells; an address otherwise)
// and in total, the last `reserved` slots kept for privileged peers (root, the
// daemon's user, the admin group). A connection must send a whole request
// head within `header_timeout_seconds` of being accepted.
struct HttpLimits {
  size_t max_connections = 256;
  size_t max_connections_per_peer = 64;
  size_t reserved = 8;
  double header_timeout_seconds = 10;
  size_t max_body_bytes = 1 << 20;
  unsigned idle_timeout_seconds = 60;  // between requests; a suspended (waiting, streaming) one never times out
  std::function<bool(uid_t)> privileged;  // none: nobody is
};

struct HttpRequest {
  std::string method;
  std::string path;                            // decoded, without the query
  std::map<std::string, std::string> query;    // decoded; a repeated key keeps its last value
  std::map<std::string, std::string> headers;  // names in lowercase
  std::map<std::string, std::string> cookies;
  std::string body;
  bool body_too_large = false;
  HttpPeer peer;

  std::string Header(const std::string& lowercase_name) const {
    auto it = headers.find(lowercase_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

class HttpServer;

class HttpExchange : public std::enable_shared_from_this<HttpExchange> {
 public:
  const HttpRequest& request() const { return request_; }
  // Answers with a whole body. Only the first answer counts.
  void Reply(int status, HttpHeaders headers, std::string body);
  // Starts a body of unknown length; Write() appends to it, End() finishes it.
  void StartStream(int status, HttpHeaders headers);
  void Write(std::string_view bytes);
  void End();
  bool alive() const { return connection_ != nullptr && !gone_; }
  // Bytes written but not yet taken by the client's socket (stream back-pressure).
  size_t QueuedBytes() const { return pending_.size() - pending_pos_; }
  void WhenDrained(std::function<void()> callback);
  void OnGone(std::function<void()> callback);

 private:
  friend class HttpServer;
  friend struct MhdCallbacks;
  enum class Answer { kNone, kWhole, kStream };
  ssize_t Read(char* buf, size_t max);
  void Resume();
  void WatchForHangUp();
  void OnReadable();
  void Gone();

  HttpServer* server_ = nullptr;
  MHD_Connection* connection_ = nullptr;
  HttpRequest request_;
  bool dispatched_ = false;
  bool suspended_ = false;
  bool queued_ = false;
  bool gone_ = false;
  Answer answer_ = Answer::kNone;
  int status_ = 0;
  HttpHeaders headers_;
  std::string pending_;       // whole body, or stream bytes not yet read by MHD
  size_t pending_pos_ = 0;
  bool ended_ = false;
  std::vector<std::function<void()>> drained_;
  std::vector<std::function<void()>> gone_callbacks_;
  UvHandle<uv_poll_t> hangup_;  // the client's socket while a stream waits (suspended)
  int hangup_fd_ = -1;
  bool client_left_ = false;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual void Handle(const std::shared_ptr<HttpExchange>& exchange) = 0;
};

class HttpServer {
 public:
  HttpServer(uv_loop_t* loop, HttpHandler* handler, HttpLimits limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves `listen_fd` (already bound and listening; taken over). `unix_socket`:
  // peers get SO_PEERCRED credentials. Connections are accepted here, counted
  // against the limits, and handed to libmicrohttpd, which is loaded and
  // started on the first one; if it cannot be, that is logged and the listener closed.
  [[nodiscard]] Result<void> Start(int listen_fd, bool unix_socket);
  // Ends every exchange and closes the listener.
  void Stop();
  size_t exchanges() const { return live_.size(); }

  // Runs MHD now and re-arms its timer (after a resume, or in tests).
  void Run();

 private:
  friend class HttpExchange;
  friend struct MhdCallbacks;
  // MHD's access callback: true = MHD_YES.
  bool Access(MHD_Connection* connection, const char* url, const char* method, const char* upload_data,
             size_t* upload_data_size, void** con_cls);
  bool Queue(HttpExchange* exchange);
  void Kick();
  static void OnTimer(uv_timer_t* handle);
  void OnAcceptable();
  [[nodiscard]] Result<void> StartMhd();
  // One accepted connection: counted and handed to MHD, or told why not and closed.
  struct Conn;
  void Admit(int fd, const sockaddr_storage& addr, socklen_t len);
  void OnConnectionClosed(Conn* conn);
  Conn* ConnOf(MHD_Connection* connection) const;

  uv_loop_t* loop_;
  HttpHandler* handler_;
  HttpLimits limits_;
  bool unix_socket_ = false;
  int listen_fd_ = -1;                // ours until libmicrohttpd takes it
  UvHandle<uv_poll_t> accepting_;     // the listener: we accept, MHD serves
  UvHandle<uv_timer_t> accept_pause_;  // out of descriptors: accept again a moment later
  std::map<Conn*, std::unique_ptr<Conn>> conns_;
  std::map<std::string, size_t> per_peer_;
  MHD_Daemon* mhd_ = nullptr;
  UvHandle<uv_poll_t> poll_;
  UvHandle<uv_timer_t> timer_;  // MHD's timeouts, and a prompt run after a resume
  std::set<HttpExchange*> live_;
  bool running_ = false;
};

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_HTTP_SERVER_H_
