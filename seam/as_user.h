// AsUser: for its scope, filesystem access on this thread happens with a
// user's rights (setfsuid/setfsgid are per thread on Linux), so paths a
// caller names (its log_dir, its files in it) can never make the root daemon
// create, open or write anything that user could not. A no-op for the
// daemon's own user.
//
// Thread contract: affects only the calling thread (the loop).
#ifndef TORCHXD_SEAM_AS_USER_H_
#define TORCHXD_SEAM_AS_USER_H_

#include <sys/fsuid.h>
#include <sys/types.h>
#include <unistd.h>

namespace torchxd::seam {

class AsUser {
 public:
  AsUser(uid_t uid, gid_t gid) : active_(uid != ::geteuid()) {
    if (!active_) return;
    ::setfsgid(gid);
    ::setfsuid(uid);
  }
  ~AsUser() {
    if (!active_) return;
    ::setfsuid(::geteuid());
    ::setfsgid(::getegid());
  }
  AsUser(const AsUser&) = delete;
  AsUser& operator=(const AsUser&) = delete;

 private:
  bool active_;
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_AS_USER_H_
