// TorchX macros: ${img_root} ${app_id} ${replica_id} ${rank0_env}.
//
// Substitution is Python's string.Template.safe_substitute exactly: both
// ${name} and bare $name are replaced (identifiers are ASCII [_a-zA-Z][_a-zA-Z0-9]*),
// $$ becomes $, and unknown or malformed placeholders stay verbatim. Applied to
// a role's args, env values and metadata strings only (never entrypoint,
// image, name, port_map, mounts or resource), as TorchX's macros.Values.apply.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_MACROS_H_
#define TORCHXD_CORE_MACROS_H_

#include <map>
#include <string>
#include <string_view>

#include "core/app_def.h"

namespace torchxd::core {

inline constexpr std::string_view kMacroImgRoot = "${img_root}";
inline constexpr std::string_view kMacroAppId = "${app_id}";
inline constexpr std::string_view kMacroReplicaId = "${replica_id}";
inline constexpr std::string_view kMacroRank0Env = "${rank0_env}";

std::string SafeSubstitute(std::string_view templ,
                           const std::map<std::string, std::string, std::less<>>& values);

struct MacroValues {
  std::string img_root;
  std::string app_id;
  std::string replica_id;
  std::string rank0_env;

  std::string Substitute(std::string_view s) const;
  // A copy of `role` with args, env values and metadata substituted.
  Role Apply(const Role& role) const;
};

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_MACROS_H_
