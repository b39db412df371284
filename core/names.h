// The names and strings that become paths, handles or a replica's argv and
// environment, and the rules that keep them from escaping what they name:
//   - the session, app and role names are path components of the log layout
//     ({log_dir}/{session}/{app_id}/{role}/{replica}) and parts of an app
//     handle: 1 to kMaxNameBytes bytes, printable, no '/', not "." or "..",
//     no leading or trailing whitespace;
//   - no string a client sends may hold a NUL character: NUL ends a C string
//     (a path, an argv entry, an environment entry) and would silently cut it.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_NAMES_H_
#define TORCHXD_CORE_NAMES_H_

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace torchxd::core {

inline constexpr size_t kMaxNameBytes = 128;

// InvalidArgument "<path>: <rule>, got <name as JSON>" when `name` breaks a rule above.
[[nodiscard]] Result<void> ValidateName(std::string_view path, std::string_view name);

// The first string in `value` (an object key or a string anywhere inside)
// holding a NUL character, as InvalidArgument naming its JSON path under `path`.
[[nodiscard]] Result<void> RefuseNul(const nlohmann::json& value, const std::string& path);

// Is `path` `root` itself or below it, once both are lexically normalized
// ("a/../b" -> "b")? Both must be absolute. Symbolic links are not followed.
bool PathIsUnder(const std::string& root, const std::string& path);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_NAMES_H_
