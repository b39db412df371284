// Builtin components (`torchx builtins`): utils.echo, utils.touch, utils.sh,
// utils.python, utils.binary, dist.ddp, dist.spmd. Each expands its arguments
// into an AppDef exactly as TorchX's component function does
// (torchx/components/{utils,dist}.py), with TorchX's defaults.
//
// Components run on the client, as the calling user: `context` gives them the
// caller's environment (LOGLEVEL) and named resources.
//
// Thread contract: the registry is an immutable static; safe from any thread.
#ifndef TORCHXD_CORE_COMPONENTS_H_
#define TORCHXD_CORE_COMPONENTS_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/app_def.h"
#include "core/component_args.h"
#include "core/environment.h"
#include "core/named_resources.h"
#include "core/result.h"

namespace torchxd::core {

// TorchX's torchx.IMAGE and version (the torchx.pytorch.org/version label).
inline constexpr std::string_view kTorchxVersion = "0.8.0dev0";
inline constexpr std::string_view kTorchxImage = "ghcr.io/pytorch/torchx:0.8.0dev0";

struct ComponentContext {
  EnvLookup env;
  const NamedResources* resources = nullptr;
  std::string home;  // expands '~' in mount strings
};

struct Component {
  ComponentSpec spec;
  std::function<Result<AppDef>(const ComponentArgs&, const ComponentContext&)> build;
};

const std::vector<Component>& Builtins();
// The builtin called `name`, or NotFound with a "did you mean".
[[nodiscard]] Result<const Component*> FindBuiltin(std::string_view name);

// Builds and validates the AppDef of already-parsed arguments.
[[nodiscard]] Result<AppDef> BuildComponent(const Component& component, const ComponentArgs& args,
                                            const ComponentContext& context);

// TorchX's dist.parse_nnodes: "2:4x1" -> (2,4,1,"2:4"), "2x1" -> (2,2,1,"2"), "2" -> (1,1,2,"1").
struct NNodes {
  int min_nnodes;
  int max_nnodes;
  int nproc_per_node;
  std::string nnodes_rep;
};
[[nodiscard]] Result<NNodes> ParseNNodes(std::string_view j);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_COMPONENTS_H_
