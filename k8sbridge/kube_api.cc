#include "k8sbridge/kube_api.h"

#include "core/text.h"

#include "core/json_parse.h"

#include <memory>

namespace torchxd::k8sbridge {
namespace {

using nlohmann::json;

constexpr int64_t kCallTimeoutMs = 30000;
constexpr int64_t kStreamAnswerTimeoutMs = 30000;

ErrorCode CodeForStatus(long status) {
  switch (status) {
    case 400:
    case 422:
      return ErrorCode::kInvalidArgument;
    case 401:
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 409:
      return ErrorCode::kAlreadyExists;
    case 408:
    case 504:
      return ErrorCode::kTimeout;
    default:
      return ErrorCode::kUnavailable;
  }
}

}  // namespace

Result<WatchEvent> DecodeWatchEvent(std::string_view line) {
  auto parsed = core::ParseJson(line);
  if (!parsed) return Fail(parsed.error());
  json& event = *parsed;
  if (!event.is_object() || !event.contains("type") || !event["type"].is_string() || !event.contains("object") ||
      !event["object"].is_object()) {
    return Fail(Error::InvalidArgument("not a watch event"));
  }
  WatchEvent w;
  w.type = event["type"].get<std::string>();
  w.object = std::move(event["object"]);
  if (w.type == "ERROR") {
    if (w.object.contains("code") && w.object["code"].is_number_integer()) w.error_code = w.object["code"].get<long>();
    if (w.object.contains("message") && w.object["message"].is_string()) w.error_message = w.object["message"];
    return w;
  }
  if (w.object.contains("metadata") && w.object["metadata"].is_object()) {
    const json& meta = w.object["metadata"];
    if (meta.contains("resourceVersion") && meta["resourceVersion"].is_string()) {
      w.resource_version = meta["resourceVersion"].get<std::string>();
    }
  }
  return w;
}

Error StatusError(long http_status, const std::string& body, const std::string& what) {
  std::string message = "kube-apiserver " + what + ": " + std::to_string(http_status);
  json status = core::ParseJsonOrDiscarded(body);
  if (status.is_object() && status.value("kind", "") == "Status") {
    std::string reason = status.value("reason", "");
    if (!reason.empty()) message += " " + reason;
    message += ": " + status.value("message", "");
    if (status.contains("details") && status["details"].contains("causes")) {
      std::string fields;
      for (const auto& c : status["details"]["causes"]) {
        if (!c.is_object() || !c.contains("field")) continue;
        if (!fields.empty()) fields += ", ";
        fields += c.value("field", "");
      }
      if (!fields.empty()) message += " (fields: " + fields + ")";
    }
  } else if (!body.empty()) {
    message += ": " + body.substr(0, 512);
  }
  return Error{CodeForStatus(http_status), message};
}

std::string JobsPath(const std::string& ns) {
  return "/apis/batch.volcano.sh/v1alpha1/namespaces/" + core::UrlEscape(ns) + "/jobs";
}
std::string JobPath(const std::string& ns, const std::string& name) { return JobsPath(ns) + "/" + core::UrlEscape(name); }
std::string CommandsPath(const std::string& ns) {
  return "/apis/bus.volcano.sh/v1alpha1/namespaces/" + core::UrlEscape(ns) + "/commands";
}
std::string PodsPath(const std::string& ns) { return "/api/v1/namespaces/" + core::UrlEscape(ns) + "/pods"; }
std::string PodLogPath(const std::string& ns, const std::string& pod) {
  return PodsPath(ns) + "/" + core::UrlEscape(pod) + "/log";
}
std::string QueuePath(const std::string& queue) {
  return "/apis/scheduling.volcano.sh/v1beta1/queues/" + core::UrlEscape(queue);
}
std::string ServiceAccountPath(const std::string& ns, const std::string& name) {
  return "/api/v1/namespaces/" + core::UrlEscape(ns) + "/serviceaccounts/" + core::UrlEscape(name);
}

net::HttpRequest KubeApi::Base(const std::string& method, const std::string& path_and_query) const {
  net::HttpRequest r;
  r.method = method;
  r.url = config_.server + path_and_query;
  r.tls = config_.tls;
  r.headers.push_back("Accept: application/json");
  r.headers.push_back("User-Agent: torchxd/" TORCHXD_VERSION);
  if (!config_.token.empty()) r.headers.push_back("Authorization: Bearer " + config_.token);
  return r;
}

net::HttpClient::RequestId KubeApi::Call(const std::string& method, const std::string& path_and_query,
                                    const json* body, JsonDone done, const std::string& content_type) {
  net::HttpRequest r = Base(method, path_and_query);
  r.timeout_ms = kCallTimeoutMs;
  if (body != nullptr) {
    r.body = body->dump();
    r.headers.push_back("Content-Type: " + content_type);
  }
  std::string what = method + " " + path_and_query;
  return http_->Start(std::move(r), nullptr, [what, done = std::move(done)](Result<net::HttpResponse> resp) {
    if (!resp) return done(Fail(resp.error().WithContext("kube-apiserver")));
    if (resp->status < 200 || resp->status >= 300) return done(Fail(StatusError(resp->status, resp->body, what)));
    json parsed = core::ParseJsonOrDiscarded(resp->body);
    if (parsed.is_discarded()) {
      return done(Fail(Error::Unavailable("kube-apiserver " + what + ": answer is not JSON")));
    }
    done(std::move(parsed));
  });
}

net::HttpClient::RequestId KubeApi::Stream(const std::string& path_and_query, std::function<void(std::string_view)> on_line,
                                      StreamDone done, int64_t timeout_ms, net::HttpClient::OpenCallback on_open) {
  net::HttpRequest r = Base("GET", path_and_query);
  r.stream = true;
  r.timeout_ms = timeout_ms;
  r.answer_timeout_ms = kStreamAnswerTimeoutMs;  // watches and follows answer at once; a silent one is stuck
  auto lines = std::make_shared<LineBuffer>();
  std::string what = "GET " + path_and_query;
  auto on_data = [lines, on_line](std::string_view chunk) { lines->Feed(chunk, on_line); };
  return http_->Start(std::move(r), on_data, [lines, on_line, what, done = std::move(done)](Result<net::HttpResponse> resp) {
    if (!resp) return done(0, Fail(resp.error().WithContext("kube-apiserver")));
    if (resp->status < 200 || resp->status >= 300) {
      return done(resp->status, Fail(StatusError(resp->status, resp->body, what)));
    }
    std::string rest = lines->TakeRest();
    if (!rest.empty()) on_line(rest);
    done(resp->status, {});
  }, std::move(on_open));
}

}  // namespace torchxd::k8sbridge
