// Fuzz target: a .torchxconfig file: INI parsing, scheduler defaults applied
// with each scheduler's options, component defaults.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/scheduler_opts.h"
#include "core/torchx_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto ini = torchxd::core::ParseIni(text, "/fuzz/.torchxconfig");
  if (!ini) return 0;
  auto config = torchxd::core::TorchxConfig::FromFiles({*ini});
  for (const auto& name : torchxd::core::SchedulerNames()) {
    auto opts = torchxd::core::SchedulerRunOpts(name);
    torchxd::core::Cfg cfg;
    std::vector<std::string> warnings;
    (void)config.ApplySchedulerDefaults(name, **opts, cfg, warnings);
  }
  for (const char* component : {"dist.ddp", "utils.echo", "x"}) (void)config.ComponentDefaults(component);
  return 0;
}
