// ReplicaLogWriter: writes one replica's output in TorchX's layout,
// {app_log_dir}/{role}/{replica}/stdout.log, stderr.log, combined.log, each a
// ring of segments with an index (log_stream.h).
// stdout.log and stderr.log are byte-exact; combined.log is in arrival order
// at line granularity: a line of one stream is never cut by the other. A
// partial line is held until its newline or until the attempt ends; a line
// longer than kMaxLineBytes is cut every kMaxLineBytes from its start. Such
// pieces get a newline in combined.log only.
// The directory is made at Open (a replica may write its error.json there);
// in a new one, each file is created with its stream's first bytes, so a
// replica that prints nothing costs no log file (readers take a missing one
// for an empty stream). Attempts of a retried replica append to the same
// files; the index marks where each begins. On a full disk the replica keeps running, the loss is
// counted, and once space returns combined.log gets a line saying how much,
// where the gap is (before the output that came after it).
//
// Thread contract: loop thread only.
#ifndef TORCHXD_LOGFILES_LOG_WRITER_H_
#define TORCHXD_LOGFILES_LOG_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "logfiles/log_stream.h"
#include "logfiles/output_stream.h"

namespace torchxd::logfiles {

class ReplicaLogWriter {
 public:
  static constexpr size_t kMaxLineBytes = 1 << 20;

  [[nodiscard]] static Result<ReplicaLogWriter> Open(const std::string& dir, uint64_t budget_bytes);

  void BeginAttempt(int attempt, int64_t now_ms);
  void Write(OutputStream stream, std::string_view bytes, int64_t now_ms);
  void EndAttempt(int64_t now_ms);  // flushes partial lines
  // A source with one stream (a Kubernetes pod): whole lines, combined.log only.
  void WriteCombined(std::string_view lines, int64_t time_ms);
  // Output bytes that could not be stored (a full disk).
  uint64_t bytes_lost() const;
  uint64_t disk_bytes() const;

 private:
  struct Partial {
    std::string bytes;
  };
  void Combined(std::string_view text, bool add_newline, int64_t now_ms);
  void AppendToLine(std::string& partial, std::string_view piece, int64_t now_ms);
  void ReportLoss(int64_t now_ms);

  std::optional<LogStreamWriter> out_, err_, combined_;
  Partial out_partial_, err_partial_;
  uint64_t loss_reported_ = 0;
  bool single_stream_ = false;     // fed by WriteCombined (a pod)
  uint64_t loss_notes_lost_ = 0;   // bytes of our own loss notes that did not fit either
};

}  // namespace torchxd::logfiles

#endif  // TORCHXD_LOGFILES_LOG_WRITER_H_
