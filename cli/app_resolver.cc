#include "cli/app_resolver.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "cli/python_component.h"
#include "core/app_json.h"
#include "core/components.h"
#include "core/named_resources.h"
#include "core/scheduler_opts.h"
#include "core/text.h"
#include "core/torchx_config.h"

namespace torchxd::cli {
namespace {

namespace fs = std::filesystem;

bool IsJsonFile(const std::string& component, const CliContext& ctx) {
  if (core::EndsWith(component, ".json")) return true;
  std::error_code ec;
  fs::path p = fs::path(component).is_absolute() ? fs::path(component) : fs::path(ctx.cwd) / component;
  return component.find('/') != std::string::npos && fs::is_regular_file(p, ec);
}

Result<ResolvedApp> FromJsonFile(const std::string& path, const std::vector<std::string>& args,
                                 const core::NamedResources& resources, const CliContext& ctx) {
  if (!args.empty()) {
    return Fail(Error::InvalidArgument("an AppDef JSON file takes no arguments, got `" +
                                       core::Join(args, " ") + "`"));
  }
  fs::path p = fs::path(path).is_absolute() ? fs::path(path) : fs::path(ctx.cwd) / path;
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    return Fail(Error::InvalidArgument("cannot read AppDef file " + path +
                                       ": no such file (pass a builtin such as utils.echo, or a "
                                       "path to an AppDef JSON file)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  core::AppDefDecodeOptions options;
  options.lookup = [&](std::string_view name) { return resources.Get(name); };
  options.home = ctx.home;
  auto app = core::ParseAppDefJson(text.str(), options);
  if (!app) return Fail(app.error().WithContext(path));
  return ResolvedApp{false, "", std::move(*app), std::nullopt};
}

Result<ResolvedApp> FromPython(const std::string& component, const std::vector<std::string>& args,
                               const core::NamedResources& resources, const CliContext& ctx) {
  auto py = MaterializePythonComponent(component, args, ctx);
  if (!py) return Fail(py.error());
  if (py->exit_code) {
    ResolvedApp r;
    r.exit_code = py->exit_code;
    return r;
  }
  core::AppDefDecodeOptions options;
  options.lookup = [&](std::string_view name) { return resources.Get(name); };
  options.home = ctx.home;
  auto app = core::AppDefFromJson(*py->app, options);
  if (!app) return Fail(Error::InvalidArgument("component `" + component + "` returned an AppDef torchxd refuses: " +
                                               app.error().message));
  return ResolvedApp{false, "", std::move(*app), std::nullopt};
}

}  // namespace

Result<ResolvedApp> ResolveApp(const std::string& component, const std::vector<std::string>& args,
                               const CliContext& ctx) {
  auto resources = core::NamedResources::Load(ctx.env);
  if (!resources) return Fail(resources.error());
  // Names the tables lack: the user's TorchX (entry-point and plugin named resources).
  resources->SetFallback([&ctx](std::string_view name) { return PythonNamedResource(std::string(name), ctx); });
  if (IsJsonFile(component, ctx)) return FromJsonFile(component, args, *resources, ctx);

  if (IsPythonComponentName(component)) {
    auto r = FromPython(component, args, *resources, ctx);
    if (!r && r.error().code == ErrorCode::kNotFound) return Fail(Error::InvalidArgument(r.error().message));
    return r;
  }
  auto builtin = core::FindBuiltin(component);
  if (!builtin) {
    // An entry-point component of the user's TorchX; else the builtin's "unknown component".
    auto r = FromPython(component, args, *resources, ctx);
    if (r || (r.error().code != ErrorCode::kNotFound && r.error().code != ErrorCode::kUnavailable)) return r;
    return Fail(Error::InvalidArgument(builtin.error().message));
  }
  auto config = core::TorchxConfig::Load(ctx.env, ctx.cwd);
  if (!config) return Fail(config.error());
  auto parsed = core::ParseComponentArgs((*builtin)->spec, args,
                                         config->ComponentDefaults(component));
  if (!parsed) {
    return Fail(Error::InvalidArgument(component + ": " + parsed.error().message +
                                       " (see `torchx run " + component + " --help`)"));
  }
  if (parsed->help_requested) return ResolvedApp{true, core::ComponentHelp((*builtin)->spec), {}, std::nullopt};
  core::ComponentContext context{ctx.env, &*resources, ctx.home};
  auto app = core::BuildComponent(**builtin, *parsed, context);
  if (!app) return Fail(Error::InvalidArgument(app.error().message));
  return ResolvedApp{false, "", std::move(*app), std::nullopt};
}

namespace {

// -cfg (parsed by `parse`) plus .torchxconfig's [scheduler] section, resolved.
Result<core::Cfg> ResolveCfgWith(
    const std::string& scheduler, const CliContext& ctx,
    const std::function<Result<core::Cfg>(const core::RunOpts&, std::vector<std::string>&)>& parse) {
  auto opts = core::SchedulerRunOpts(scheduler);
  if (!opts) return Fail(Error::InvalidArgument(opts.error().message));
  std::vector<std::string> warnings;
  auto cfg = parse(**opts, warnings);
  if (!cfg) return Fail(Error::InvalidArgument("-cfg: " + cfg.error().message));
  auto config = core::TorchxConfig::Load(ctx.env, ctx.cwd);
  if (!config) return Fail(config.error());
  if (auto ok = config->ApplySchedulerDefaults(scheduler, **opts, *cfg, warnings); !ok) {
    return Fail(Error::InvalidArgument(ok.error().message));
  }
  for (const auto& w : warnings) *ctx.err << "torchx: warning: " << w << "\n";
  auto resolved = (*opts)->Resolve(*cfg);
  if (!resolved) return Fail(Error::InvalidArgument(resolved.error().message));
  return resolved;
}

}  // namespace

Result<core::Cfg> ResolveCfg(const std::string& scheduler, const std::string& cfg_str,
                             const CliContext& ctx) {
  return ResolveCfgWith(scheduler, ctx, [&](const core::RunOpts& opts, std::vector<std::string>& warnings) {
    return opts.CfgFromString(cfg_str, warnings);
  });
}

Result<core::Cfg> ResolveCfgJson(const std::string& scheduler, const std::string& cfg_json,
                                 const CliContext& ctx) {
  return ResolveCfgWith(scheduler, ctx, [&](const core::RunOpts& opts, std::vector<std::string>&) {
    return opts.CfgFromJson(nlohmann::json::parse(cfg_json));
  });
}

}  // namespace torchxd::cli
