// The GPUs taken out of service (drained by hand, or lost), kept in the
// state dir so that a restarted daemon does not hand them out again: a JSON
// object of GPU UUID -> why, written whole at each change (rare, small).
// A GPU comes back only by `torchx gpus --undrain N`.
//
// Thread contract: plain functions; the daemon calls them on the loop.
#ifndef TORCHXD_DAEMON_GPU_SERVICE_FILE_H_
#define TORCHXD_DAEMON_GPU_SERVICE_FILE_H_

#include <map>
#include <string>

#include "core/result.h"

namespace torchxd::daemon {

// At most this many GPUs are kept (a box has far fewer).
inline constexpr size_t kMaxOutOfService = 1024;

// UUID -> reason; an absent file is none. A damaged file is an error naming it.
[[nodiscard]] Result<std::map<std::string, std::string>> LoadOutOfService(const std::string& path);
[[nodiscard]] Result<void> SaveOutOfService(const std::string& path, const std::map<std::string, std::string>& gpus);

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_GPU_SERVICE_FILE_H_
