// Fuzz target: a `list` reply page as the CLI reads it (what a daemon, or
// whatever answers on the socket, sends): rows come back whole or the frame
// is refused with a reason; nothing else happens.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cli/list_page.h"
#include "core/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto page = torchxd::cli::ReadListPage(text);
  if (!page) {
    TORCHXD_CHECK(!page.error().message.empty());
    return 0;
  }
  for (const auto& row : page->apps) {
    for (const auto& cell : row) (void)cell.ToJson();
  }
  return 0;
}
