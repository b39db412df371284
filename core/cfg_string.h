// TorchX's `key=value` splitter (util/types.to_dict), used for -cfg strings,
// component dict arguments (--env A=1,B=2) and .torchxconfig values:
//   "FOO=v1,v2,BAR=v3" -> {FOO: "v1,v2", BAR: "v3"}: the LAST ',' or ';'
//   before the next '=' separates a value from the next key;
//   quoted values '...' / "..." protect '=', ',' and ';' (quotes removed);
//   FOO='' -> ""; "" -> {}; fewer than one key=value pair is an error.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_CFG_STRING_H_
#define TORCHXD_CORE_CFG_STRING_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace torchxd::core {

// Pairs in the order given (a later duplicate key overrides in a map).
using KeyValues = std::vector<std::pair<std::string, std::string>>;

[[nodiscard]] Result<KeyValues> ParseKeyValues(std::string_view arg);

// util/types.to_list: split on ',' and strip each item; "" -> [].
std::vector<std::string> ParseList(std::string_view arg);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_CFG_STRING_H_
