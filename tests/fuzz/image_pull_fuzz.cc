// Fuzz target: an engine's image pull progress stream, cut into chunks the
// first byte chooses: every chunking reads the same, within the bounds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "docker/image_pull.h"

using torchxd::docker::PullProgress;

namespace {

std::string Read(std::string_view wire, size_t chunk) {
  PullProgress p;
  for (size_t i = 0; i < wire.size(); i += chunk) p.Feed(wire.substr(i, chunk));
  p.Finish();
  TORCHXD_CHECK(p.layers() <= PullProgress::kMaxLayers);
  TORCHXD_CHECK(p.layers_done() <= p.layers());
  return std::to_string(p.current()) + "/" + std::to_string(p.total()) + "/" + std::to_string(p.layers_done()) + "/" +
         p.error() + "/" + p.Summary();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  size_t chunk = 1 + data[0] % 64;
  std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  TORCHXD_CHECK(Read(wire, chunk) == Read(wire, wire.size() + 1));
  return 0;
}
