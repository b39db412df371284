// LocalScheduler's local_docker parts: the engine client, the network made
// before an app is accepted, and re-adoption after a restart (image pulls:
// localsched/local_pull.cc).

#include "core/json_parse.h"

#include <set>

#include "core/docker_container.h"
#include "core/local_plan.h"
#include "core/log.h"
#include "core/scheduler_opts.h"
#include "core/text.h"
#include "localsched/local_scheduler.h"
#include "logfiles/log_stream.h"

namespace torchxd::localsched {
namespace {

using nlohmann::json;

// Bytes of the latest attempt already stored in a replica's stream.
uint64_t StoredAttemptBytes(const std::string& dir, const std::string& stream) {
  auto layout = logfiles::LoadLogStream(dir, stream);
  if (!layout) return 0;
  uint64_t start = layout->attempts.empty() ? 0 : layout->attempts.back().offset;
  return layout->end_offset - std::min(start, layout->end_offset);
}

}  // namespace

Result<docker::DockerClient*> LocalScheduler::Docker() {
  if (docker_) return docker_.get();
  std::string host = options_.docker_host;
  auto socket = docker::DockerSocketFromEnv(core::MapEnv(host.empty() ? std::map<std::string, std::string>{}
                                                                          : std::map<std::string, std::string>{{"DOCKER_HOST", host}}));
  if (!socket) return Fail(socket.error());
  auto http = net::HttpClient::Create(loop_, "docker");
  if (!http) return Fail(http.error().WithContext("local_docker"));
  http_ = std::move(*http);
  docker_ = std::make_unique<docker::DockerClient>(http_.get(), *socket);
  containers_ = std::make_unique<docker::ContainerRuntime>(loop_, docker_.get());
  return docker_.get();
}

void LocalScheduler::EnsureNetwork(std::function<void(Result<void>)> done) {
  // The user-defined bridge network: replicas reach each other by name.
  std::string net(core::kDockerNetwork);
  docker_->Call("GET", "/networks/" + net, nullptr, [this, net, done](Result<json> found) {
    if (found) return done({});
    json create = {{"Name", net}, {"Driver", "bridge"}, {"CheckDuplicate", true}};
    docker_->Call("POST", "/networks/create", &create, [net, done](Result<json> made) {
      if (!made && made.error().code != ErrorCode::kAlreadyExists) {
        return done(Fail(Error::Unavailable("create the " + net + " network: " + made.error().message)));
      }
      done({});
    });
  });
}

std::vector<core::ReplicaRequest> LocalScheduler::ContainerRequests(const LocalApp& app,
                                                                    std::vector<std::string>* warnings) {
  core::Cfg cfg;
  auto parsed = core::SchedulerRunOpts("local_docker");
  if (parsed) {
    if (auto c = (*parsed)->CfgFromJson(app.cfg)) cfg = std::move(*c);
  }
  core::LocalPlanInput in;
  in.scheduler = "local_docker";
  in.session = app.session;
  in.app_id = app.app_id;
  in.app_log_dir = app.app_log_dir;
  in.cfg = std::move(cfg);
  in.client_env = app.client_env;
  in.gpu_count = gpu_count_;
  auto plan = core::PlanLocalApp(app.app, in);
  if (warnings != nullptr) *warnings = std::move(plan.warnings);
  ApplyPlacement(app, plan.requests);
  return std::move(plan.requests);
}

bool LocalScheduler::AdoptContainers(LocalApp& app) {
  if (auto docker = Docker(); !docker) return false;
  std::vector<std::string> warnings;
  auto requests = ContainerRequests(app, &warnings);
  std::vector<std::pair<uint64_t, uint64_t>> after;
  for (const auto& req : requests) {
    std::string key = req.Key().String();
    (void)logs_->Open(app, key, req.log_dir, LogOwner(app));  // the attempt a previous daemon began goes on
    after.emplace_back(StoredAttemptBytes(req.log_dir, "stdout"), StoredAttemptBytes(req.log_dir, "stderr"));
  }
  supervisor::AppOptions opts = RunnerOptions(app, {});
  app.runner = std::make_unique<supervisor::AppRunner>(loop_, app.Handle(), app.app, std::move(requests), opts, this);
  by_runner_[app.runner.get()] = &app;
  logging::info("re-adopting containers app={} replicas={}", app.app_id, app.replicas.size());
  bool cancelling = app.cancelling;  // Adopt reports the runner's own (not yet cancelling) state
  std::string msg = app.msg;
  app.runner->Adopt(app.replicas, after, HeldReplicas(app));
  if (cancelling) app.runner->Cancel(options_.grace_seconds, msg, app.cancel_fails);
  ArmDeadline(app);
  return true;
}

}  // namespace torchxd::localsched
