#include "supervisor/shim_spec_read.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

namespace torchxd::supervisor {

bool ReadSpec(int fd, ShimSpec& spec, std::string& rest, std::string& error) {
  std::string buf;
  char chunk[65536];
  // Decoding starts over from the first byte, so it is tried only when the
  // bytes have doubled, when nothing more is there yet (the spec may be
  // whole) and at the end: a spec of a million arguments is read in linear
  // time, not quadratic.
  size_t decode_at = 0;
  auto decoded = [&]() -> std::optional<bool> {
    size_t used = 0;
    switch (DecodeShimSpec(buf, spec, error, &used)) {
      case ShimDecode::kComplete:
        rest = buf.substr(used);
        return true;
      case ShimDecode::kInvalid:
        return false;
      case ShimDecode::kNeedMore:
        break;
    }
    decode_at = std::max<size_t>(2 * buf.size(), sizeof(chunk));
    return std::nullopt;
  };
  for (;;) {
    pollfd more{fd, POLLIN, 0};
    if (buf.size() >= decode_at || ::poll(&more, 1, 0) == 0) {
      if (auto done = decoded()) return *done;
    }
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (auto done = decoded()) return *done;
      error = "the spec ended early";
      return false;
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace torchxd::supervisor

