// Fuzz target: the reply frames the CLI reads without a JSON DOM (what a
// daemon, or whatever answers on the socket, sends): a `list` page's rows come
// back whole or the frame is refused with a reason; a result indented from the
// text is the same value a DOM of the frame holds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/list_page.h"
#include "cli/reply_text.h"
#include "core/check.h"
#include "core/json_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto page = torchxd::cli::ReadListPage(text);
  if (!page) {
    TORCHXD_CHECK(!page.error().message.empty());
  } else {
    for (const auto& row : page->apps) {
      for (const auto& cell : row) (void)cell.ToJson();
    }
  }
  auto indented = torchxd::cli::IndentedResult(text);
  if (!indented) {
    TORCHXD_CHECK(!indented.error().message.empty());
    return 0;
  }
  // Compared within the protocol's depth (comparing DOMs recurses).
  nlohmann::json frame = torchxd::core::ParseJsonOrDiscarded(text);
  if (frame.is_discarded()) return 0;
  TORCHXD_CHECK(frame.is_object() && frame.contains("result"));
  TORCHXD_CHECK(torchxd::core::ParseJsonOrDiscarded(*indented) == frame["result"]);
  return 0;
}
