// Parsing JSON that comes from outside torchxd: a client's frame, an AppDef
// file, a replica's error.json, a server's answer. The text is scanned for
// its nesting depth first, without recursion, so that no document can make
// the recursive parts of nlohmann::json (copy, compare, dump, destroy) run
// out of stack: a value parsed here is at most `max_depth` levels deep.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_JSON_PARSE_H_
#define TORCHXD_CORE_JSON_PARSE_H_

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace torchxd::core {

// Protocol frames and every other document from outside (docs/protocol.md).
inline constexpr size_t kMaxJsonDepth = 64;
// An AppDef document: it travels inside a frame (params.app), with room to spare.
inline constexpr size_t kMaxAppDefDepth = 32;

// InvalidArgument naming the byte offset where the nesting passes `max_depth`.
[[nodiscard]] Result<void> CheckJsonDepth(std::string_view text, size_t max_depth = kMaxJsonDepth);
// The same, and at most `max_values` values (each costs far more once parsed
// than its few bytes of text: `""` is 3 bytes of text and about 80 parsed).
[[nodiscard]] Result<void> CheckJsonShape(std::string_view text, size_t max_depth, size_t max_values);
// The depth of a parsed value: a scalar is 0, `[]` and `{}` are 1.
size_t JsonDepth(const nlohmann::json& value);

// The parsed document, or InvalidArgument ("not valid JSON: ..." or the depth error).
[[nodiscard]] Result<nlohmann::json> ParseJson(std::string_view text, size_t max_depth = kMaxJsonDepth);
// The same where any failure just means "not usable": a discarded value (is_discarded()).
nlohmann::json ParseJsonOrDiscarded(std::string_view text, size_t max_depth = kMaxJsonDepth);

// Appends `s` as a JSON string, as nlohmann's dump() writes one (invalid UTF-8 replaced):
// plain printable ASCII, most names, as it is; the rest through the library.
void AppendJsonString(std::string& out, std::string_view s);
// The same for the concatenation of `parts` (an app handle from its parts), without making it.
void AppendJsonString(std::string& out, std::initializer_list<std::string_view> parts);
// Appends an optional integer as JSON: the number, or null.
template <class T>
void AppendJsonOptional(std::string& out, const std::optional<T>& v) {
  out += v ? std::to_string(*v) : "null";
}

// One line as Python's json.dumps writes it (", " and ": " separators, non-ASCII
// escaped as \uXXXX, keys in the value's order): what TorchX's `--json` prints.
std::string DumpLikePython(const nlohmann::json& value);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_JSON_PARSE_H_
