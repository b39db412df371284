#include "daemon/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"

namespace torchxd::daemon {

Result<void> WriteStateFile(const std::string& path, const std::string& tmp, std::string_view bytes) {
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Fail(Error::Io("open " + tmp + ": " + std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail(Error::Io("write " + tmp + ": " + std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return Fail(Error::Io("fsync " + tmp + ": " + std::strerror(errno)));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Fail(Error::Io("rename " + tmp + ": " + std::strerror(errno)));
  return {};
}

Result<std::string> ReadStateFile(const std::string& path, size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    return Fail(errno == ENOENT ? Error::NotFound(path) : Error::Io("open " + path + ": " + std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Fail(Error::Io(path + ": not a regular file"));
  if (static_cast<uint64_t>(st.st_size) > max) {
    return Fail(Error::InvalidArgument(path + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                                       std::to_string(max) + " it may hold"));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(Error::Io("read " + path + ": " + (n < 0 ? std::strerror(errno) : "shorter than it was")));
    done += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace torchxd::daemon
