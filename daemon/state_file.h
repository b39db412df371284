// Small files of the daemon's own in its state dir (the GPU history, the
// GPUs out of service): read with a bound, written whole or not at all.
//
// Thread contract: plain functions; any thread (they block on the disk).
#ifndef TORCHXD_DAEMON_STATE_FILE_H_
#define TORCHXD_DAEMON_STATE_FILE_H_

#include <string>
#include <string_view>

#include "core/result.h"

namespace torchxd::daemon {

// Writes `bytes` to `tmp` (0600, no link followed), then renames it over
// `path`: a reader sees the old file or the new one, never half of one.
[[nodiscard]] Result<void> WriteStateFile(const std::string& path, const std::string& tmp, std::string_view bytes);
// The file's bytes; NotFound when it is absent, InvalidArgument (unread)
// when it is larger than `max`.
[[nodiscard]] Result<std::string> ReadStateFile(const std::string& path, size_t max);

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_STATE_FILE_H_
