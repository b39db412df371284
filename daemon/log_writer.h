// ReplicaLogWriter: writes one replica's output in TorchX's layout,
// {app_log_dir}/{role}/{replica}/stdout.log, stderr.log, combined.log.
// stdout.log and stderr.log are byte-exact; combined.log is in arrival order
// at line granularity: a line of one stream is never cut by the other. A
// partial line is held until its newline, until it reaches kMaxLineBytes, or
// until the stream ends; such a piece gets a newline in combined.log only.
// Attempts of a retried replica append to the same files.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DAEMON_LOG_WRITER_H_
#define TORCHXD_DAEMON_LOG_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/unique_fd.h"
#include "supervisor/replica_process.h"

namespace torchxd::daemon {

class ReplicaLogWriter {
 public:
  static constexpr size_t kMaxLineBytes = 1 << 20;

  [[nodiscard]] static Result<ReplicaLogWriter> Open(const std::string& dir);

  void Write(supervisor::OutputStream stream, std::string_view bytes);
  void CloseStreams();  // end of an attempt: flush partial lines
  uint64_t bytes_lost() const { return bytes_lost_; }

 private:
  struct Stream {
    UniqueFd fd;
    std::string partial;
  };
  void WriteAll(int fd, std::string_view bytes);
  void Combined(std::string_view line, bool add_newline);

  Stream out_, err_;
  UniqueFd combined_;
  uint64_t bytes_lost_ = 0;
};

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_LOG_WRITER_H_
