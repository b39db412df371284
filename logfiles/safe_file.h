// Opening files inside directories a user controls (a replica's log dir, its
// error.json, the app's SUCCESS file) from the daemon's loop. The user may
// have put anything there: a FIFO (a plain open would block the loop until
// someone opens the other end), a symbolic link to a file only the daemon may
// read, a huge file. These helpers never follow a final symlink, never block
// on a FIFO or device (O_NONBLOCK, then regular files only), and read at most
// what they are told. Callers also take the user's rights for the access
// (as_user.h): a symlinked directory on the way gives the user nothing.
//
// Thread contract: pure system calls; any thread.
#ifndef TORCHXD_LOGFILES_SAFE_FILE_H_
#define TORCHXD_LOGFILES_SAFE_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/unique_fd.h"

namespace torchxd::logfiles {

// open(2) with O_CLOEXEC|O_NOFOLLOW|O_NONBLOCK added; refuses (ENXIO-like
// error, errno set) anything but a regular file. O_NONBLOCK is cleared again.
UniqueFd OpenRegular(const std::string& path, int flags, mode_t mode = 0600);

// At most `max_bytes` of a regular file; NotFound when absent.
[[nodiscard]] Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes);
// Creates or truncates a regular file and writes `data`.
[[nodiscard]] Result<void> WriteRegularFile(const std::string& path, std::string_view data, mode_t mode = 0600);

}  // namespace torchxd::logfiles

#endif  // TORCHXD_LOGFILES_SAFE_FILE_H_
