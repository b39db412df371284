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
    for (size_t r = 0; r < page->size(); ++r) {
      for (const auto& cell : page->row(r)) (void)cell.ToJson();
    }
    // Where the DOM reads the same rows (no repeated keys), strings, integers and nulls match it.
    nlohmann::json dom = torchxd::core::ParseJsonOrDiscarded(text);
    const nlohmann::json* apps = nullptr;
    if (dom.is_object() && dom.contains("result") && dom["result"].is_object() && dom["result"].contains("apps")) {
      apps = &dom["result"]["apps"];
    }
    if (apps != nullptr && apps->is_array() && apps->size() == page->size()) {
      for (size_t r = 0; r < page->size(); ++r) {
        const nlohmann::json& row = (*apps)[r];
        if (!row.is_array() || row.size() != page->row(r).size()) continue;
        for (size_t c = 0; c < row.size(); ++c) {
          const nlohmann::json& v = row[c];
          bool plain = v.is_string() || v.is_null() ||
                       (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX));
          if (plain) TORCHXD_CHECK(page->row(r)[c].ToJson() == v);
        }
      }
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
