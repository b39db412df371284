// One page of a `list` reply, read from its frame's text straight into rows
// of cells. A page holds up to 5,000 apps (a megabyte); read into a JSON DOM
// it cost the CLI more than the daemon's whole answer.
//
// Thread contract: a pure function of its argument.
#ifndef TORCHXD_CLI_LIST_PAGE_H_
#define TORCHXD_CLI_LIST_PAGE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace torchxd::cli {

// A row's value: a string, an integer or null (a list row holds nothing else).
// A string's text lives in its page: valid while the page does.
struct ListCell {
  enum class Kind { kNull, kString, kInteger };
  Kind kind = Kind::kNull;
  std::string_view text;
  int64_t integer = 0;

  bool is_null() const { return kind == Kind::kNull; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_integer() const { return kind == Kind::kInteger; }
  nlohmann::json ToJson() const;
};

// One app's cells, in the order of its page's fields.
using ListRow = std::span<const ListCell>;

// A page's rows with their text in a few large blocks: reading 5,000 rows
// allocates nothing per cell. Move-only: its rows point into it.
class ListPage {
 public:
  ListPage() = default;
  ListPage(ListPage&&) = default;
  ListPage& operator=(ListPage&&) = default;

  std::vector<std::string> fields;  // the rows' columns, by name
  std::optional<std::string> next;  // the cursor of the next page

  size_t size() const { return row_starts_.size(); }
  ListRow row(size_t i) const;

  // While reading: room for `cells` cells; a row begins; a cell ends the current row; text kept by the page.
  void Reserve(size_t cells) { cells_.reserve(cells); }
  void BeginRow() { row_starts_.push_back(cells_.size()); }
  void AddCell(const ListCell& cell) { cells_.push_back(cell); }
  std::string_view Keep(std::string_view text);

 private:
  std::vector<ListCell> cells_;     // every row's cells, row after row
  std::vector<size_t> row_starts_;  // where each row's cells begin
  // Blocks that never move once allocated, so the cells' text stays where it is.
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_left_ = 0;
  char* block_end_ = nullptr;
};

// The page in a reply frame ({"id":N,"result":{...}}). A daemon's error frame
// comes back as that Error; a frame that is no list reply is Internal, saying why.
[[nodiscard]] Result<ListPage> ReadListPage(std::string_view frame);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_LIST_PAGE_H_
