// Which of a replica's two output streams bytes came from.
#ifndef TORCHXD_LOGFILES_OUTPUT_STREAM_H_
#define TORCHXD_LOGFILES_OUTPUT_STREAM_H_

namespace torchxd::logfiles {

enum class OutputStream { kStdout, kStderr };

}  // namespace torchxd::logfiles

#endif  // TORCHXD_LOGFILES_OUTPUT_STREAM_H_
