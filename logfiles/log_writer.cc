#include "logfiles/log_writer.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

namespace torchxd::logfiles {
namespace {

// mkdir -p that tries the leaf first (a replica's dir is new, its role's dir
// usually is not): 1 when it made `dir`, 0 when it was there, else -errno.
int MakeDirs(const std::string& dir, int depth = 0) {
  if (::mkdir(dir.c_str(), 0777) == 0) return 1;
  int e = errno;
  if (e == EEXIST) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
  }
  size_t slash = dir.find_last_of('/');
  if (e != ENOENT || slash == 0 || slash == std::string::npos || depth > 64) return -e;
  if (int made = MakeDirs(dir.substr(0, slash), depth + 1); made < 0) return made;
  if (::mkdir(dir.c_str(), 0777) == 0) return 1;
  return errno == EEXIST ? MakeDirs(dir, depth + 1) : -errno;
}

}  // namespace

Result<ReplicaLogWriter> ReplicaLogWriter::Open(const std::string& dir, uint64_t budget_bytes) {
  int made = MakeDirs(dir);
  if (made < 0) return Fail(Error::Io("mkdir " + dir + ": " + strerror(-made)));
  bool fresh = made == 1;
  ReplicaLogWriter w;
  auto out = LogStreamWriter::Open(dir, "stdout", budget_bytes, fresh);
  if (!out) return Fail(out.error());
  auto err = LogStreamWriter::Open(dir, "stderr", budget_bytes, fresh);
  if (!err) return Fail(err.error());
  auto combined = LogStreamWriter::Open(dir, "combined", budget_bytes, fresh);
  if (!combined) return Fail(combined.error());
  w.out_.emplace(std::move(*out));
  w.err_.emplace(std::move(*err));
  w.combined_.emplace(std::move(*combined));
  return w;
}

uint64_t ReplicaLogWriter::bytes_lost() const {
  // The replica's output missing from its stream files (a one-stream source has combined.log only).
  return single_stream_ ? combined_->bytes_lost() - loss_notes_lost_ : out_->bytes_lost() + err_->bytes_lost();
}

uint64_t ReplicaLogWriter::disk_bytes() const {
  return out_->disk_bytes() + err_->disk_bytes() + combined_->disk_bytes();
}

void ReplicaLogWriter::BeginAttempt(int attempt, int64_t now_ms) {
  for (auto* s : {&*out_, &*err_, &*combined_}) s->BeginAttempt(attempt, now_ms);
}

void ReplicaLogWriter::Combined(std::string_view text, bool add_newline, int64_t now_ms) {
  if (!add_newline) {
    combined_->Write(text, now_ms);
    return;
  }
  std::string with_newline(text);
  with_newline += '\n';
  combined_->Write(with_newline, now_ms);
}

void ReplicaLogWriter::ReportLoss(int64_t now_ms) {
  // combined.log says what it misses itself, in-band, once it can be written again.
  uint64_t lost = combined_->bytes_lost();
  if (lost == loss_reported_) return;
  std::string note = "[torchxd] " + std::to_string(lost - loss_reported_) +
                     " bytes of output were lost here: the log disk was full\n";
  uint64_t before = combined_->bytes_lost();
  if (combined_->Write(note, now_ms)) {
    loss_reported_ = lost;
  } else {
    loss_reported_ += combined_->bytes_lost() - before;  // the note itself is not output that was lost
  }
}

void ReplicaLogWriter::Write(OutputStream stream, std::string_view bytes, int64_t now_ms) {
  bool is_out = stream == OutputStream::kStdout;
  LogStreamWriter& file = is_out ? *out_ : *err_;
  std::string& partial = (is_out ? out_partial_ : err_partial_).bytes;
  file.Write(bytes, now_ms);
  ReportLoss(now_ms);  // at the gap: before what came after it
  // Whole lines go to combined.log at once; the tail waits for its newline.
  std::string_view rest = bytes;
  if (!partial.empty()) {  // finish the pending line first
    size_t nl = rest.find('\n');
    std::string_view head = nl == std::string_view::npos ? rest : rest.substr(0, nl + 1);
    rest.remove_prefix(head.size());
    AppendToLine(partial, head, now_ms);
    if (!partial.empty() && partial.back() == '\n') {
      Combined(partial, false, now_ms);
      partial.clear();
    }
  }
  // A read never holds kMaxLineBytes, so lines complete within it are short.
  if (size_t last_nl = rest.rfind('\n'); last_nl != std::string_view::npos) {
    Combined(rest.substr(0, last_nl + 1), false, now_ms);
    rest.remove_prefix(last_nl + 1);
  }
  AppendToLine(partial, rest, now_ms);
}

void ReplicaLogWriter::AppendToLine(std::string& partial, std::string_view piece, int64_t now_ms) {
  // `piece` continues the current line and may end it with its newline. A line
  // is cut every kMaxLineBytes from its start (each cut gets a newline here).
  while (!piece.empty()) {
    size_t room = kMaxLineBytes - partial.size();
    if (piece.size() <= room || (piece.size() == room + 1 && piece.back() == '\n')) {
      partial.append(piece);
      return;
    }
    partial.append(piece.substr(0, room));
    piece.remove_prefix(room);
    Combined(partial, true, now_ms);
    partial.clear();
  }
}

void ReplicaLogWriter::WriteCombined(std::string_view lines, int64_t time_ms) {
  single_stream_ = true;
  uint64_t before = combined_->bytes_lost();
  ReportLoss(time_ms);
  loss_notes_lost_ += combined_->bytes_lost() - before;
  combined_->Write(lines, time_ms);
}

void ReplicaLogWriter::EndAttempt(int64_t now_ms) {
  for (std::string* p : {&out_partial_.bytes, &err_partial_.bytes}) {
    if (!p->empty()) Combined(*p, true, now_ms);
    p->clear();
  }
}

}  // namespace torchxd::logfiles
