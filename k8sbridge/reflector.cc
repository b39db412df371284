#include "k8sbridge/reflector.h"

#include "core/log.h"
#include "core/text.h"


#include <algorithm>
#include <random>

namespace torchxd::k8sbridge {
namespace {

using nlohmann::json;

// "namespace/name" of an object (or of its {"metadata": …} stub).
std::string KeyOf(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return "";
  const json& meta = object["metadata"];
  auto str = [&](const char* k) { return meta.contains(k) && meta[k].is_string() ? meta[k].get<std::string>() : ""; };
  return str("namespace") + "/" + str("name");
}

double Jitter01() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace

Reflector::Reflector(uv_loop_t* loop, KubeApi* api, std::string collection_path, std::string label_selector,
                     ReflectorCallbacks callbacks, ReflectorOptions options)
    : api_(api),
      path_(std::move(collection_path)),
      selector_(std::move(label_selector)),
      callbacks_(std::move(callbacks)),
      options_(options),
      clock_(loop, options.clock) {}

Reflector::~Reflector() {
  if (request_ != 0) api_->Cancel(request_);
}

void Reflector::Start() { List(); }

std::string Reflector::Query(bool watch) const {
  std::string q = "?labelSelector=" + core::UrlEscape(selector_);
  if (watch) {
    int timeout = options_.watch_timeout_seconds;
    timeout += static_cast<int>(Jitter01() * timeout);
    q += "&watch=1&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(timeout) +
         "&resourceVersion=" + core::UrlEscape(resource_version_);
  }
  return q;
}

void Reflector::List() {
  request_ = api_->Call("GET", path_ + Query(false), nullptr, [this](Result<json> list) {
    request_ = 0;
    if (!list) return Retry(&Reflector::List, list.error());
    if (!list->is_object()) return Retry(&Reflector::List, Error::Unavailable("the list answer is not an object"));
    const json& meta = (*list)["metadata"];
    resource_version_ = meta.is_object() ? meta.value("resourceVersion", "") : "";
    std::vector<json> items;
    if (list->contains("items") && (*list)["items"].is_array()) {
      for (auto& item : (*list)["items"]) items.push_back(std::move(item));
    }
    ++lists_;
    backoff_ = 0;
    watch_failures_ = 0;
    // Replace: what the list lacks was deleted while no watch told us.
    std::map<std::string, json> now;
    for (const json& item : items) {
      json stub = {{"metadata", item.is_object() && item.contains("metadata") ? item["metadata"] : json::object()}};
      now.emplace(KeyOf(stub), std::move(stub));
    }
    auto gone = std::move(known_);
    known_ = std::move(now);
    for (const auto& [key, stub] : gone) {
      if (known_.count(key) == 0 && callbacks_.on_event) callbacks_.on_event("DELETED", stub);
    }
    if (callbacks_.on_list) callbacks_.on_list(items);
    Watch();
  });
}

void Reflector::Watch() {
  expired_ = false;
  watch_opened_ = false;
  watch_events_ = false;
  watch_started_ms_ = clock_->UnixNowMs();
  request_ = api_->Stream(
      path_ + Query(true), [this](std::string_view line) { OnWatchLine(line); },
      [this](long status, Result<void> result) { OnWatchEnd(status, std::move(result)); }, 0,
      [this](long status) { watch_opened_ = status >= 200 && status < 300; });
}

void Reflector::OnWatchLine(std::string_view line) {
  if (expired_ || line.empty()) return;
  auto event = DecodeWatchEvent(line);
  if (!event) {
    logging::warn("watch event is not an event path={} error={} line={}", path_, event.error().message,
                 std::string(line.substr(0, 200)));
    return;
  }
  if (event->type == "ERROR") {
    // client-go: a Status inside the stream; 410 Gone means our resourceVersion is too old.
    if (event->error_code == 410) {
      expired_ = true;
      ++expired_in_row_;
      logging::info("watch expired, relisting path={} resource_version={}", path_, resource_version_);
      // Ending the stream here: Cancel is deferred until curl returns.
      api_->Cancel(request_);
      request_ = 0;
      timer_ = clock_->After(
          expired_in_row_ > 1 ? static_cast<uint64_t>(options_.backoff_initial_seconds * 1000) : 0, [this] { List(); });
      return;
    }
    logging::warn("watch error event path={} message={}", path_, event->error_message);
    return;
  }
  if (!event->resource_version.empty()) resource_version_ = event->resource_version;
  watch_events_ = true;
  backoff_ = 0;
  expired_in_row_ = 0;
  watch_failures_ = 0;
  if (event->type == "BOOKMARK") return;
  Remember(event->type, event->object);
  if (callbacks_.on_event) callbacks_.on_event(event->type, event->object);
}

void Reflector::Remember(const std::string& type, const json& object) {
  json stub = {{"metadata", object.is_object() && object.contains("metadata") ? object["metadata"] : json::object()}};
  std::string key = KeyOf(stub);
  if (type == "DELETED") {
    known_.erase(key);
  } else {
    known_[key] = std::move(stub);
  }
}

void Reflector::OnWatchEnd(long status, Result<void> result) {
  request_ = 0;
  if (expired_) return;  // already relisting
  if (status == 410) {
    logging::info("watch expired (HTTP 410), relisting path={}", path_);
    // A server that expires even a fresh list's version must not make us spin.
    if (++expired_in_row_ > 1) return Retry(&Reflector::List, Error::Unavailable("watch expired again right after a list"));
    return List();
  }
  expired_in_row_ = 0;
  if (!result) {
    // A watch the server opened (it answered 200) and that then dropped is a
    // first failure, events or not; one that keeps failing to open lists again.
    if (watch_opened_) watch_failures_ = 0, backoff_ = 0;
    return Retry(++watch_failures_ > 1 ? &Reflector::List : &Reflector::Watch, result.error());
  }
  watch_failures_ = 0;
  // A server (or a proxy) that ends every watch at once, answered and empty, would have us open
  // hundreds a second: that is backed off as a failure. A watch that ran its timeoutSeconds resumes.
  if (!watch_events_ && clock_->UnixNowMs() - watch_started_ms_ < kQuietWatchMinMs) {
    return Retry(&Reflector::Watch, Error::Unavailable("the server ended the watch at once, with nothing in it"));
  }
  Watch();  // the server's timeoutSeconds ran out: resume from where we are
}

void Reflector::Retry(void (Reflector::*step)(), const Error& error) {
  backoff_ = backoff_ == 0 ? options_.backoff_initial_seconds
                           : std::min(backoff_ * 2, options_.backoff_max_seconds);
  double delay = backoff_ * (1.0 + 0.1 * Jitter01());
  logging::warn("kubernetes {} failed, retrying in {:.1f}s path={} error={}",
               step == &Reflector::List ? "list" : "watch", delay, path_, error.message);
  if (step == &Reflector::List && callbacks_.on_error) callbacks_.on_error(error);
  timer_ = clock_->After(static_cast<uint64_t>(delay * 1000), [this, step] { (this->*step)(); });
}

}  // namespace torchxd::k8sbridge
