// Fuzz target: a Kubernetes watch stream (NDJSON from the apiserver), cut
// into chunks the first byte chooses; each event read as a Job, a Pod and a
// found Job's AppDef.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8sbridge/job_state.h"
#include "k8sbridge/kube_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  size_t chunk = 1 + data[0] % 128;
  std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  torchxd::k8sbridge::LineBuffer lines;
  auto on_line = [](std::string_view line) {
    auto event = torchxd::k8sbridge::DecodeWatchEvent(line);
    if (!event) return;
    (void)torchxd::k8sbridge::ReadJob(event->object);
    (void)torchxd::k8sbridge::ReadPod(event->object);
    (void)torchxd::k8sbridge::ReadJobApp(event->object);  // a Job submitted elsewhere
  };
  for (size_t i = 0; i < stream.size(); i += chunk) lines.Feed(stream.substr(i, chunk), on_line);
  on_line(lines.TakeRest());
  return 0;
}
