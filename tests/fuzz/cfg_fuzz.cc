// Fuzz target: a `-cfg` string, cast with every scheduler's run options, and
// the typed JSON form the daemon receives; the text as a max_duration too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/cfg_string.h"
#include "core/check.h"
#include "core/duration.h"
#include "core/json_parse.h"
#include "core/scheduler_opts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)torchxd::core::ParseKeyValues(text);
  (void)torchxd::core::ParseList(text);
  if (auto ms = torchxd::core::ParseDurationMs(std::string(text)); ms) {
    // A duration that parsed is positive, bounded, and reads back the same.
    TORCHXD_CHECK(*ms > 0 && *ms <= 365 * 86400000LL);
    auto again = torchxd::core::ParseDurationMs(torchxd::core::FormatDurationMs(*ms));
    TORCHXD_CHECK(again.has_value() && *again == *ms);
  }
  for (const auto& name : torchxd::core::SchedulerNames()) {
    auto opts = torchxd::core::SchedulerRunOpts(name);
    TORCHXD_CHECK(opts.has_value());
    std::vector<std::string> warnings;
    auto cfg = (*opts)->CfgFromString(text, warnings);
    if (cfg) {
      auto resolved = (*opts)->Resolve(*cfg);
      if (resolved) {
        // The form sent to the daemon decodes to the same options.
        auto back = (*opts)->CfgFromJson(torchxd::core::CfgToJson(*resolved));
        TORCHXD_CHECK(back.has_value());
      }
    }
    if (auto j = torchxd::core::ParseJson(text); j) (void)(*opts)->CfgFromJson(*j);
  }
  return 0;
}
