// The daemon's log lines (its stderr, the journal under systemd). Call sites
// format with fmt, the format string checked at compile time, and hand the
// text to core/log.cc, the one file that includes spdlog: spdlog's templates,
// instantiated per call, cost seconds of compile time in every file that logs.
// daemon/main.cc configures the logger (level, pattern) through spdlog itself.
//
// Thread contract: safe from any thread (spdlog's default logger is).
#ifndef TORCHXD_CORE_LOG_H_
#define TORCHXD_CORE_LOG_H_

#include <fmt/core.h>

#include <cstdint>
#include <string>
#include <utility>

namespace torchxd::logging {

enum class Level { kDebug, kInfo, kWarn, kError, kCritical };

// Whether a line of `level` would be written (so its formatting is skipped otherwise).
bool Enabled(Level level);
void Write(Level level, const std::string& message);

// Points stdout and stderr at `path` (appended to; created 0600) and keeps it
// within `max_bytes` (0: unbounded): once a line takes it there, it becomes
// `path`.1 (replacing the one before) and a new `path` takes the next lines,
// so the daemon's own output never holds more than about twice `max_bytes` on
// disk. Returns what failed, empty when it worked.
std::string SendOutputTo(const std::string& path, uint64_t max_bytes);

// A line at a level chosen at run time; the named ones below are the usual calls.
template <typename... Args>
void log(Level level, fmt::format_string<Args...> format, Args&&... args) {
  if (Enabled(level)) Write(level, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  log(Level::kDebug, format, std::forward<Args>(args)...);
}
template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  log(Level::kInfo, format, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  log(Level::kWarn, format, std::forward<Args>(args)...);
}
template <typename... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  log(Level::kError, format, std::forward<Args>(args)...);
}
template <typename... Args>
void critical(fmt::format_string<Args...> format, Args&&... args) {
  log(Level::kCritical, format, std::forward<Args>(args)...);
}

}  // namespace torchxd::logging

#endif  // TORCHXD_CORE_LOG_H_
