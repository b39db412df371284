// Fuzz target: an AppDef JSON document (a file given to `torchx run`, or
// params.app of a frame): decode, validate, encode, decode again; translate
// it to a Volcano Job (the pod rules run on what it becomes).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/app_json.h"
#include "core/check.h"
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
  torchxd::k8sbridge::KubernetesOptions k8s;
  k8s.queue = "default";
  (void)torchxd::k8sbridge::AppDefToVolcanoJob(*app, "fuzz-1", k8s);
  return 0;
}
