#include "logfiles/safe_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

namespace torchxd::logfiles {

UniqueFd OpenRegular(const std::string& path, int flags, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode));
  if (!fd.valid()) return fd;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return UniqueFd();
  if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;  // "Invalid argument": not a regular file
    return UniqueFd();
  }
  if ((flags & O_NONBLOCK) == 0) ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes) {
  UniqueFd fd = OpenRegular(path, O_RDONLY);
  if (!fd.valid()) {
    int e = errno;
    if (e == ENOENT) return Fail(Error::NotFound(path + ": no such file"));
    return Fail(Error::Io("open " + path + ": " + (e == EINVAL ? "not a regular file" : strerror(e))));
  }
  std::string out;
  char buf[65536];
  while (out.size() < max_bytes) {
    ssize_t n = ::read(fd.get(), buf, std::min(sizeof(buf), max_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail(Error::Io("read " + path + ": " + strerror(errno)));
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Result<void> WriteRegularFile(const std::string& path, std::string_view data, mode_t mode) {
  UniqueFd fd = OpenRegular(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (!fd.valid()) return Fail(Error::Io("open " + path + ": " + strerror(errno)));
  for (size_t off = 0; off < data.size();) {
    ssize_t n = ::write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(Error::Io("write " + path + ": " + strerror(n < 0 ? errno : ENOSPC)));
    off += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace torchxd::logfiles
