// LocalScheduler's image pulls (local_docker): an app whose images the
// engine lacks is accepted at once, PENDING "pulling image X: 340 MB of
// 1.2 GB", visible everywhere and cancellable, and joins admission once its
// images are there. The pull's progress is an event at most each second; a
// restarted daemon pulls again what was not done.
#include <algorithm>
#include <set>

#include "core/app_status.h"
#include "core/log.h"
#include "core/text.h"
#include "localsched/local_scheduler.h"

namespace torchxd::localsched {
namespace {

using nlohmann::json;

constexpr int64_t kPullSayEveryMs = 1000;

std::string Unavailable(const std::string& image, const std::string& why) {
  return "image " + image + " is not available: the pull failed (" + why +
         ") and the engine has no local image of that name";
}

}  // namespace

void LocalScheduler::SubmitContainers(seam::SubmitRequest request, std::function<void(Result<const seam::AppRecord*>)> done) {
  if (auto docker = Docker(); !docker) return done(Fail(docker.error()));
  auto shared = std::make_shared<seam::SubmitRequest>(std::move(request));
  std::set<std::string> unique;
  for (const auto& role : shared->app.roles) unique.insert(role.image);
  // An engine that cannot answer refuses the app now; an image it lacks is
  // pulled after the submit, with the app PENDING and visible meanwhile.
  MissingImages({unique.begin(), unique.end()}, {}, [this, shared, done](Result<std::vector<std::string>> missing) {
    if (!missing) return done(Fail(missing.error()));
    EnsureNetwork([this, shared, done, missing = std::move(*missing)](Result<void> ready) mutable {
      if (!ready) return done(Fail(ready.error()));
      bool pull = !missing.empty();
      auto rec = SubmitNow(std::move(*shared), /*hold=*/pull);
      if (rec && pull) {
        std::sort(missing.begin(), missing.end());
        StartPulls(*Find((*rec)->scheduler, (*rec)->app_id), std::move(missing));
      }
      done(rec);
    });
  });
}

void LocalScheduler::MissingImages(std::vector<std::string> images, std::vector<std::string> missing,
                                   std::function<void(Result<std::vector<std::string>>)> done) {
  if (images.empty()) return done(std::move(missing));
  std::string image = images.back();
  images.pop_back();
  docker_->Call("GET", "/images/" + image + "/json", nullptr,
                [this, image, rest = std::move(images), missing = std::move(missing), done](Result<json> local) mutable {
                  if (!local && local.error().code != ErrorCode::kNotFound) return done(Fail(local.error()));
                  if (!local) missing.push_back(image);
                  MissingImages(std::move(rest), std::move(missing), std::move(done));
                });
}

void LocalScheduler::StartPulls(LocalApp& app, std::vector<std::string> images) {
  app.pulling = std::move(images);
  app.msg = "pulling image " + app.pulling.front();
  Persist(app);
  PullNext(Key{app.scheduler, app.app_id});
}

void LocalScheduler::PullNext(const Key& key) {
  LocalApp* app = Find(key.first, key.second);
  if (app == nullptr || app->pulling.empty() || pulls_.count(key) || stopping_) return;
  if (auto docker = Docker(); !docker) return FailPull(*app, docker.error().message);
  std::string image = app->pulling.front();
  Pull& pull = pulls_[key];
  pull.image = image;
  pull.started_ms = clock_->UnixNowMs();
  app->msg = "pulling image " + image;
  Event(*app, "pulling", app->msg, {{"image", image}});
  logging::info("pulling image app={} image={}", app->app_id, image);
  docker_->Stream(
      "POST", "/images/create?fromImage=" + core::UrlEscape(image),
      [this, key](std::string_view bytes) {
        auto it = pulls_.find(key);
        if (it == pulls_.end()) return;
        it->second.progress.Feed(bytes);
        int64_t now = clock_->UnixNowMs();
        if (now - it->second.said_ms < kPullSayEveryMs) return;
        LocalApp* a = Find(key.first, key.second);
        std::string summary = it->second.progress.Summary();
        if (a == nullptr || summary.empty()) return;
        it->second.said_ms = now;
        a->msg = "pulling image " + it->second.image + ": " + summary;
        Event(*a, "pulling", a->msg,
              {{"image", it->second.image}, {"current_bytes", it->second.progress.current()},
               {"total_bytes", it->second.progress.total()}, {"layers", it->second.progress.layers()},
               {"layers_done", it->second.progress.layers_done()}});
      },
      [this, key](Result<void> ended) { PullEnded(key, std::move(ended)); },
      [this, key](net::HttpClient::RequestId id) {
        if (auto it = pulls_.find(key); it != pulls_.end()) it->second.request = id;
      });
}

void LocalScheduler::PullEnded(const Key& key, Result<void> ended) {
  auto it = pulls_.find(key);
  if (it == pulls_.end()) return;  // cancelled, or the daemon stops
  Pull pull = std::move(it->second);
  pulls_.erase(it);
  LocalApp* app = Find(key.first, key.second);
  if (app == nullptr || app->pulling.empty() || core::IsTerminal(app->state)) return;
  pull.progress.Finish();
  std::string why = ended ? pull.progress.error() : ended.error().message;
  if (!why.empty()) return FailPull(*app, Unavailable(pull.image, why));
  double seconds = static_cast<double>(clock_->UnixNowMs() - pull.started_ms) / 1000.0;
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", seconds);
  std::string size = pull.progress.total() > 0 ? " (" + docker::DecimalBytes(pull.progress.total()) + ")" : "";
  Event(*app, "pulled", "pulled image " + pull.image + " in " + took + " s" + size,
        {{"image", pull.image}, {"total_bytes", pull.progress.total()}, {"seconds", seconds}});
  app->pulling.erase(app->pulling.begin());
  if (!app->pulling.empty()) {
    Persist(*app);
    return PullNext(key);
  }
  app->msg.clear();
  Persist(*app);
  logging::info("images pulled app={}", app->app_id);
  if (admission_) {
    admission_->Enqueue(DemandOf(*app));
    return RunAdmissionPass();
  }
  auto run_as = RunAs(app->owner_uid);
  if (!run_as) return FailPull(*app, run_as.error().message);
  Launch(*app, ContainerRequests(*app, nullptr), std::move(*run_as));
}

void LocalScheduler::EndPulling(LocalApp& app, core::AppState state, const std::string& msg) {
  Key key{app.scheduler, app.app_id};
  if (auto it = pulls_.find(key); it != pulls_.end()) {
    net::HttpClient::RequestId id = it->second.request;
    pulls_.erase(it);
    if (id != 0 && docker_) docker_->Cancel(id);
  }
  int64_t now = clock_->UnixNowMs();
  app.pulling.clear();
  app.state = state;
  app.msg = msg;
  app.ended_ms = now;
  auto replica_state = state == core::AppState::kCancelled ? core::ReplicaState::kCancelled : core::ReplicaState::kFailed;
  for (auto& r : app.replicas) {
    r.state = replica_state;
    r.end_ms = now;
    if (state != core::AppState::kCancelled) r.error_message = msg;
    (void)store_->PutReplica(app.scheduler, app.app_id, r.role, r.replica_id, r.attempt, static_cast<int>(r.state),
                             seam::ReplicaInfoToJsonText(r));
  }
  Persist(app);
  std::string name(core::AppStateName(state));
  Event(app, "ended", name + ": " + msg, {{"state", name}, {"msg", msg}});
  logging::info("app ended before its images were there app={} state={} msg={}", app.app_id, name, msg);
  logs_->Notify(seam::AppKey(app));
  TellEnded(app);
}

void LocalScheduler::FailPull(LocalApp& app, const std::string& why) {
  EndPulling(app, core::AppState::kFailed, why);
}

bool LocalScheduler::CancelPull(LocalApp& app) {
  if (app.pulling.empty() || core::IsTerminal(app.state)) return false;
  EndPulling(app, core::AppState::kCancelled, "cancelled by user while pulling image " + app.pulling.front());
  return true;
}

void LocalScheduler::StopPulls() {
  // The apps stay pulling in the store: the next daemon pulls again.
  for (auto& [key, pull] : pulls_) {
    if (pull.request != 0 && docker_) docker_->Cancel(pull.request);
  }
  pulls_.clear();
}

}  // namespace torchxd::localsched
