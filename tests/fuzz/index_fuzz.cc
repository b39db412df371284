// Fuzz target: a log stream's .idx file (the replica's owner can write it):
// junk lines are skipped, never trusted, never fatal.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "logfiles/log_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  torchxd::logfiles::LogStreamLayout layout;
  uint64_t live_start = 0;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string_view::npos; start = nl + 1) {
    torchxd::logfiles::ParseIndexLine(text.substr(start, nl - start), layout, live_start);
  }
  torchxd::logfiles::ParseIndexLine(text.substr(start), layout, live_start);
  std::sort(layout.times.begin(), layout.times.end());  // as LoadLogStream does
  layout.end_offset = live_start + 100;
  (void)layout.TimeAt(live_start);
  (void)layout.OffsetAtTime(0);
  (void)layout.AttemptAt(live_start);
  return 0;
}
