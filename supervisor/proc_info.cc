#include "supervisor/proc_info.h"

#include <cstdio>

#include "logfiles/safe_file.h"

namespace torchxd::supervisor {

std::optional<uint64_t> ParseStartTime(std::string_view stat_text) {
  size_t paren = stat_text.rfind(')');
  if (paren == std::string_view::npos) return std::nullopt;
  // After ") " come fields 3, 4, ...: the start time is field 22.
  size_t pos = paren + 1;
  for (int field = 3; field <= 22; ++field) {
    while (pos < stat_text.size() && stat_text[pos] == ' ') ++pos;
    size_t end = stat_text.find(' ', pos);
    if (end == std::string_view::npos) end = stat_text.size();
    if (pos >= end) return std::nullopt;
    if (field == 22) {
      uint64_t v = 0;
      for (size_t i = pos; i < end; ++i) {
        char c = stat_text[i];
        if (c == '\n') break;
        if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) return std::nullopt;
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      return v;
    }
    pos = end;
  }
  return std::nullopt;
}

std::optional<uint64_t> ProcessStartTime(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  auto text = logfiles::ReadRegularFile(path, 8192);
  if (!text || text->empty()) return std::nullopt;
  return ParseStartTime(*text);
}

std::string BootId() {
  std::string id = logfiles::ReadRegularFile("/proc/sys/kernel/random/boot_id", 256).value_or("");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

}  // namespace torchxd::supervisor
