// HttpClient: HTTP(S) requests on the libuv loop through libcurl's multi
// socket interface (curl's multi-uv.c pattern: one uv_poll per socket curl
// asks about, one uv_timer for curl's timeout). Nothing blocks the loop.
// Used by the Kubernetes bridge (kube-apiserver over TCP/TLS) and by the
// container runtime (the Docker API over a Unix socket).
//
// A request either collects its body and hands it to `on_done`, or, with
// `stream`, hands each chunk of a 2xx body to `on_data` as it arrives (watch
// and log streams); a non-2xx body is always collected, so errors can name
// the server's reason.
//
// Rules:
//   - `on_data` runs inside curl; it may call Start and Cancel (both are
//     deferred until curl returns), never destroy the client.
//   - `on_done` runs outside curl and is called exactly once unless the
//     request was cancelled. It may start or cancel requests.
//   - Destroying the client cancels every request without callbacks.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_NET_HTTP_CLIENT_H_
#define TORCHXD_NET_HTTP_CLIENT_H_

#include <curl/curl.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/uv_handle.h"

namespace torchxd::net {

struct TlsOptions {
  std::string ca_file, ca_pem;      // trust anchors; none = the system store
  std::string cert_file, cert_pem;  // client certificate
  std::string key_file, key_pem;    // its private key
  bool insecure_skip_verify = false;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  std::string unix_socket;  // connect here instead of the URL's host
  TlsOptions tls;
  bool stream = false;
  int64_t timeout_ms = 0;  // 0 = none (streams)
  int64_t connect_timeout_ms = 10000;
  // A stream whose response headers have not come by then fails (a server that
  // accepted the connection and never answers, a half-open TCP); 0 = no bound.
  int64_t answer_timeout_ms = 0;
};

struct HttpResponse {
  long status = 0;
  std::string body;  // empty for a streamed 2xx body
};

class HttpClient {
 public:
  using RequestId = uint64_t;
  using DataCallback = std::function<void(std::string_view chunk)>;
  using DoneCallback = std::function<void(Result<HttpResponse>)>;
  // The response's headers are all in (status >= 200): a stream is open. Runs inside curl, as on_data.
  using OpenCallback = std::function<void(long status)>;
  static constexpr size_t kMaxBodyBytes = 64u << 20;

  // Fails (Unavailable) only when libcurl cannot be loaded. `purpose` names
  // the client in the request counters ("kubernetes", "docker").
  [[nodiscard]] static Result<std::unique_ptr<HttpClient>> Create(uv_loop_t* loop, std::string purpose = "http");

  // Requests started and failed (no HTTP answer) per purpose, since the daemon started (for /metrics).
  struct Counters {
    uint64_t started = 0;
    uint64_t failed = 0;
  };
  static const std::map<std::string, Counters>& AllCounters() { return counters_; }
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Errors (unreachable, TLS, timeout) come back through on_done as Unavailable
  // or Timeout naming the URL or socket; HTTP statuses are not errors here.
  RequestId Start(HttpRequest request, DataCallback on_data, DoneCallback on_done, OpenCallback on_open = nullptr);
  void Cancel(RequestId id);
  size_t active() const { return transfers_.size(); }

 private:
  HttpClient(uv_loop_t* loop, std::string purpose);
  static inline std::map<std::string, Counters> counters_;
  struct Transfer;
  static int OnSocket(CURL* easy, curl_socket_t s, int what, void* userp, void* socketp);
  static int OnTimer(CURLM* multi, long timeout_ms, void* userp);
  static size_t OnWrite(char* data, size_t size, size_t n, void* userp);
  static size_t OnHeader(char* data, size_t size, size_t n, void* userp);
  void NoAnswer(RequestId id);  // a stream's answer_timeout_ms ran out
  static void OnPoll(uv_poll_t* handle, int status, int events);
  static void OnTimeout(uv_timer_t* handle);
  void Act(curl_socket_t fd, int flags);
  void Add(Transfer* t);
  void Finish(Transfer* t, CURLcode code);
  void Deliver(Transfer& t, CURLcode code);
  void Remove(Transfer* t);
  void Reap();
  void ApplyPending();

  uv_loop_t* loop_;
  Counters* counters_of_;
  CURLM* multi_ = nullptr;
  UvHandle<uv_timer_t> timer_;
  std::map<RequestId, std::unique_ptr<Transfer>> transfers_;
  std::map<curl_socket_t, UvHandle<uv_poll_t>> polls_;
  std::vector<Transfer*> pending_add_;
  RequestId next_id_ = 1;
  int in_curl_ = 0;
};

}  // namespace torchxd::net

#endif  // TORCHXD_NET_HTTP_CLIENT_H_
