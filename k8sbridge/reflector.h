// Reflector: keeps a consumer in sync with one collection of Kubernetes
// objects (e.g. the torchx-labelled Volcano Jobs of a namespace), the way
// client-go's reflector does: list, then watch from the list's
// resourceVersion; each event moves the resourceVersion on (bookmarks too).
// A watch that ends normally is resumed from there. A watch the server
// expired, as an ERROR event with a 410 Status inside the stream or as a
// plain HTTP 410, makes it list again. A list replaces what the reflector
// knew, as client-go's Replace does: every object it knew that the new list
// lacks is handed to the consumer as DELETED (with the metadata it last had)
// before the list itself. Failures retry with capped exponential backoff
// (0.8 s doubling to 30 s): a failed watch resumes from its resourceVersion,
// a second failure in a row lists again, and a failing list is reported
// (on_error) until one succeeds. A watch the server opened (HTTP 2xx) ends a
// row of failures, with or without events.
//
// Thread contract: loop thread only. Callbacks run on the loop and may not
// destroy the Reflector.
#ifndef TORCHXD_K8SBRIDGE_REFLECTOR_H_
#define TORCHXD_K8SBRIDGE_REFLECTOR_H_

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "k8sbridge/kube_api.h"

namespace torchxd::k8sbridge {

struct ReflectorCallbacks {
  std::function<void(const std::vector<nlohmann::json>& items)> on_list;
  // type: ADDED, MODIFIED or DELETED
  std::function<void(const std::string& type, const nlohmann::json& object)> on_event;
  std::function<void(const Error& error)> on_error;  // a list failed; it keeps retrying
};

struct ReflectorOptions {
  Clock* clock = nullptr;  // borrowed; null = the loop's (retry and relist backoff)
  double backoff_initial_seconds = 0.8;
  double backoff_max_seconds = 30.0;
  int watch_timeout_seconds = 300;  // asked of the server, with up to 2x jitter
};

class Reflector {
 public:
  Reflector(uv_loop_t* loop, KubeApi* api, std::string collection_path, std::string label_selector,
            ReflectorCallbacks callbacks, ReflectorOptions options = {});
  ~Reflector();
  void Start();

  int lists() const { return lists_; }  // how often it listed (tests)
  size_t known() const { return known_.size(); }

 private:
  void List();
  void Watch();
  void OnWatchLine(std::string_view line);
  void OnWatchEnd(long status, Result<void> result);
  void Retry(void (Reflector::*step)(), const Error& error);
  void Remember(const std::string& type, const nlohmann::json& object);
  std::string Query(bool watch) const;

  KubeApi* api_;
  std::string path_, selector_;
  ReflectorCallbacks callbacks_;
  ReflectorOptions options_;
  ClockOrLoop clock_;
  std::unique_ptr<Timer> timer_;  // the next list or watch after a failure
  net::HttpClient::RequestId request_ = 0;
  std::string resource_version_;
  double backoff_ = 0;
  bool expired_ = false;  // the stream said 410: list again when it ends
  int lists_ = 0;
  int expired_in_row_ = 0;  // 410s with no event between: back off
  int watch_failures_ = 0;  // in a row: the second one lists again
  bool watch_opened_ = false;  // the current watch got a 2xx answer
  bool watch_events_ = false;  // the current watch brought an event (a bookmark too)
  int64_t watch_started_ms_ = 0;
  // A watch that ends answered, empty and sooner than this is backed off as a failure.
  static constexpr int64_t kQuietWatchMinMs = 1000;
  // namespace/name -> {"metadata": …} of every object listed or watched, for Replace.
  std::map<std::string, nlohmann::json> known_;
};

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_REFLECTOR_H_
