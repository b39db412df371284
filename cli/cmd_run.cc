// `torchx run`: completes its arguments (run_args.h), resolves the component
// and cfg on the client, then prints the dry run or submits to the daemon and,
// attached, streams the logs and exits with the job's result.
#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "cli/app_resolver.h"
#include "cli/cancel_on_signal.h"
#include "cli/commands.h"
#include "cli/daemon_connection.h"
#include "cli/reconnect.h"
#include "cli/run_args.h"
#include "cli/slurm_dryrun.h"
#include "core/app_handle.h"
#include "core/app_json.h"
#include "core/app_status.h"
#include "core/docker_container.h"
#include "core/ids.h"
#include "core/local_plan.h"
#include "core/local_ports.h"
#include "core/paths.h"
#include "core/replica_key.h"
#include "core/replica_request.h"
#include "core/text.h"
#include "core/torchx_config.h"
#include "imageproviders/image_provider.h"
#include "k8sbridge/volcano_job.h"

namespace torchxd::cli {
namespace {

// TORCHX_TRACKER_<NAME>_CONFIG, as TorchX names it.
std::string TrackerConfigEnvName(const std::string& name) { return "TORCHX_TRACKER_" + core::ToUpper(name) + "_CONFIG"; }

// TorchX's get_configured_trackers: the keys of [torchx:tracker] (TORCHX_TRACKERS replaces them),
// each with [tracker:NAME]'s `config` (TORCHX_TRACKER_<NAME>_CONFIG wins), in order.
std::vector<std::pair<std::string, std::string>> ConfiguredTrackers(const core::TorchxConfig& config,
                                                                    const core::EnvLookup& env) {
  std::vector<std::string> names;
  if (auto from_env = env("TORCHX_TRACKERS")) {
    for (const auto& n : core::Split(*from_env, ',')) {
      if (!n.empty()) names.push_back(n);
    }
  } else {
    for (const auto& [name, value] : config.Section("torchx:tracker")) names.push_back(name);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& name : names) {
    std::string value;
    auto section = config.Section("tracker:" + name);
    if (auto it = section.find("config"); it != section.end()) value = it->second.value;
    if (auto from_env = env(TrackerConfigEnvName(name))) value = *from_env;
    out.emplace_back(name, value);
  }
  return out;
}

// The environment a run's replicas inherit: the caller's, with TorchX's
// TORCHX_CONTEXT_NAME (its CLI sets "cli_run" unless one is set).
std::map<std::string, std::string> RunEnvironment(std::map<std::string, std::string> env) {
  env.emplace("TORCHX_CONTEXT_NAME", "cli_run");
  return env;
}

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

// Each replica's request, as the daemon would plan it (core/local_plan.h): for
// local_docker the Docker Engine API create body of each container, else the
// process, its cwd and environment.
int PrintDryrun(const std::string& scheduler, const core::AppDef& app, const core::Cfg& cfg,
                const CliContext& ctx) {
  if (scheduler == "kubernetes") return PrintKubernetesDryrun(app, cfg, ctx);
  if (scheduler == "slurm") return PrintSlurmDryrun(app, cfg, ctx);
  bool docker = scheduler == "local_docker";
  core::LocalPlanInput in;
  in.scheduler = scheduler;
  in.session = std::string(core::kDefaultSession);
  in.app_id = core::MakeUnique(app.name);
  in.session_id = "<assigned at submit>";
  std::string base = docker ? "<torchxd --log-dir>" : core::CfgGet<std::string>(cfg, "log_dir").value_or("<torchxd --log-dir>");
  in.app_log_dir = core::AppLogDir(base, in.session, in.app_id);
  in.cfg = cfg;
  in.client_env = ctx.environ;
  in.gpu_count = core::CountNvidiaGpus();
  if (!docker) {
    auto locations = imageproviders::FetchRoles(scheduler, app, ctx.cwd);
    if (!locations) return ReportError(ctx, locations.error().message, kExitUsage);
    in.roles = *locations;
  }
  core::LocalPlan plan = core::PlanLocalApp(app, in);
  for (const auto& w : plan.warnings) *ctx.err << "torchx: warning: " << w << "\n";
  // The named ports it would get if it started now (the daemon picks them when it does).
  nlohmann::json ports = nlohmann::json::object();
  if (!docker) {
    auto wanted = core::EndpointPorts(app, plan.requests);
    auto chosen = core::ChoosePorts(wanted, {}, core::PortIsFree, 0, core::KernelFreePort);
    for (auto& [declared, port] : chosen) {
      if (port != 0) continue;
      *ctx.err << "torchx: warning: no free port for " << wanted[declared] << " (" << declared
               << ") now: the daemon would fail the app\n";
      port = declared;  // the plan as declared
    }
    core::RemapEndpointPorts(plan.requests, chosen);
    for (const auto& [declared, port] : chosen) ports[wanted[declared]] = port;
  }
  nlohmann::json replicas = nlohmann::json::array();
  for (const auto& req : plan.requests) {
    replicas.push_back(docker ? nlohmann::json{{"name", req.container_name}, {"create", req.container}}
                              : core::ReplicaRequestToJson(req, ctx.environ));
  }
  nlohmann::json request = {{"app_handle", core::MakeAppHandle(scheduler, in.session, in.app_id)}};
  if (docker) {
    request["network"] = std::string(core::kDockerNetwork);
    request["containers"] = replicas;
  } else {
    request["cfg"] = core::CfgToJson(cfg);
    if (!ports.empty()) request["ports"] = ports;
    request["replicas"] = replicas;
  }
  *ctx.out << "=== APPLICATION ===\n"
           << core::AppDefToJson(app).dump(2) << "\n=== SCHEDULER REQUEST ===\n"
           << request.dump(2) << "\n";
  return kExitOk;
}

}  // namespace

int CmdRun(const GlobalArgs& global, RunArgs args, const CliContext& ctx) {
  auto config = core::TorchxConfig::Load(ctx.env, ctx.cwd);
  if (!config) return ReportError(ctx, config.error().message, kExitUsage);
  std::string stdin_text;
  if (args.from_stdin) {
    std::stringstream text;
    text << ctx.in->rdbuf();
    stdin_text = text.str();
  }
  std::vector<std::string> warnings;
  if (auto ok = CompleteRunArgs(args, *config, stdin_text, ctx.env, warnings); !ok) {
    return ReportError(ctx, ok.error().message, kExitUsage);
  }
  for (const auto& w : warnings) *ctx.err << "torchx: warning: " << w << "\n";
  std::string scheduler = args.scheduler.value_or(std::string(kDefaultScheduler));
  auto cfg = args.scheduler_args_json ? ResolveCfgJson(scheduler, *args.scheduler_args_json, ctx)
                                      : ResolveCfg(scheduler, args.scheduler_args, ctx);
  if (!cfg) return ReportError(ctx, cfg.error().message, kExitUsage);
  if (args.workspace && !args.workspace->empty() && (scheduler == "local_docker" || scheduler == "kubernetes")) {
    return ReportError(ctx,
                       "--workspace " + *args.workspace + ": torchxd does not build workspace images for " +
                           scheduler + " (TorchX's image patching); build the image yourself and pass it "
                           "to the component (e.g. --image), or pass --workspace \"\"",
                       kExitUsage);
  }
  auto resolved = ResolveApp(args.component, args.component_args, ctx);
  if (!resolved) return ReportError(ctx, resolved.error().message, kExitUsage);
  if (resolved->exit_code) return *resolved->exit_code;
  if (resolved->help_requested) {
    *ctx.out << resolved->help;
    return kExitOk;
  }
  if (args.parent_run_id && !args.parent_run_id->empty()) {
    for (auto& role : resolved->app.roles) role.env["TORCHX_PARENT_RUN_ID"] = *args.parent_run_id;
  }
  // TorchX's trackers, as its runner sets them: the names and each one's config.
  auto trackers = ConfiguredTrackers(*config, ctx.env);
  if (!trackers.empty()) {
    std::string names;
    for (const auto& [name, value] : trackers) names += (names.empty() ? "" : ",") + name;
    for (auto& role : resolved->app.roles) {
      role.env["TORCHX_TRACKERS"] = names;
      for (const auto& [name, value] : trackers) {
        if (!value.empty()) role.env[TrackerConfigEnvName(name)] = value;
      }
    }
  }
  if (args.dryrun) return PrintDryrun(scheduler, resolved->app, *cfg, ctx);
  ConnectOptions connect{global.socket, true};
  auto client = ConnectToDaemon(connect, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  nlohmann::json params = {{"app", core::AppDefToJson(resolved->app)},
                           {"scheduler", scheduler},
                           {"cfg", core::CfgToJson(*cfg)},
                           {"cwd", ctx.cwd},
                           {"env", RunEnvironment(ctx.environ)}};
  auto submitted = client->Call("run", params);
  if (!submitted) return ReportCallError(ctx, submitted.error());
  std::string handle = (*submitted)["app_handle"];
  if (submitted->contains("warnings")) {
    for (const auto& w : (*submitted)["warnings"]) *ctx.err << "torchx: warning: " << w.get<std::string>() << "\n";
  }
  *ctx.out << handle << std::endl;
  // TorchX's contract: on a local scheduler `run` stays attached (logs to
  // stderr, the job's result as exit code); elsewhere only with --wait/--log.
  bool local = core::StartsWith(scheduler, "local");
  bool attached = local ? !args.detach.value_or(false) : (args.wait || args.log);
  if (!attached) return kExitOk;
  bool stream = local || args.log;
  int rc = kExitOk;
  std::optional<nlohmann::json> final_status;
  int interrupted = 0;
  {
    std::optional<CancelOnSignal> cancel_on_signal;
    if (local) cancel_on_signal.emplace(connect, handle, ctx);
    std::optional<DaemonClient> conn = std::move(*client);
    if (stream) {
      rc = StreamLogs(global, handle, ctx, args.quiet);
    } else if (!args.quiet) {
      // --wait without logs: what happens to the app until it ends, resumed across a daemon restart.
      uint64_t last = 0;
      auto followed = CallAcrossRestarts(
          connect, ctx, std::move(conn), "events",
          [&] { return nlohmann::json{{"app_handle", handle}, {"follow", true}, {"after", last}}; },
          [&](const nlohmann::json& e) {
            if (!e.contains("event")) return;
            last = std::max(last, e["event"].value("seq", uint64_t{0}));
            PrintAppEvent(*ctx.err, e["event"]);
          });
      if (!followed) rc = ReportCallError(ctx, followed.error());
      conn.reset();
    }
    if (rc == kExitOk) {
      auto waited = CallAcrossRestarts(connect, ctx, std::move(conn), "wait",
                                       [&] { return nlohmann::json{{"app_handle", handle}}; });
      if (!waited) {
        rc = ReportCallError(ctx, waited.error());
      } else {
        final_status = std::move(*waited);
      }
    }
    if (cancel_on_signal) interrupted = cancel_on_signal->Stop();
  }
  if (final_status && (*final_status)["state"] != "SUCCEEDED") {
    auto status = core::AppStatusFromJson(*final_status);
    *ctx.err << (status ? core::FormatAppStatus(*status) : final_status->dump(2)) << "\n";
    rc = kExitFailed;
  }
  if (interrupted != 0) ExitBySignal(interrupted);
  return rc;
}

}  // namespace torchxd::cli
