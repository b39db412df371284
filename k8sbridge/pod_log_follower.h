// PodLogFollower: follows one pod's log (`follow=true&timestamps=true`) and
// hands each line to the consumer with the kubelet's timestamp as its time.
// Resuming after a drop or a daemon restart asks from `sinceTime` = the last
// line's second and skips lines at or before the last timestamp seen, so the
// store gets each line once.
//
// Thread contract: loop thread only. Callbacks may destroy the follower.
#ifndef TORCHXD_K8SBRIDGE_POD_LOG_FOLLOWER_H_
#define TORCHXD_K8SBRIDGE_POD_LOG_FOLLOWER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "k8sbridge/kube_api.h"

namespace torchxd::k8sbridge {

// Splits a `timestamps=true` log line into (time in ns, text without the stamp).
std::pair<std::optional<int64_t>, std::string_view> SplitTimestamp(std::string_view line);

class PodLogFollower {
 public:
  // `line` ends with '\n'.
  using LineFn = std::function<void(int64_t time_ns, std::string_view line)>;
  using EndFn = std::function<void(long http_status, Result<void> result)>;

  // after_ns: the last timestamp already stored (0 = from the start).
  // follow=false reads what the pod has logged so far and ends.
  PodLogFollower(KubeApi* api, std::string ns, std::string pod, std::string container, int64_t after_ns,
                 LineFn on_line, EndFn on_end, bool follow = true);
  ~PodLogFollower();
  PodLogFollower(const PodLogFollower&) = delete;
  PodLogFollower& operator=(const PodLogFollower&) = delete;
  int64_t last_ns() const { return last_ns_; }

 private:
  void OnLine(std::string_view line);

  KubeApi* api_;
  net::HttpClient::RequestId request_ = 0;
  int64_t last_ns_ = 0;
  LineFn on_line_;
  EndFn on_end_;
};

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_POD_LOG_FOLLOWER_H_
