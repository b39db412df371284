// KubeApi: the kube-apiserver calls the bridge makes (Volcano Jobs and
// Commands, Pods, pod logs), over HttpClient with the KubeConfig's server,
// TLS and bearer token. Non-2xx answers become Errors carrying the server's
// Status (reason, message, invalid fields); the token never appears in one.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_K8SBRIDGE_KUBE_API_H_
#define TORCHXD_K8SBRIDGE_KUBE_API_H_

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/http_client.h"
#include "core/result.h"
#include "k8sbridge/kubeconfig.h"

namespace torchxd::k8sbridge {

// Splits a byte stream into lines, carrying a partial line over to the next chunk.
class LineBuffer {
 public:
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
    carry_.append(chunk.substr(start));
  }
  std::string TakeRest() { return std::exchange(carry_, std::string()); }

 private:
  std::string carry_;
};

std::string UrlEscape(std::string_view text);
// "kube-apiserver POST /apis/...: 422 Invalid: <message> (spec.tasks.name: ...)"
Error StatusError(long http_status, const std::string& body, const std::string& what);

// Paths (no query string).
std::string JobsPath(const std::string& ns);
std::string JobPath(const std::string& ns, const std::string& name);
std::string CommandsPath(const std::string& ns);
std::string PodsPath(const std::string& ns);
std::string PodLogPath(const std::string& ns, const std::string& pod);

class KubeApi {
 public:
  using JsonDone = std::function<void(Result<nlohmann::json>)>;
  // `status` is the HTTP status, 0 when the connection failed (then `error`).
  using StreamDone = std::function<void(long status, Result<void> error)>;

  KubeApi(HttpClient* http, KubeConfig config) : http_(http), config_(std::move(config)) {}
  const KubeConfig& config() const { return config_; }

  // `path_and_query` starts with '/'. `body` may be null.
  HttpClient::RequestId Call(const std::string& method, const std::string& path_and_query,
                             const nlohmann::json* body, JsonDone done);
  // A streamed GET (watch, log follow): each complete line to on_line.
  // `timeout_ms` bounds the whole stream (0 = none, for watches and follows).
  HttpClient::RequestId Stream(const std::string& path_and_query, std::function<void(std::string_view)> on_line,
                               StreamDone done, int64_t timeout_ms = 0);
  void Cancel(HttpClient::RequestId id) { http_->Cancel(id); }

 private:
  HttpRequest Base(const std::string& method, const std::string& path_and_query) const;

  HttpClient* http_;
  KubeConfig config_;
};

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_KUBE_API_H_
