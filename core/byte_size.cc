#include "core/byte_size.h"

#include <exception>

namespace torchxd::core {

Result<uint64_t> ParseByteSize(const std::string& text) {
  if (text.empty()) return Fail(Error::InvalidArgument("empty byte size"));
  size_t pos = 0;
  unsigned long long value = 0;
  if (text[0] < '0' || text[0] > '9') {
    return Fail(Error::InvalidArgument("byte size `" + text + "`: expected a number with an optional K/M/G suffix"));
  }
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    return Fail(Error::InvalidArgument("byte size `" + text + "`: expected a number with an optional K/M/G suffix"));
  }
  std::string suffix = text.substr(pos);
  uint64_t mult = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = 1ull << 30;
  else if (!suffix.empty()) return Fail(Error::InvalidArgument("byte size `" + text + "`: unknown suffix `" + suffix + "` (use K, M or G)"));
  if (value > (uint64_t{1} << 62) / mult) return Fail(Error::InvalidArgument("byte size `" + text + "`: too large"));
  return value * mult;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  int unit = 0;
  uint64_t scale = 1;
  while (unit < 6 && bytes >= scale * 1024) scale *= 1024, ++unit;
  // Tenths, rounded up; a whole number of units is written without ".0".
  uint64_t whole = bytes / scale, rest = bytes % scale;
  uint64_t tenths = whole < 10 ? (rest * 10 + scale - 1) / scale : (rest ? 10 : 0);
  if (tenths >= 10) whole += 1, tenths = 0;
  std::string out = std::to_string(whole);
  if (tenths > 0) out += "." + std::to_string(tenths);
  return out + " " + kUnits[unit];
}

}  // namespace torchxd::core
