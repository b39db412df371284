#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace torchxd::logging {
namespace {

spdlog::level::level_enum Of(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kCritical:
      return spdlog::level::critical;
  }
  return spdlog::level::info;
}

// The file stdout and stderr go to, when SendOutputTo named one.
struct Output {
  std::mutex mutex;
  std::string path;
  uint64_t max_bytes = 0;
  uint64_t size = 0;  // of the file now, as this process wrote it (others may write too: checked)
};
Output& TheOutput() {
  static Output output;
  return output;
}
std::atomic<bool> output_bounded{false};

// stdout and stderr onto a fresh descriptor of `path`; false (errno set) when it cannot be opened.
bool Redirect(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  bool ok = ::dup2(fd, STDOUT_FILENO) >= 0 && ::dup2(fd, STDERR_FILENO) >= 0;
  int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

// Called after each line: starts a new file once the current one reached its bound.
void BoundOutput(size_t line_bytes) {
  Output& out = TheOutput();
  std::lock_guard lock(out.mutex);
  out.size += line_bytes + 32;  // the pattern's time stamp and level, about
  if (out.size < out.max_bytes) return;
  struct stat st;
  if (::fstat(STDERR_FILENO, &st) != 0) return;
  out.size = static_cast<uint64_t>(st.st_size);  // what is really there (a message of ours may have been shorter)
  if (out.size < out.max_bytes) return;
  // Where this fails (the directory went away), it is tried again after as many more bytes.
  std::string old = out.path + ".1";
  if (::rename(out.path.c_str(), old.c_str()) == 0) Redirect(out.path);
  out.size = 0;
}

}  // namespace

std::string SendOutputTo(const std::string& path, uint64_t max_bytes) {
  Output& out = TheOutput();
  std::lock_guard lock(out.mutex);
  if (!Redirect(path)) return "cannot open " + path + ": " + strerror(errno);
  struct stat st;
  out.path = path;
  out.max_bytes = max_bytes;
  out.size = ::fstat(STDERR_FILENO, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  output_bounded.store(max_bytes > 0, std::memory_order_release);
  return "";
}

bool Enabled(Level level) { return spdlog::should_log(Of(level)); }

void Write(Level level, const std::string& message) {
  spdlog::log(Of(level), "{}", message);
  if (output_bounded.load(std::memory_order_acquire)) BoundOutput(message.size());
}

}  // namespace torchxd::logging
