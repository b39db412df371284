// UniqueFd: the one owner of a file descriptor; closes it on destruction.
//
// Thread contract: like any value; do not share one instance across threads.
#ifndef TORCHXD_CORE_UNIQUE_FD_H_
#define TORCHXD_CORE_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace torchxd {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace torchxd

#endif  // TORCHXD_CORE_UNIQUE_FD_H_
