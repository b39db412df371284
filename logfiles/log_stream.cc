#include "logfiles/log_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "logfiles/safe_file.h"

namespace torchxd::logfiles {
namespace {

constexpr uint64_t kMinSegmentBytes = 64 * 1024;

// The replica's owner can write in its log dir: never follow a link or open a FIFO there.
UniqueFd OpenAppend(const std::string& path) { return OpenRegular(path, O_WRONLY | O_CREAT | O_APPEND, 0600); }

// Calls `line` for each line of an open file, read in chunks, at most `max_bytes` of it.
template <class F>
void ForEachLine(int fd, uint64_t max_bytes, F line) {
  std::string carry;
  char buf[65536];
  for (uint64_t total = 0; total < max_bytes;) {
    ssize_t n = ::read(fd, buf, std::min<uint64_t>(sizeof(buf), max_bytes - total));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    total += static_cast<uint64_t>(n);
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
      if (layout.rotations.size() < kMaxIndexBytes / 4) layout.rotations.push_back(live_start);
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
  if (fresh) return w;  // a new stream's file is created with its first bytes, as its index is
  std::string path = dir + "/" + name + ".log";
  w.fd_ = OpenAppend(path);
  if (!w.fd_.valid()) return Fail(Error::Io("open " + path + ": " + strerror(errno)));
  return w;
}

void LogStreamWriter::Index(const std::string& entry) {
  if (!index_fd_.valid()) {
    index_fd_ = OpenAppend(dir_ + "/" + name_ + ".idx");
    if (!index_fd_.valid()) return;
    struct stat st;
    index_bytes_ = ::fstat(index_fd_.get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  }
  std::string line = entry + "\n";
  if (::write(index_fd_.get(), line.data(), line.size()) < 0) {
    return;  // the index is best effort on a full disk; the log bytes are what count
  }
  index_bytes_ += line.size();
  if (index_bytes_ > kIndexCompactBytes) CompactIndex();
}

void LogStreamWriter::CompactIndex() {
  std::string path = dir_ + "/" + name_ + ".idx";
  UniqueFd in = OpenRegular(path, O_RDONLY);
  if (!in.valid()) return;
  LogStreamLayout old;
  uint64_t live_start = 0;
  ForEachLine(in.get(), kMaxIndexBytes, [&](std::string_view line) { ParseIndexLine(line, old, live_start); });
  std::sort(old.times.begin(), old.times.end());
  // What rotation removed needs no entries, but the first kept bytes keep the
  // time and attempt they arrived with, and the losses keep their total.
  uint64_t first = rotated_.empty() ? segment_start_ : rotated_.front().first;
  auto kept = [first](const auto& entries, auto offset_of) {
    std::decay_t<decltype(entries)> out;
    for (size_t i = 0; i < entries.size(); ++i) {
      bool last_before = offset_of(entries[i]) < first && (i + 1 == entries.size() || offset_of(entries[i + 1]) >= first);
      if (offset_of(entries[i]) >= first || last_before) out.push_back(entries[i]);
    }
    return out;
  };
  auto times = kept(old.times, [](const auto& t) { return t.first; });
  auto attempts = kept(old.attempts, [](const LogAttempt& a) { return a.offset; });
  // Still too many: every other time entry, oldest first, keeping the newest as they were.
  auto size_of = [&] { return times.size() * 28 + attempts.size() * 40; };
  while (size_of() > kIndexCompactBytes / 2 && times.size() > 2) {
    std::vector<std::pair<uint64_t, int64_t>> thinned;
    size_t half = times.size() / 2;
    for (size_t i = 0; i < times.size(); ++i) {
      if (i >= half || i % 2 == 0) thinned.push_back(times[i]);
    }
    if (thinned.size() == times.size()) break;
    times = std::move(thinned);
  }
  // A replica restarted (or scaled) tens of thousands of times: its oldest attempts go.
  if (size_of() > kIndexCompactBytes / 2 && attempts.size() > 1) {
    size_t keep = std::max<size_t>(1, (kIndexCompactBytes / 4) / 40);
    if (attempts.size() > keep) attempts.erase(attempts.begin(), attempts.end() - static_cast<ptrdiff_t>(keep));
  }
  std::string text;
  for (const auto& [offset, t] : times) text += "T " + std::to_string(offset) + " " + std::to_string(t) + "\n";
  for (const auto& a : attempts) {
    text += "A " + std::to_string(a.attempt) + " " + std::to_string(a.offset) + " " + std::to_string(a.time_ms) + "\n";
  }
  for (uint64_t r : old.rotations) {
    if (r >= first) text += "R " + std::to_string(r) + "\n";
  }
  if (old.bytes_lost > 0) text += "L " + std::to_string(first) + " " + std::to_string(old.bytes_lost) + " 0\n";
  std::string tmp = path + ".tmp";
  if (!WriteRegularFile(tmp, text, 0600) || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    index_bytes_ = 0;  // try again after as many more entries
    return;
  }
  index_fd_ = OpenAppend(path);
  index_bytes_ = text.size();
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
  if (!fd_.valid()) fd_ = OpenAppend(dir_ + "/" + name_ + ".log");
  uint64_t start = offset_;
  size_t written = 0;
  while (fd_.valid() && written < bytes.size()) {
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
  Index("R " + std::to_string(segment_start_));  // before the new live file: a reader never maps it wrong
  fd_ = OpenAppend(live);
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
  std::string index = dir + "/" + name + ".idx";
  if (UniqueFd fd = OpenRegular(index, O_RDONLY); fd.valid()) {
    struct stat st;
    if (::fstat(fd.get(), &st) == 0 && static_cast<uint64_t>(st.st_size) > kMaxIndexBytes) {
      return Fail(Error::InvalidArgument(
          "the log index " + index + " is " + std::to_string(st.st_size) + " bytes, more than the " +
          std::to_string(kMaxIndexBytes >> 10) + " KiB torchxd keeps it under: something else wrote it; remove it "
          "to read the log without its times and attempts"));
    }
    ForEachLine(fd.get(), kMaxIndexBytes, [&](std::string_view line) { ParseIndexLine(line, layout, live_start); });
  }
  std::sort(layout.times.begin(), layout.times.end());
  // Rotated segments are named by where they start: 0 and every rotation but
  // the last (the live segment's). The newest are kept; stop at the first gone.
  std::vector<uint64_t> starts{0};
  starts.insert(starts.end(), layout.rotations.begin(), layout.rotations.end());
  starts.pop_back();
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  std::vector<LogSegment> rotated;
  for (auto it = starts.rbegin(); it != starts.rend() && rotated.size() < kMaxSegments; ++it) {
    if (*it >= live_start) continue;  // junk: a segment after the live one
    std::string path = dir + "/" + name + ".log." + std::to_string(*it);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) break;
    rotated.push_back({path, *it, static_cast<uint64_t>(st.st_size)});
  }
  layout.segments.assign(rotated.rbegin(), rotated.rend());
  std::string live = dir + "/" + name + ".log";
  struct stat st;
  if (::lstat(live.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    layout.segments.push_back({live, live_start, static_cast<uint64_t>(st.st_size)});
  }
  if (layout.segments.empty()) return Fail(Error::NotFound("no " + name + ".log in " + dir));
  layout.first_offset = layout.segments.front().start;
  layout.end_offset = layout.segments.back().start + layout.segments.back().size;
  return layout;
}

}  // namespace torchxd::logfiles
