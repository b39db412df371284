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

#include <cstdint>
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

// `text` as a template that substitutes to itself ('$' doubled): what goes
// into a template from elsewhere (a session name in a handle) stays as it is.
std::string EscapeMacros(std::string_view text);

// What substitutions come to without making them: the bytes that stay as
// they are and how often each macro occurs. A template of a few bytes can
// grow a thousandfold ("$img_root" for a long path), so sizes are known
// before anything is substituted.
struct MacroCounts {
  size_t literal = 0;
  size_t img_root = 0;
  size_t app_id = 0;
  size_t replica_id = 0;
  size_t rank0_env = 0;

  // The substituted size with macros of these lengths (saturating, never wrapping).
  uint64_t SizeWith(size_t img_root_len, size_t app_id_len, size_t replica_id_len, size_t rank0_env_len) const;
  MacroCounts& operator+=(const MacroCounts& o);
};

// SafeSubstitute's output size for `templ` is CountMacros(templ).SizeWith(...)
// of the values' lengths.
MacroCounts CountMacros(std::string_view templ);
// Over what a replica's process gets substituted: a role's args and env
// values (not its metadata, which no replica reads).
MacroCounts CountMacros(const Role& role);

// The TORCHX_JOB_ID a runner gives each role before macros: the app's handle
// with ${app_id}, its session as written (never substituted).
std::string JobIdTemplate(std::string_view scheduler, std::string_view session);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_MACROS_H_
