// One page of a `list` reply, read from its frame's text straight into rows
// of cells. A page holds up to 5,000 apps (a megabyte); read into a JSON DOM
// it cost the CLI more than the daemon's whole answer.
//
// Thread contract: a pure function of its argument.
#ifndef TORCHXD_CLI_LIST_PAGE_H_
#define TORCHXD_CLI_LIST_PAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace torchxd::cli {

// A row's value: a string, an integer or null (a list row holds nothing else).
struct ListCell {
  enum class Kind { kNull, kString, kInteger };
  Kind kind = Kind::kNull;
  std::string text;
  int64_t integer = 0;

  bool is_null() const { return kind == Kind::kNull; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_integer() const { return kind == Kind::kInteger; }
  nlohmann::json ToJson() const;
};

struct ListPage {
  std::vector<std::string> fields;              // the rows' columns, by name
  std::vector<std::vector<ListCell>> apps;      // one row of cells per app
  std::optional<std::string> next;              // the cursor of the next page
};

// The page in a reply frame ({"id":N,"result":{...}}). A daemon's error frame
// comes back as that Error; a frame that is no list reply is Internal, saying why.
[[nodiscard]] Result<ListPage> ReadListPage(std::string_view frame);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_LIST_PAGE_H_
