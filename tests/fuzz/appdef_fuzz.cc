// Fuzz target: an AppDef JSON document (a file given to `torchx run`, or
// params.app of a frame): decode, validate, encode, decode again; translate
// it to a Volcano Job (the pod rules run on what it becomes). Each string
// macros apply to is counted and substituted: the counts give its size.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/app_json.h"
#include "core/check.h"
#include "core/macros.h"
#include "core/replica_request.h"
#include "k8sbridge/volcano_job.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  torchxd::core::AppDefDecodeOptions options;
  options.home = "/home/u";
  auto app = torchxd::core::ParseAppDefJson(text, options);
  if (!app) return 0;
  // What was accepted round-trips exactly and stays valid.
  auto again = torchxd::core::AppDefFromJson(torchxd::core::AppDefToJson(*app));
  TORCHXD_CHECK(again.has_value());
  TORCHXD_CHECK(*again == *app);
  torchxd::core::MacroValues values{"/img/root", "app-x1", "12", "TORCHX_RANK0_HOST"};
  auto sized = [&](const std::string& s) {
    TORCHXD_CHECK(torchxd::core::CountMacros(s).SizeWith(9, 6, 2, 17) == values.Substitute(s).size());
  };
  for (const auto& role : app->roles) {
    for (const auto& arg : role.args) sized(arg);
    for (const auto& [key, value] : role.env) sized(value);
  }
  (void)torchxd::core::EstimateExpandedBytes(*app, {{"PATH", "/bin"}}, 4096);
  torchxd::k8sbridge::KubernetesOptions k8s;
  k8s.queue = "default";
  (void)torchxd::k8sbridge::AppDefToVolcanoJob(*app, "fuzz-1", k8s);
  return 0;
}
