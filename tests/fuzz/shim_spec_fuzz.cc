// Fuzz target: the daemon -> torchxd-shim spec, fed whole and byte by byte
// (the shim reads it in pieces): what decodes re-encodes to the same bytes,
// and no strict prefix of a spec is one.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "supervisor/shim_protocol.h"

using torchxd::supervisor::DecodeShimSpec;
using torchxd::supervisor::ShimDecode;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  torchxd::supervisor::ShimSpec spec;
  std::string error;
  ShimDecode whole = DecodeShimSpec(bytes, spec, error);
  if (whole == ShimDecode::kComplete) {
    TORCHXD_CHECK(torchxd::supervisor::EncodeShimSpec(spec) == bytes);
  }
  // Every strict prefix of a complete spec needs more: the shim never acts on half of one.
  if (whole == ShimDecode::kComplete && size < 4096) {
    for (size_t cut = 0; cut < size; ++cut) {
      torchxd::supervisor::ShimSpec partial;
      TORCHXD_CHECK(DecodeShimSpec(bytes.substr(0, cut), partial, error) == ShimDecode::kNeedMore);
    }
  }
  return 0;
}
