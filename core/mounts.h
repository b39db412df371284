// Mount strings, parsed with TorchX's rules (specs/builders.parse_mounts):
//   type=bind,src=/host,dst=/container[,readonly]
//   type=volume,src=<name>,dst=<path>[,readonly]
//   type=device,src=/dev/x[,dst=<path>][,perm=rwm]
// Key aliases source|src, destination|dst|target, read_only|readonly (presence
// only). `type` must come first; a new type= starts a new mount; a bind src
// starting with '~' is expanded; a device dst defaults to src.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_MOUNTS_H_
#define TORCHXD_CORE_MOUNTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/app_def.h"
#include "core/result.h"

namespace torchxd::core {

// `tokens` are already comma-split ("type=bind", "src=/a", ...). `home` expands '~'.
[[nodiscard]] Result<std::vector<Mount>> ParseMounts(const std::vector<std::string>& tokens,
                                                     std::string_view home);
// One string "type=bind,src=/a,dst=/b" (may hold several mounts).
[[nodiscard]] Result<std::vector<Mount>> ParseMountString(std::string_view spec,
                                                          std::string_view home);

std::string_view MountTypeName(const Mount& mount);  // "bind", "volume", "device"

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_MOUNTS_H_
