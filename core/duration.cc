#include "core/duration.h"

#include <array>
#include <cctype>

namespace torchxd::core {
namespace {

struct Unit {
  char suffix;
  int64_t ms;
};
constexpr std::array<Unit, 4> kUnits{{{'d', 86400000}, {'h', 3600000}, {'m', 60000}, {'s', 1000}}};
constexpr int64_t kMaxMs = 365 * 86400000LL;

Error Bad(const std::string& text, const std::string& why) {
  return Error::InvalidArgument("`" + text + "` is not a duration (" + why +
                                "): write it as 90s, 30m, 2h, 1d or 1h30m");
}

}  // namespace

Result<int64_t> ParseDurationMs(const std::string& text) {
  if (text.empty()) return Fail(Bad(text, "it is empty"));
  int64_t total = 0;
  size_t next_unit = 0;  // units must come in decreasing order, each once
  size_t i = 0;
  while (i < text.size()) {
    size_t digits = i;
    int64_t n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (i - digits >= 9) return Fail(Bad(text, "a number is too long"));
      n = n * 10 + (text[i++] - '0');
    }
    if (i == digits) return Fail(Bad(text, "a number must come before each unit"));
    if (i == text.size()) return Fail(Bad(text, "the number " + text.substr(digits) + " has no unit"));
    size_t u = next_unit;
    while (u < kUnits.size() && kUnits[u].suffix != text[i]) ++u;
    if (u == kUnits.size()) {
      bool known = false;
      for (const Unit& unit : kUnits) known = known || unit.suffix == text[i];
      return Fail(Bad(text, known ? "units go from days to seconds, each once"
                                  : "unknown unit `" + std::string(1, text[i]) + "`"));
    }
    total += n * kUnits[u].ms;
    if (total > kMaxMs) return Fail(Bad(text, "longer than 365 days"));
    next_unit = u + 1;
    ++i;
  }
  if (total == 0) return Fail(Bad(text, "it must be longer than 0"));
  return total;
}

std::string FormatDurationMs(int64_t ms) {
  if (ms < 1000) return ms <= 0 ? "0s" : "0." + std::to_string(ms / 100) + "s";
  std::string out;
  int64_t rest = ms / 1000 * 1000;
  for (const Unit& unit : kUnits) {
    if (rest >= unit.ms) {
      out += std::to_string(rest / unit.ms) + unit.suffix;
      rest %= unit.ms;
    }
  }
  return out;
}

}  // namespace torchxd::core
