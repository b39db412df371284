// Fuzz target: what a replica's user can write or say to the daemon through
// its shim's run directory: state.json, exit.json (the files) and control
// lines (a process listening on the run directory's socket). Nothing may
// crash, and what decodes re-encodes to something that decodes the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "supervisor/shim_files.h"
#include "supervisor/shim_protocol.h"

using namespace torchxd::supervisor;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto exit = DecodeShimExit(bytes)) {
    auto again = DecodeShimExit(EncodeShimExit(*exit));
    TORCHXD_CHECK(again.has_value());
    TORCHXD_CHECK(again->exit_code == exit->exit_code && again->signal == exit->signal &&
                  again->reason == exit->reason && again->message == exit->message);
  }
  if (auto state = DecodeShimState(bytes)) {
    auto again = DecodeShimState(EncodeShimState(*state));
    TORCHXD_CHECK(again.has_value() && again->shim_pid == state->shim_pid && again->boot_id == state->boot_id);
  }
  size_t start = 0;
  for (size_t nl; (nl = bytes.find('\n', start)) != std::string_view::npos; start = nl + 1) {
    if (auto m = ParseControlLine(bytes.substr(start, nl - start))) {
      TORCHXD_CHECK(m->text.find('\n') == std::string::npos);
    }
  }
  (void)ParseControlLine(bytes.substr(start));
  return 0;
}
