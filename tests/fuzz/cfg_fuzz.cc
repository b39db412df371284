// Fuzz target: a `-cfg` string, cast with every scheduler's run options, and
// the typed JSON form the daemon receives.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/cfg_string.h"
#include "core/check.h"
#include "core/json_parse.h"
#include "core/scheduler_opts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)torchxd::core::ParseKeyValues(text);
  (void)torchxd::core::ParseList(text);
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
