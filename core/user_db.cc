#include "core/user_db.h"

#include <grp.h>
#include <pwd.h>

namespace torchxd::core {

std::optional<UserEntry> LookUpUser(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return std::nullopt;
  return UserEntry{uid, pw.pw_gid, pw.pw_name, pw.pw_dir};
}

std::string UserName(uid_t uid) {
  auto user = LookUpUser(uid);
  return user ? user->name : std::to_string(uid);
}

gid_t PrimaryGidOf(uid_t uid, gid_t fallback) {
  auto user = LookUpUser(uid);
  return user ? user->gid : fallback;
}

std::vector<gid_t> GroupsOf(const UserEntry& user) {
  int n = 256;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (::getgrouplist(user.name.c_str(), user.gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));  // n is now the count it needs
    if (::getgrouplist(user.name.c_str(), user.gid, groups.data(), &n) < 0) return {user.gid};
  }
  groups.resize(static_cast<size_t>(n));
  return groups;
}

}  // namespace torchxd::core
