#include "supervisor/proc_info.h"

#include <dirent.h>

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

std::optional<std::pair<char, pid_t>> ParseStateAndGroup(std::string_view stat_text) {
  size_t paren = stat_text.rfind(')');
  if (paren == std::string_view::npos || paren + 2 >= stat_text.size()) return std::nullopt;
  char state = stat_text[paren + 2];
  // ") S ppid pgrp": skip the state and the parent.
  size_t pos = paren + 3;
  for (int skip = 0; skip < 2; ++skip) {
    while (pos < stat_text.size() && stat_text[pos] == ' ') ++pos;
    if (skip == 1) break;
    while (pos < stat_text.size() && stat_text[pos] != ' ') ++pos;
  }
  long long group = 0;
  size_t digits = 0;
  for (; pos < stat_text.size() && stat_text[pos] >= '0' && stat_text[pos] <= '9' && digits < 10; ++pos, ++digits) {
    group = group * 10 + (stat_text[pos] - '0');
  }
  if (digits == 0) return std::nullopt;
  return std::make_pair(state, static_cast<pid_t>(group));
}

bool ProcessGroupAlive(pid_t pgid) {
  if (pgid <= 0) return false;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return false;
  bool alive = false;
  while (struct dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300];
    std::snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
    auto text = logfiles::ReadRegularFile(path, 4096);
    if (!text) continue;
    auto sg = ParseStateAndGroup(*text);
    if (sg && sg->second == pgid && sg->first != 'Z' && sg->first != 'X') {
      alive = true;
      break;
    }
  }
  ::closedir(proc);
  return alive;
}

std::string BootId() {
  // Read once: it cannot change while this process lives (a forked shim gets the launcher's copy).
  static const std::string id = [] {
    std::string text = logfiles::ReadRegularFile("/proc/sys/kernel/random/boot_id", 256).value_or("");
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
  }();
  return id;
}

}  // namespace torchxd::supervisor
