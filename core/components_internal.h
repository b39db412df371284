// Helpers shared by the builtin component files (not part of core's API).
#ifndef TORCHXD_CORE_COMPONENTS_INTERNAL_H_
#define TORCHXD_CORE_COMPONENTS_INTERNAL_H_

#include <map>
#include <string>
#include <vector>

#include "core/components.h"

namespace torchxd::core {

// TorchX's specs.resource(cpu, gpu, memMB, h): h wins; else cpu or 2, gpu or
// 0, memMB or 1024 (an explicit 0 becomes the default, as in TorchX).
[[nodiscard]] Result<Resource> ResourceArg(const ComponentArgs& args, const ComponentContext& ctx);
// The --mounts list through parse_mounts.
[[nodiscard]] Result<std::vector<Mount>> MountsArg(const ComponentArgs& args,
                                                   const ComponentContext& ctx);
// env.setdefault("LOGLEVEL", os.getenv("LOGLEVEL", "WARNING")).
void SetDefaultLogLevel(std::map<std::string, std::string>& env, const ComponentContext& ctx);

std::vector<Component> UtilsComponents();
std::vector<Component> DistComponents();

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_COMPONENTS_INTERNAL_H_
