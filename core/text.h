// Small string helpers shared by the job model, the CLI and the schedulers:
// trimming and splitting, Python's shlex.quote, camelCase -> snake_case, and
// the "did you mean" suggestion used by every unknown-name error.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_TEXT_H_
#define TORCHXD_CORE_TEXT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace torchxd::core {

std::string Trim(std::string_view s);  // strips ASCII whitespace (Python str.strip())
std::vector<std::string> Split(std::string_view s, char sep);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);
std::string ToLower(std::string_view s);
std::string ToUpper(std::string_view s);
// Percent-encodes every byte but [A-Za-z0-9-_.~] and those in `keep` (e.g. "/" for a path).
std::string UrlEscape(std::string_view s, std::string_view keep = "");

// Python's shlex.quote: '' for empty, unchanged if only [\w@%+=:,./-], else
// single-quoted with embedded ' as '"'"'.
std::string ShellQuote(std::string_view s);

// TorchX's cases.camel_to_snake: "clusterName" -> "cluster_name".
std::string CamelToSnake(std::string_view name);

// The candidate most similar to `word` (ratio >= 0.6, like difflib's
// get_close_matches), or nothing.
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates);

// " Did you mean `x`?" or "" — ready to append to an error message.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

// Python repr of a str, as TorchX messages print it: 'foo'.
std::string PyRepr(std::string_view s);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_TEXT_H_
