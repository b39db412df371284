#include "logfiles/log_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "logfiles/safe_file.h"

namespace torchxd::logfiles {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMinSegmentBytes = 64 * 1024;

// The replica's owner can write in its log dir: never follow a link or open a FIFO there.
UniqueFd OpenAppend(const std::string& path) { return OpenRegular(path, O_WRONLY | O_CREAT | O_APPEND, 0640); }

// Calls `line` for each line of a regular file, read in chunks.
template <class F>
void ForEachLine(const std::string& path, F line) {
  UniqueFd fd = OpenRegular(path, O_RDONLY);
  if (!fd.valid()) return;
  std::string carry;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view chunk(buf, static_cast<size_t>(n));
    size_t from = 0;
    for (size_t nl; (nl = chunk.find('\n', from)) != std::string_view::npos; from = nl + 1) {
      if (carry.empty()) {
        line(chunk.substr(from, nl - from));
      } else {
        carry.append(chunk.substr(from, nl - from));
        line(std::string_view(carry));
        carry.clear();
      }
    }
    carry.append(chunk.substr(from));
    if (carry.size() > 4096) carry.clear();  // no index entry is that long: skip the junk
  }
  if (!carry.empty()) line(std::string_view(carry));
}

}  // namespace

void ParseIndexLine(std::string_view line, LogStreamLayout& layout, uint64_t& live_start) {
  // Fields are decimal numbers; a malformed entry is skipped, never trusted.
  std::vector<int64_t> f;
  size_t i = 1;
  while (i < line.size() && f.size() < 3) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t start = i;
    bool negative = i < line.size() && line[i] == '-';
    if (negative) ++i;
    int64_t v = 0;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9' && v < (INT64_MAX - 9) / 10) v = v * 10 + (line[i++] - '0');
    if (i == start || (negative && i == start + 1)) return;
    f.push_back(negative ? -v : v);
  }
  if (line.empty() || f.empty() || f[0] < 0) return;
  switch (line[0]) {
    case 'T':
      if (f.size() >= 2) layout.times.emplace_back(static_cast<uint64_t>(f[0]), f[1]);
      break;
    case 'A':
      if (f.size() >= 3 && f[1] >= 0) layout.attempts.push_back({static_cast<int>(f[0]), static_cast<uint64_t>(f[1]), f[2]});
      break;
    case 'R':
      live_start = static_cast<uint64_t>(f[0]);
      break;
    case 'L':
      if (f.size() >= 2 && f[1] >= 0) layout.bytes_lost += static_cast<uint64_t>(f[1]);
      break;
  }
}

Result<LogStreamWriter> LogStreamWriter::Open(const std::string& dir, const std::string& name,
                                              uint64_t budget_bytes, bool fresh) {
  LogStreamWriter w;
  w.dir_ = dir;
  w.name_ = name;
  w.budget_ = budget_bytes;
  w.segment_bytes_ = budget_bytes == 0 ? 0 : std::max(kMinSegmentBytes, budget_bytes / 4);
  // Continue an existing stream (a restarted replica appends to the same files).
  auto layout = fresh ? Result<LogStreamLayout>(Fail(Error::NotFound("new"))) : LoadLogStream(dir, name);
  if (layout) {
    w.offset_ = layout->end_offset;
    for (const auto& s : layout->segments) {
      if (s.path == dir + "/" + name + ".log") {
        w.segment_start_ = s.start;
      } else {
        w.rotated_.emplace_back(s.start, s.size);
      }
    }
    w.bytes_lost_ = layout->bytes_lost;
  }
  std::string path = dir + "/" + name + ".log";
  w.fd_ = OpenAppend(path);
  if (!w.fd_.valid()) return Fail(Error::Io("open " + path + ": " + strerror(errno)));
  return w;  // the index is created with its first entry
}

void LogStreamWriter::Index(const std::string& entry) {
  if (!index_fd_.valid()) {
    index_fd_ = OpenAppend(dir_ + "/" + name_ + ".idx");
    if (!index_fd_.valid()) return;
  }
  std::string line = entry + "\n";
  if (::write(index_fd_.get(), line.data(), line.size()) < 0) {
    // The index is best effort on a full disk; the log bytes are what count.
  }
}

void LogStreamWriter::BeginAttempt(int attempt, int64_t now_ms) {
  // Marked with the stream's first bytes of this attempt: a stream that never
  // writes costs no file.
  pending_attempt_ = "A " + std::to_string(attempt) + " " + std::to_string(offset_) + " " + std::to_string(now_ms);
  last_time_ = -1;
}

bool LogStreamWriter::Write(std::string_view bytes, int64_t now_ms) {
  if (bytes.empty()) return true;
  if (!pending_attempt_.empty()) {
    Index(pending_attempt_);
    pending_attempt_.clear();
  }
  int64_t bucket = now_ms - now_ms % kTimeGranularityMs;
  if (bucket != last_time_) {
    Index("T " + std::to_string(offset_) + " " + std::to_string(now_ms));
    last_time_ = bucket;
  }
  uint64_t start = offset_;
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd_.get(), bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  offset_ += written;
  if (written < bytes.size()) {
    uint64_t lost = bytes.size() - written;
    bytes_lost_ += lost;
    unreported_loss_ += lost;
    return false;
  }
  if (unreported_loss_ > 0) {  // space came back: say what was lost, once, where it was lost
    Index("L " + std::to_string(start) + " " + std::to_string(unreported_loss_) + " " + std::to_string(now_ms));
    unreported_loss_ = 0;
  }
  MaybeRotate();
  return true;
}

uint64_t LogStreamWriter::disk_bytes() const {
  uint64_t total = offset_ - segment_start_;
  for (const auto& [start, size] : rotated_) total += size;
  return total;
}

void LogStreamWriter::MaybeRotate() {
  if (segment_bytes_ == 0 || offset_ - segment_start_ < segment_bytes_) return;
  std::string live = dir_ + "/" + name_ + ".log";
  std::string rotated = live + "." + std::to_string(segment_start_);
  if (::rename(live.c_str(), rotated.c_str()) != 0) return;  // try again after the next write
  rotated_.emplace_back(segment_start_, offset_ - segment_start_);
  segment_start_ = offset_;
  fd_ = OpenAppend(live);
  Index("R " + std::to_string(segment_start_));
  Trim();
}

void LogStreamWriter::Trim() {
  uint64_t total = offset_ - segment_start_;
  for (const auto& [start, size] : rotated_) total += size;
  while (!rotated_.empty() && total > budget_) {
    std::string path = dir_ + "/" + name_ + ".log." + std::to_string(rotated_.front().first);
    ::unlink(path.c_str());
    total -= rotated_.front().second;
    rotated_.erase(rotated_.begin());
  }
}

int64_t LogStreamLayout::TimeAt(uint64_t offset) const {
  auto it = std::upper_bound(times.begin(), times.end(), std::make_pair(offset, INT64_MAX));
  if (it == times.begin()) return times.empty() ? 0 : times.front().second;
  return std::prev(it)->second;
}

uint64_t LogStreamLayout::OffsetAtTime(int64_t time_ms) const {
  for (const auto& [offset, t] : times) {
    if (t >= time_ms) return offset;
  }
  return end_offset;
}

int LogStreamLayout::AttemptAt(uint64_t offset) const {
  int attempt = 0;
  for (const auto& a : attempts) {
    if (a.offset <= offset) attempt = a.attempt;
  }
  return attempt;
}

Result<LogStreamLayout> LoadLogStream(const std::string& dir, const std::string& name) {
  LogStreamLayout layout;
  uint64_t live_start = 0;
  ForEachLine(dir + "/" + name + ".idx", [&](std::string_view line) { ParseIndexLine(line, layout, live_start); });
  std::sort(layout.times.begin(), layout.times.end());
  std::error_code ec;
  std::string prefix = name + ".log.";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string file = entry.path().filename().string();
    if (file.rfind(prefix, 0) != 0) continue;
    char* end = nullptr;
    uint64_t start = std::strtoull(file.c_str() + prefix.size(), &end, 10);
    if (end == nullptr || *end != '\0') continue;
    layout.segments.push_back({entry.path().string(), start, static_cast<uint64_t>(entry.file_size(ec))});
  }
  std::sort(layout.segments.begin(), layout.segments.end(),
            [](const auto& a, const auto& b) { return a.start < b.start; });
  std::string live = dir + "/" + name + ".log";
  struct stat st;
  if (::stat(live.c_str(), &st) == 0) {
    layout.segments.push_back({live, live_start, static_cast<uint64_t>(st.st_size)});
  }
  if (layout.segments.empty()) return Fail(Error::NotFound("no " + name + ".log in " + dir));
  layout.first_offset = layout.segments.front().start;
  layout.end_offset = layout.segments.back().start + layout.segments.back().size;
  return layout;
}

}  // namespace torchxd::logfiles
