// KubeApi: the kube-apiserver calls the bridge makes (Volcano Jobs and
// Commands, Pods, pod logs), over net::HttpClient with the KubeConfig's server,
// TLS and bearer token. Non-2xx answers become Errors carrying the server's
// Status (reason, message, invalid fields); the token never appears in one.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_K8SBRIDGE_KUBE_API_H_
#define TORCHXD_K8SBRIDGE_KUBE_API_H_

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "k8sbridge/kubeconfig.h"
#include "net/http_client.h"

namespace torchxd::k8sbridge {

// Splits a byte stream into lines, carrying a partial line over to the next
// chunk. A line longer than kMaxLineBytes is passed on in pieces of that size
// (a server must not make us buffer without bound).
class LineBuffer {
 public:
  static constexpr size_t kMaxLineBytes = 16u << 20;

  template <class Fn>
  void Feed(std::string_view chunk, Fn&& on_line) {
    size_t start = 0;
    for (size_t nl = chunk.find('\n'); nl != std::string_view::npos; nl = chunk.find('\n', start)) {
      if (carry_.empty()) {
        on_line(chunk.substr(start, nl - start));
      } else {
        carry_.append(chunk.substr(start, nl - start));
        std::string line = std::move(carry_);
        carry_.clear();
        on_line(std::string_view(line));
      }
      start = nl + 1;
    }
    for (chunk.remove_prefix(start); !chunk.empty();) {
      size_t take = std::min(chunk.size(), kMaxLineBytes - carry_.size());
      carry_.append(chunk.substr(0, take));
      chunk.remove_prefix(take);
      if (carry_.size() == kMaxLineBytes) {
        std::string piece = std::move(carry_);
        carry_.clear();
        on_line(std::string_view(piece));
      }
    }
  }
  std::string TakeRest() { return std::exchange(carry_, std::string()); }

 private:
  std::string carry_;
};

// One line of a watch stream: {"type": ..., "object": {...}}.
struct WatchEvent {
  std::string type;             // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  nlohmann::json object;
  std::string resource_version;  // the object's metadata.resourceVersion, if any
  long error_code = 0;           // an ERROR event's Status code (410: expired)
  std::string error_message;
};
// InvalidArgument when the line is not a watch event (bad JSON, too deep, no type or object).
[[nodiscard]] Result<WatchEvent> DecodeWatchEvent(std::string_view line);

// "kube-apiserver POST /apis/...: 422 Invalid: <message> (spec.tasks.name: ...)"
Error StatusError(long http_status, const std::string& body, const std::string& what);

// Paths (no query string).
std::string JobsPath(const std::string& ns);
std::string JobPath(const std::string& ns, const std::string& name);
std::string CommandsPath(const std::string& ns);
std::string PodsPath(const std::string& ns);
std::string PodLogPath(const std::string& ns, const std::string& pod);
std::string QueuePath(const std::string& queue);  // Volcano's cluster-scoped Queue
std::string ServiceAccountPath(const std::string& ns, const std::string& name);

class KubeApi {
 public:
  using JsonDone = std::function<void(Result<nlohmann::json>)>;
  // `status` is the HTTP status, 0 when the connection failed (then `error`).
  using StreamDone = std::function<void(long status, Result<void> error)>;

  KubeApi(net::HttpClient* http, KubeConfig config) : http_(http), config_(std::move(config)) {}
  const KubeConfig& config() const { return config_; }

  // `path_and_query` starts with '/'. `body` may be null.
  // `content_type` of the body: e.g. application/json-patch+json for a PATCH.
  net::HttpClient::RequestId Call(const std::string& method, const std::string& path_and_query,
                             const nlohmann::json* body, JsonDone done,
                             const std::string& content_type = "application/json");
  // A streamed GET (watch, log follow): each complete line to on_line.
  // `timeout_ms` bounds the whole stream (0 = none, for watches and follows).
  // `on_open`: the server answered with headers (its status), before any line.
  net::HttpClient::RequestId Stream(const std::string& path_and_query, std::function<void(std::string_view)> on_line,
                               StreamDone done, int64_t timeout_ms = 0, net::HttpClient::OpenCallback on_open = nullptr);
  void Cancel(net::HttpClient::RequestId id) { http_->Cancel(id); }

 private:
  net::HttpRequest Base(const std::string& method, const std::string& path_and_query) const;

  net::HttpClient* http_;
  KubeConfig config_;
};

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_KUBE_API_H_
