// Fuzz target: the reply frames the CLI reads without a JSON DOM (what a
// daemon, or whatever answers on the socket, sends): a `list` page's rows come
// back whole or the frame is refused with a reason; a result indented from the
// text is the same value a DOM of the frame holds, and written in chunks the same text.
#include <cstddef>
#include <cstdint>
#include <sstream>
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
  // Written in chunks: the same text, or the same refusal.
  std::ostringstream chunks;
  auto written = torchxd::cli::WriteIndentedResult(text, chunks);
  TORCHXD_CHECK(written.has_value() == indented.has_value());
  if (!indented) {
    TORCHXD_CHECK(!indented.error().message.empty());
    TORCHXD_CHECK(written.error().message == indented.error().message);
    return 0;
  }
  TORCHXD_CHECK(chunks.str() == *indented);
  // Compared within the protocol's depth (comparing DOMs recurses).
  nlohmann::json frame = torchxd::core::ParseJsonOrDiscarded(text);
  if (frame.is_discarded()) return 0;
  TORCHXD_CHECK(frame.is_object() && frame.contains("result"));
  TORCHXD_CHECK(torchxd::core::ParseJsonOrDiscarded(*indented) == frame["result"]);
  return 0;
}
