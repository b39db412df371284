#include "core/components.h"

#include "core/app_json.h"
#include "core/components_internal.h"
#include "core/mounts.h"
#include "core/text.h"

namespace torchxd::core {

Result<Resource> ResourceArg(const ComponentArgs& args, const ComponentContext& ctx) {
  if (auto h = args.Str("h")) {
    if (ctx.resources == nullptr) return Fail(Error::Internal("no named resources loaded"));
    return ctx.resources->Get(*h);
  }
  Resource r;
  r.cpu = static_cast<int>(args.Int("cpu")) != 0 ? static_cast<int>(args.Int("cpu")) : 2;
  r.gpu = static_cast<int>(args.Int("gpu"));
  r.mem_mb = static_cast<int>(args.Int("memMB")) != 0 ? static_cast<int>(args.Int("memMB")) : 1024;
  return r;
}

Result<std::vector<Mount>> MountsArg(const ComponentArgs& args, const ComponentContext& ctx) {
  auto tokens = args.List("mounts");
  if (tokens.empty()) return std::vector<Mount>{};
  auto mounts = ParseMounts(tokens, ctx.home);
  if (!mounts) return Fail(mounts.error().WithContext("argument --mounts"));
  return mounts;
}

void SetDefaultLogLevel(std::map<std::string, std::string>& env, const ComponentContext& ctx) {
  if (env.count("LOGLEVEL") > 0) return;
  auto host = ctx.env ? ctx.env("LOGLEVEL") : std::nullopt;
  env["LOGLEVEL"] = host ? *host : "WARNING";
}

const std::vector<Component>& Builtins() {
  static const std::vector<Component> kBuiltins = [] {
    auto all = DistComponents();
    auto utils = UtilsComponents();
    all.insert(all.end(), utils.begin(), utils.end());
    return all;
  }();
  return kBuiltins;
}

Result<const Component*> FindBuiltin(std::string_view name) {
  std::vector<std::string> names;
  for (const auto& c : Builtins()) {
    if (c.spec.name == name) return &c;
    names.push_back(c.spec.name);
  }
  return Fail(Error::NotFound("unknown component `" + std::string(name) + "`." +
                              DidYouMean(name, names) +
                              " Run `torchx builtins` to list them, or pass a path to an AppDef "
                              "JSON file."));
}

Result<AppDef> BuildComponent(const Component& component, const ComponentArgs& args,
                              const ComponentContext& context) {
  auto app = component.build(args, context);
  if (!app) return Fail(app.error().WithContext(component.spec.name));
  if (auto ok = ValidateAppDef(*app); !ok) return Fail(ok.error().WithContext(component.spec.name));
  return app;
}

}  // namespace torchxd::core
