#include "core/log.h"

#include <spdlog/spdlog.h>

namespace torchxd::logging {
namespace {

spdlog::level::level_enum Of(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kCritical:
      return spdlog::level::critical;
  }
  return spdlog::level::info;
}

}  // namespace

bool Enabled(Level level) { return spdlog::should_log(Of(level)); }

void Write(Level level, const std::string& message) { spdlog::log(Of(level), "{}", message); }

}  // namespace torchxd::logging
