// One output stream of one replica on disk (stdout, stderr or combined): a
// ring of segment files within a byte budget, plus a small text index.
//
//   {dir}/{name}.log            the live segment (what `tail -F` follows); a
//                               new stream's is created with its first bytes
//   {dir}/{name}.log.<offset>   rotated segments, named by the logical offset
//                               of their first byte
//   {dir}/{name}.idx            one entry per line:
//       T <offset> <time_ms>              bytes from <offset> arrived at <time_ms>
//                                         (coalesced to kTimeGranularityMs)
//       A <attempt> <offset> <time_ms>    attempt <attempt> starts at <offset>
//       R <offset>                        the live segment starts at <offset>
//       L <offset> <bytes> <time_ms>      <bytes> could not be written (disk full)
//
// Offsets are logical: bytes ever written to the stream, so readers can span
// segments and tell how many bytes rotation dropped (the first available
// offset). A budget of 0 means unbounded: no rotation.
//
// Thread contract: a writer belongs to one thread; LoadLogStream is a pure
// read, safe on any thread.
#ifndef TORCHXD_LOGFILES_LOG_STREAM_H_
#define TORCHXD_LOGFILES_LOG_STREAM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"

namespace torchxd::logfiles {

inline constexpr int64_t kTimeGranularityMs = 10;
// The index stays small whatever the replica prints: past kIndexCompactBytes
// the writer rewrites it, dropping entries of bytes rotation already removed
// and then every other time entry of the oldest (coarser times for old
// lines), down to half that. A reader refuses an index larger than
// kMaxIndexBytes: torchxd never writes one (something else did).
inline constexpr uint64_t kIndexCompactBytes = 256 * 1024;
inline constexpr uint64_t kMaxIndexBytes = 1024 * 1024;
// Segments a reader looks for: a ring keeps about five.
inline constexpr size_t kMaxSegments = 64;

class LogStreamWriter {
 public:
  // `fresh`: the directory was just created, so there is nothing to continue
  // and nothing to check: the file is created by the first Write.
  [[nodiscard]] static Result<LogStreamWriter> Open(const std::string& dir, const std::string& name,
                                                    uint64_t budget_bytes, bool fresh = false);
  LogStreamWriter(LogStreamWriter&&) = default;
  LogStreamWriter& operator=(LogStreamWriter&&) = default;

  void BeginAttempt(int attempt, int64_t now_ms);
  // Appends; returns false when bytes were lost (counted in bytes_lost()).
  bool Write(std::string_view bytes, int64_t now_ms);
  uint64_t offset() const { return offset_; }
  uint64_t disk_bytes() const;  // what the ring holds on disk now
  uint64_t bytes_lost() const { return bytes_lost_; }

 private:
  LogStreamWriter() = default;
  void Index(const std::string& entry);
  void MaybeRotate();
  void Trim();
  void CompactIndex();

  std::string dir_, name_;
  uint64_t budget_ = 0;
  uint64_t segment_bytes_ = 0;
  UniqueFd fd_;
  UniqueFd index_fd_;
  uint64_t index_bytes_ = 0;     // of the index file, as written
  uint64_t offset_ = 0;          // logical end
  uint64_t segment_start_ = 0;   // logical start of the live segment
  std::vector<std::pair<uint64_t, uint64_t>> rotated_;  // (start, size), oldest first
  int64_t last_time_ = -1;
  std::string pending_attempt_;
  uint64_t bytes_lost_ = 0;
  uint64_t unreported_loss_ = 0;
};

// The reading side: what is on disk for one stream.
struct LogSegment {
  std::string path;
  uint64_t start = 0;
  uint64_t size = 0;
};
struct LogAttempt {
  int attempt = 0;
  uint64_t offset = 0;
  int64_t time_ms = 0;
};
struct LogStreamLayout {
  std::vector<LogSegment> segments;  // oldest first
  std::vector<std::pair<uint64_t, int64_t>> times;  // (offset, time_ms), ascending
  std::vector<LogAttempt> attempts;
  std::vector<uint64_t> rotations;  // R entries: where each live segment started, in index order
  uint64_t first_offset = 0;  // bytes before it were dropped by rotation
  uint64_t end_offset = 0;
  uint64_t bytes_lost = 0;

  int64_t TimeAt(uint64_t offset) const;            // arrival time of the byte at offset
  uint64_t OffsetAtTime(int64_t time_ms) const;     // first offset that arrived at or after
  int AttemptAt(uint64_t offset) const;             // 0 when unknown
};

// Reads at most kMaxIndexBytes of index and stats at most kMaxSegments
// files (no directory listing): bounded work whatever the directory holds.
// NotFound when the stream was never written; InvalidArgument for an index
// torchxd did not write.
[[nodiscard]] Result<LogStreamLayout> LoadLogStream(const std::string& dir, const std::string& name);
// One line of an index file into `layout` (exposed for the fuzzer); junk is ignored.
void ParseIndexLine(std::string_view line, LogStreamLayout& layout, uint64_t& live_start);

}  // namespace torchxd::logfiles

#endif  // TORCHXD_LOGFILES_LOG_STREAM_H_
