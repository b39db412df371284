// `torchx run`: resolve the component and cfg on the client, then (for now)
// print the dry run. Submitting to the daemon arrives with torchxd.
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "cli/app_resolver.h"
#include "cli/commands.h"
#include "cli/daemon_connection.h"
#include "cli/reconnect.h"
#include "core/app_status.h"
#include "core/app_handle.h"
#include "core/app_json.h"
#include "core/docker_container.h"
#include "core/ids.h"
#include "core/replica_request.h"
#include "imageproviders/image_provider.h"
#include "k8sbridge/volcano_job.h"

namespace torchxd::cli {
namespace {

// The exact Volcano Job `torchx run -s kubernetes` would create.
int PrintKubernetesDryrun(const core::AppDef& app, const core::Cfg& cfg, const CliContext& ctx) {
  k8sbridge::KubernetesOptions o = k8sbridge::KubernetesOptionsFromCfg(cfg);
  auto job = k8sbridge::AppDefToVolcanoJob(app, core::NormalizeStr(core::MakeUnique(app.name)), o);
  if (!job) return ReportError(ctx, job.error().message, kExitUsage);
  for (const auto& w : job->warnings) *ctx.err << "torchx: warning: " << w << "\n";
  *ctx.out << "=== APPLICATION ===\n"
           << core::AppDefToJson(app).dump(2) << "\n=== SCHEDULER REQUEST ===\n"
           << job->body.dump(2) << "\n";
  return kExitOk;
}

// The exact Docker Engine API create body of each replica's container.
int PrintDockerDryrun(const core::AppDef& app, const core::Cfg& cfg, const CliContext& ctx) {
  core::DockerAppContext d;
  d.app_id = core::MakeUnique(app.name);
  d.app_log_dir = "<torchxd --log-dir>/" + d.session + "/" + d.app_id;
  d.copy_env = core::CfgGet<std::vector<std::string>>(cfg, "copy_env").value_or(std::vector<std::string>{});
  d.env = core::CfgGet<std::map<std::string, std::string>>(cfg, "env").value_or(std::map<std::string, std::string>{});
  d.privileged = core::CfgGet<bool>(cfg, "privileged").value_or(false);
  d.client_env = ctx.environ;
  std::vector<std::string> warnings;
  nlohmann::json containers = nlohmann::json::array();
  for (const auto& req : core::BuildContainerRequests(app, d, &warnings)) {
    containers.push_back({{"name", req.container_name}, {"create", req.container}});
  }
  for (const auto& w : warnings) *ctx.err << "torchx: warning: " << w << "\n";
  nlohmann::json request = {{"app_handle", core::MakeAppHandle("local_docker", d.session, d.app_id)},
                            {"network", std::string(core::kDockerNetwork)},
                            {"containers", containers}};
  *ctx.out << "=== APPLICATION ===\n"
           << core::AppDefToJson(app).dump(2) << "\n=== SCHEDULER REQUEST ===\n"
           << request.dump(2) << "\n";
  return kExitOk;
}

int PrintDryrun(const RunArgs& args, const core::AppDef& app, const core::Cfg& cfg,
                const CliContext& ctx) {
  if (args.scheduler == "kubernetes") return PrintKubernetesDryrun(app, cfg, ctx);
  if (args.scheduler == "local_docker") return PrintDockerDryrun(app, cfg, ctx);
  auto locations = imageproviders::FetchRoles(args.scheduler, app, ctx.cwd);
  if (!locations) return ReportError(ctx, locations.error().message, kExitUsage);
  core::LocalAppContext local;
  local.scheduler = args.scheduler;
  local.session = std::string(core::kDefaultSession);
  local.app_id = core::MakeUnique(app.name);
  local.session_id = "<assigned at submit>";
  std::string base = core::CfgGet<std::string>(cfg, "log_dir").value_or("<torchxd --log-dir>");
  local.app_log_dir = base + "/" + local.session + "/" + local.app_id;
  local.prepend_cwd = core::CfgGet<bool>(cfg, "prepend_cwd").value_or(false);
  local.client_env = ctx.environ;
  local.roles = *locations;
  nlohmann::json replicas = nlohmann::json::array();
  for (const auto& req : core::BuildReplicaRequests(app, local)) {
    replicas.push_back(core::ReplicaRequestToJson(req, ctx.environ));
  }
  nlohmann::json request = {
      {"app_handle", core::MakeAppHandle(args.scheduler, local.session, local.app_id)},
      {"cfg", core::CfgToJson(cfg)},
      {"replicas", replicas}};
  *ctx.out << "=== APPLICATION ===\n"
           << core::AppDefToJson(app).dump(2) << "\n=== SCHEDULER REQUEST ===\n"
           << request.dump(2) << "\n";
  return kExitOk;
}

}  // namespace

int CmdRun(const GlobalArgs& global, const RunArgs& args, const CliContext& ctx) {
  if (args.component.empty()) {
    return ReportError(ctx,
                       "missing COMPONENT: pass a builtin (see `torchx builtins`) or a path to "
                       "an AppDef JSON file",
                       kExitUsage);
  }
  auto cfg = ResolveCfg(args.scheduler, args.scheduler_args, ctx);
  if (!cfg) return ReportError(ctx, cfg.error().message, kExitUsage);
  auto resolved = ResolveApp(args.component, args.component_args, ctx);
  if (!resolved) return ReportError(ctx, resolved.error().message, kExitUsage);
  if (resolved->help_requested) {
    *ctx.out << resolved->help;
    return kExitOk;
  }
  if (args.dryrun) return PrintDryrun(args, resolved->app, *cfg, ctx);
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  nlohmann::json params = {{"app", core::AppDefToJson(resolved->app)},
                           {"scheduler", args.scheduler},
                           {"cfg", core::CfgToJson(*cfg)},
                           {"cwd", ctx.cwd},
                           {"env", ctx.environ}};
  auto submitted = client->Call("run", params);
  if (!submitted) return ReportCallError(ctx, submitted.error());
  std::string handle = (*submitted)["app_handle"];
  if (submitted->contains("warnings")) {
    for (const auto& w : (*submitted)["warnings"]) *ctx.err << "torchx: warning: " << w.get<std::string>() << "\n";
  }
  *ctx.out << handle << std::endl;
  if (!args.wait && !args.log) return kExitOk;
  if (args.log) {
    if (int rc = StreamLogs(global, handle, ctx); rc != kExitOk) return rc;
  }
  auto final_status = CallAcrossRestarts({global.socket, true}, ctx, std::move(*client), "wait",
                                         [&] { return nlohmann::json{{"app_handle", handle}}; });
  if (!final_status) return ReportCallError(ctx, final_status.error());
  if ((*final_status)["state"] == "SUCCEEDED") return kExitOk;
  auto status = core::AppStatusFromJson(*final_status);
  *ctx.err << (status ? core::FormatAppStatus(*status) : final_status->dump(2)) << "\n";
  return kExitFailed;
}

}  // namespace torchxd::cli
