// The passwd and group databases, asked once per question with the
// reentrant calls (getpwuid_r, getgrouplist), so any thread may ask.
#ifndef TORCHXD_CORE_USER_DB_H_
#define TORCHXD_CORE_USER_DB_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace torchxd::core {

struct UserEntry {
  uid_t uid = 0;
  gid_t gid = 0;  // the primary group
  std::string name;
  std::string home;
};

// The user's passwd entry; nothing when there is none (a uid without a name).
std::optional<UserEntry> LookUpUser(uid_t uid);
// Its login name, or the uid's digits when it has none (as `ls -l` shows it).
std::string UserName(uid_t uid);
// Its primary group, or `fallback` when the uid has no entry.
gid_t PrimaryGidOf(uid_t uid, gid_t fallback);
// Its groups: the primary one first, then the supplementary ones.
std::vector<gid_t> GroupsOf(const UserEntry& user);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_USER_DB_H_
