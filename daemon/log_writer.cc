#include "daemon/log_writer.h"

#include <filesystem>

namespace torchxd::daemon {

Result<ReplicaLogWriter> ReplicaLogWriter::Open(const std::string& dir, uint64_t budget_bytes) {
  std::error_code ec;
  bool fresh = std::filesystem::create_directories(dir, ec);
  if (ec) return Fail(Error::Io("mkdir " + dir + ": " + ec.message()));
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
  return out_->bytes_lost() + err_->bytes_lost() + combined_->bytes_lost();
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
  uint64_t lost = bytes_lost();
  if (lost == loss_reported_) return;
  std::string note = "[torchxd] " + std::to_string(lost - loss_reported_) +
                     " bytes of output were lost: the log disk was full\n";
  if (combined_->Write(note, now_ms)) loss_reported_ = lost;
}

void ReplicaLogWriter::Write(supervisor::OutputStream stream, std::string_view bytes, int64_t now_ms) {
  bool is_out = stream == supervisor::OutputStream::kStdout;
  LogStreamWriter& file = is_out ? *out_ : *err_;
  std::string& partial = (is_out ? out_partial_ : err_partial_).bytes;
  bool ok = file.Write(bytes, now_ms);
  // Whole lines go to combined.log at once; the tail waits for its newline.
  size_t last_nl = bytes.rfind('\n');
  if (last_nl == std::string_view::npos) {
    partial.append(bytes);
  } else if (partial.empty()) {
    Combined(bytes.substr(0, last_nl + 1), false, now_ms);
    partial.assign(bytes.substr(last_nl + 1));
  } else {
    partial.append(bytes.substr(0, last_nl + 1));
    Combined(partial, false, now_ms);
    partial.assign(bytes.substr(last_nl + 1));
  }
  while (partial.size() >= kMaxLineBytes) {
    Combined(std::string_view(partial).substr(0, kMaxLineBytes), true, now_ms);
    partial.erase(0, kMaxLineBytes);
  }
  if (ok) ReportLoss(now_ms);
}

void ReplicaLogWriter::WriteCombined(std::string_view lines, int64_t time_ms) {
  if (combined_->Write(lines, time_ms)) ReportLoss(time_ms);
}

void ReplicaLogWriter::EndAttempt(int64_t now_ms) {
  for (std::string* p : {&out_partial_.bytes, &err_partial_.bytes}) {
    if (!p->empty()) Combined(*p, true, now_ms);
    p->clear();
  }
}

}  // namespace torchxd::daemon
