// Durations as people write them in run options: "90s", "30m", "2h", "1d",
// "1h30m" (units in decreasing order, each once). A bare number is refused:
// Slurm reads one as minutes, a shell's sleep as seconds, so it needs a unit.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_DURATION_H_
#define TORCHXD_CORE_DURATION_H_

#include <cstdint>
#include <string>

#include "core/result.h"

namespace torchxd::core {

// Milliseconds, > 0 and at most 365 days; InvalidArgument naming the text otherwise.
[[nodiscard]] Result<int64_t> ParseDurationMs(const std::string& text);

// The shortest exact form: 5400000 -> "1h30m", 90000 -> "1m30s", 500 -> "0.5s".
std::string FormatDurationMs(int64_t ms);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_DURATION_H_
