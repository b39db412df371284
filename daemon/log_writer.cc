#include "daemon/log_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <filesystem>

namespace torchxd::daemon {
namespace {

Result<UniqueFd> OpenAppend(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640));
  if (!fd.valid()) return Fail(Error::Io("open " + path + ": " + strerror(errno)));
  return fd;
}

}  // namespace

Result<ReplicaLogWriter> ReplicaLogWriter::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail(Error::Io("mkdir " + dir + ": " + ec.message()));
  ReplicaLogWriter w;
  auto out = OpenAppend(dir + "/stdout.log");
  if (!out) return Fail(out.error());
  auto err = OpenAppend(dir + "/stderr.log");
  if (!err) return Fail(err.error());
  auto combined = OpenAppend(dir + "/combined.log");
  if (!combined) return Fail(combined.error());
  w.out_.fd = std::move(*out);
  w.err_.fd = std::move(*err);
  w.combined_ = std::move(*combined);
  return w;
}

void ReplicaLogWriter::WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // ENOSPC and friends: count the loss, keep the replica running
      bytes_lost_ += bytes.size();
      return;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void ReplicaLogWriter::Combined(std::string_view line, bool add_newline) {
  if (!add_newline) return WriteAll(combined_.get(), line);
  std::string with_newline(line);
  with_newline += '\n';
  WriteAll(combined_.get(), with_newline);
}

void ReplicaLogWriter::Write(supervisor::OutputStream stream, std::string_view bytes) {
  Stream& s = stream == supervisor::OutputStream::kStdout ? out_ : err_;
  WriteAll(s.fd.get(), bytes);
  // Whole lines go to combined.log at once; the tail waits for its newline.
  size_t last_nl = bytes.rfind('\n');
  if (last_nl == std::string_view::npos) {
    s.partial.append(bytes);
  } else if (s.partial.empty()) {
    Combined(bytes.substr(0, last_nl + 1), false);
    s.partial.assign(bytes.substr(last_nl + 1));
  } else {
    s.partial.append(bytes.substr(0, last_nl + 1));
    Combined(s.partial, false);
    s.partial.assign(bytes.substr(last_nl + 1));
  }
  while (s.partial.size() >= kMaxLineBytes) {
    Combined(std::string_view(s.partial).substr(0, kMaxLineBytes), true);
    s.partial.erase(0, kMaxLineBytes);
  }
}

void ReplicaLogWriter::CloseStreams() {
  for (Stream* s : {&out_, &err_}) {
    if (!s->partial.empty()) Combined(s->partial, true);
    s->partial.clear();
  }
}

}  // namespace torchxd::daemon
