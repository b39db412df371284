// KubernetesScheduler's pod logs. A started pod's log is followed into the
// log store (from its last stored line after a drop or a restart). A pod that
// never started is never read. A read that fails, or ends without a line while
// the pod runs, backs off for that pod alone: --pod-log-backoff seconds
// doubling per failure up to ten times that, with 10% jitter, so a kubelet
// that does not answer costs each pod a request per step, not one a second.
// A finished pod's log is read until a read reaches its end; a finished pod
// whose reads keep failing is given up after kTerminalReads of them. While a
// log cannot be read, the reason is the pod track's log_error: followers get
// it as a warning event, a one-off read reports it (exit 1 in the CLI), and
// `status` shows it in the app's msg.

#include <algorithm>
#include <cmath>
#include <random>

#include "core/app_status.h"
#include "core/ids.h"
#include "core/log.h"
#include "k8sbridge/kubernetes_app.h"

namespace torchxd::k8sbridge {
namespace {


constexpr int kTerminalReads = 4;        // failed reads of a finished pod's log before it is given up
constexpr double kResumeSeconds = 1.0;   // after a stream that delivered lines ended
constexpr double kBackoffCapFactor = 10;  // the backoff stops growing at 10x its first step

std::string CannotRead(const std::string& pod, const Error& e) {
  return "the log of pod " + pod + " cannot be read: " + e.message;
}

double Jitter01() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace

double KubernetesScheduler::LogBackoffSeconds(int failures) const {
  double first = options_.log_backoff_seconds;
  double d = std::min(first * std::pow(2.0, std::max(0, failures - 1)), first * kBackoffCapFactor);
  return d * (1.0 + 0.1 * Jitter01());
}

bool KubernetesScheduler::WantsRead(const KubeApp& app, const std::string& key, const PodTrack& t) {
  // A foreign Job's logs are read when someone asks (BeforeLogRead, OnFollow).
  const TrackedPod& pod = app.Pod(key);
  return !t.follower && !t.log_done && pod.started && !pod.uid.empty() && (!app.foreign || app.followed);
}

void KubernetesScheduler::FollowLogs(KubeApp& app, const std::string& key) {
  if (shut_down_ || !api_) return;
  PodTrack& t = app.pods[key];
  if (!WantsRead(app, key, t)) return;
  std::string app_id = app.rec->app_id;
  auto on_line = [this, app_id, key](int64_t time_ns, std::string_view line) {
    StoreLine(app_id, key, time_ns, line);
  };
  auto on_end = [this, app_id, key](long status, Result<void> result) {
    OnLogEnd(app_id, key, status, std::move(result));
  };
  t.lines_this_read = 0;
  // A pod of several containers (sidecars) must be told whose log: the replica's own.
  t.follower = std::make_unique<PodLogFollower>(api_.get(), app.job->ns, app.Pod(key).pod, app.Pod(key).container,
                                                     t.after_ns,
                                                     on_line, on_end);
}

void KubernetesScheduler::StoreLine(const std::string& app_id, const std::string& key, int64_t time_ns,
                                    std::string_view line) {
  auto it = apps_.find(app_id);
  if (it == apps_.end()) return;
  KubeApp& a = *it->second;
  PodTrack& track = a.pods[key];
  if (time_ns <= track.after_ns) return;  // the follower and a catch-up read may both bring it
  track.after_ns = time_ns;
  ++track.lines_this_read;
  bool recovered = !track.log_error.empty();
  if (recovered) SetLogProblem(a, key, track, "", 0);
  supervisor::ReplicaInfo* r = a.Replica(key);
  // A replica whose writer a restarted daemon has not opened yet (its pod was seen before the restart).
  if (r != nullptr) (void)logs_->Open(*a.rec, key, r->log_dir, std::nullopt);
  logs_->WriteCombined(*a.rec, key, line, time_ns / 1000000);
  if (recovered) {
    Changed(a);
  } else if (clock_->UnixNowMs() - a.persisted_ms >= 1000) {
    (void)Persist(a);  // bounds what a crash can repeat
  }
}

void KubernetesScheduler::SetLogProblem(KubeApp& app, const std::string& key, PodTrack& t,
                                        const std::string& problem, long status) {
  if (problem == t.log_error) return;
  const std::string& pod = app.Pod(key).pod;
  if (problem.empty()) {
    logging::info("pod log readable again app={} pod={}", app.rec->app_id, pod);
  } else {
    logging::warn("pod log cannot be read app={} pod={} status={} error={}", app.rec->app_id, pod, status, problem);
  }
  t.log_error = problem;
}

void KubernetesScheduler::BeforeLogRead(const seam::AppRecord& rec, std::function<void()> ready) {
  auto it = apps_.find(rec.app_id);
  if (it == apps_.end() || !api_ || shut_down_) return ready();
  KubeApp& app = *it->second;
  auto remaining = std::make_shared<size_t>(0);
  auto once = std::make_shared<std::function<void()>>(std::move(ready));
  auto finish_one = [remaining, once] {
    if (*remaining == 0 || --*remaining > 0 || !*once) return;
    auto run = std::move(*once);
    *once = nullptr;
    run();
  };
  // Only pods whose log can be read now: never one that did not start, nor
  // one backing off (its problem is what the reader is told).
  std::vector<std::string> keys;
  for (const auto& [key, t] : app.pods) {
    const TrackedPod& pod = app.Pod(key);
    if (pod.started && !pod.uid.empty() && !t.log_done && t.failures == 0) keys.push_back(key);
  }
  if (keys.empty()) return (*once)();
  *remaining = keys.size();
  std::string app_id = rec.app_id;
  for (const auto& key : keys) {
    const PodTrack& t = app.pods[key];
    uint64_t id = next_catch_up_++;
    auto on_line = [this, app_id, key](int64_t time_ns, std::string_view line) { StoreLine(app_id, key, time_ns, line); };
    auto on_end = [this, id, app_id, key, finish_one](long status, Result<void> result) {
      catch_ups_.erase(id);  // the follower survives this: its done lambda holds what it needs
      if (!result && status != 404) {
        // As a failed follow: the pod backs off and the reader is told why.
        auto found = apps_.find(app_id);
        if (found != apps_.end()) {
          PodTrack& track = found->second->pods[key];
          SetLogProblem(*found->second, key, track, CannotRead(found->second->Pod(key).pod, result.error()), status);
          ++track.failures;
          track.next_read_ms = clock_->UnixNowMs() + static_cast<int64_t>(LogBackoffSeconds(track.failures) * 1000);
          Changed(*found->second);
          ArmLogRetry();
        }
      }
      finish_one();
    };
    catch_ups_[id] = std::make_unique<PodLogFollower>(api_.get(), app.job->ns, app.Pod(key).pod,
                                                           app.Pod(key).container, t.after_ns,
                                                           on_line, on_end, /*follow=*/false);
  }
}

void KubernetesScheduler::OnLogEnd(const std::string& app_id, const std::string& key, long status,
                                   Result<void> result) {
  auto it = apps_.find(app_id);
  if (it == apps_.end()) return;
  KubeApp& app = *it->second;
  PodTrack& t = app.pods[key];
  t.follower.reset();
  const TrackedPod& pod = app.Pod(key);
  if (status == 404 || (pod.terminal && result)) {
    // The pod is gone, or finished and its log was read to the end.
    t.log_done = true;
    t.failures = 0;
    SetLogProblem(app, key, t, "", status);
    Changed(app);
    return;
  }
  if (pod.terminal && status >= 400 && status < 500) {
    // The apiserver refuses to give a finished pod's log: asking again will
    // not change that, and what is stored may lack lines, so readers are told.
    t.log_done = true;
    SetLogProblem(app, key, t, CannotRead(pod.pod, result.error()), status);
    Changed(app);
    return;
  }
  bool failed = !result;
  bool had_problem = !t.log_error.empty();
  SetLogProblem(app, key, t, failed ? CannotRead(pod.pod, result.error()) : "", status);
  if (failed || t.lines_this_read == 0) {
    ++t.failures;  // failed, or found nothing to read: wait longer each time
  } else {
    t.failures = 0;  // it delivered lines, then the stream ended: resume soon
  }
  if (pod.terminal && t.failures > 0 && ++t.terminal_reads >= kTerminalReads) {
    t.log_done = true;
    if (t.log_error.empty()) t.log_error = "the log of pod " + pod.pod + " could not be read after it finished";
    t.log_error += " (given up after " + std::to_string(kTerminalReads) + " tries since the pod finished)";
    logging::warn("pod log given up app={} pod={} error={}", app_id, pod.pod, t.log_error);
    Changed(app);
    return;
  }
  double delay = t.failures == 0 ? kResumeSeconds : LogBackoffSeconds(t.failures);
  t.next_read_ms = clock_->UnixNowMs() + static_cast<int64_t>(delay * 1000);
  if (failed || had_problem) Changed(app);  // its status and followers learn why, or that it is over
  ArmLogRetry();
}

void KubernetesScheduler::ArmLogRetry() {
  if (shut_down_) return;
  int64_t next = INT64_MAX;
  for (const auto& [id, a] : apps_) {
    for (const auto& [k, track] : a->pods) {
      if (WantsRead(*a, k, track)) next = std::min(next, track.next_read_ms);
    }
  }
  if (next == INT64_MAX) {
    log_retry_.reset();
    return;
  }
  int64_t wait = std::max<int64_t>(0, next - clock_->UnixNowMs());
  log_retry_ = clock_->After(static_cast<uint64_t>(wait), [this] {
    int64_t now = clock_->UnixNowMs();
    for (auto& [id, a] : apps_) {
      for (auto& [k, track] : a->pods) {
        if (track.next_read_ms <= now) FollowLogs(*a, k);
      }
    }
    ArmLogRetry();
  });
}

std::string KubernetesScheduler::LogProblem(const seam::AppRecord& rec, const std::string& replica_key) const {
  auto it = apps_.find(rec.app_id);
  if (it == apps_.end()) return "";
  auto t = it->second->pods.find(replica_key);
  return t == it->second->pods.end() ? "" : t->second.log_error;
}

std::string KubernetesScheduler::StatusNote(const seam::AppRecord& rec) const {
  auto it = apps_.find(rec.app_id);
  if (it == apps_.end()) return "";
  std::vector<std::string> problems;
  for (const auto& [key, t] : it->second->pods) {
    if (!t.log_error.empty()) problems.push_back(t.log_error);
  }
  if (problems.empty()) return "";
  std::string note = problems[0];
  if (problems.size() > 1) note += " (and " + std::to_string(problems.size() - 1) + " more pods)";
  return note;
}

}  // namespace torchxd::k8sbridge
