// Fuzz target: the Docker engine's multiplexed log stream, cut into chunks
// the first bytes choose: every chunking delivers the same bytes per stream.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "docker/docker_client.h"

using torchxd::docker::DockerStreamDemuxer;
using torchxd::supervisor::OutputStream;

namespace {

std::string Demux(std::string_view wire, size_t chunk) {
  DockerStreamDemuxer d;
  std::string out, err;
  for (size_t i = 0; i < wire.size(); i += chunk) {
    d.Feed(wire.substr(i, chunk), [&](OutputStream s, std::string_view b) {
      (s == OutputStream::kStdout ? out : err).append(b);
    });
  }
  return out + '\0' + err;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  size_t chunk = 1 + data[0] % 64;
  std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  TORCHXD_CHECK(Demux(wire, chunk) == Demux(wire, wire.size() + 1));
  return 0;
}
