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

}  // namespace torchxd::core
