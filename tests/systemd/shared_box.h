// SharedBox: the system torchxd of a shared GPU box, run as root for
// simulated users, for tests of what one user can and cannot do to another.
//
// Users and groups exist only in private copies of /etc/passwd and /etc/group
// bind-mounted over the machine's inside a private mount namespace: the
// machine's files are never edited, and whatever users or groups it already
// has (a group torchx from the .deb, a user named alice) are left out of the
// copies, so the test's own names and ids are the only ones that count.
//
//   alice, bob, erin  members of group torchx
//   dave        member of torchx and of the admin group torchxadm
//   carol       in neither: the socket refuses her
//
// SHARED_BOX_TEST(Name) { ... } defines SharedBoxTest.Name, which checks
// what the box needs (root, setpriv, unshare -m, a build tree other users can
// reach) and runs the body, SharedBoxInner.DISABLED_Name, in a child test
// binary inside a fresh mount namespace; the body skips when run any other way.
#ifndef TORCHXD_TESTS_SYSTEMD_SHARED_BOX_H_
#define TORCHXD_TESTS_SYSTEMD_SHARED_BOX_H_

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/shell.h"

namespace torchxd::testing {

struct BoxUser {
  std::string name;
  uid_t uid = 0;
  bool member = true;  // of group torchx
};

class SharedBox {
 public:
  static constexpr gid_t kTorchxGid = 5100;
  static constexpr gid_t kAdminGid = 5200;

  // `dir` is the test's own directory (made traversable for the users).
  explicit SharedBox(std::filesystem::path dir);
  ~SharedBox();  // stops the daemon, however the test ends

  // The users and groups above, in the namespace's /etc/passwd and /etc/group.
  ::testing::AssertionResult MakeUsers();
  // Starts `torchxd --system` with its socket, state and logs under dir and
  // `flags` added, and waits until it answers.
  ::testing::AssertionResult Start(const std::vector<std::string>& flags = {});
  // SIGTERM, then SIGKILL after `seconds`; the exit status (-1 when killed).
  int Stop(double seconds = 10);

  // `torchx ARGS` as a user (from their home, with their groups unless not a member).
  Output As(const std::string& user, const std::string& args) const;
  // `sh -c COMMAND` as a user.
  Output Sh(const std::string& user, const std::string& command) const;
  // `torchx ARGS` as root.
  Output Root(const std::string& args) const;

  // Connections a user's process holds open (each answered a `version`, so
  // the daemon took it), until Release or the box goes.
  struct Held {
    pid_t pid = -1;
    int accepted = 0;
    std::string refusal;  // why the first connection turned away was
  };
  Held Hold(const std::string& user, int connections);
  static void Release(Held& held);
  // Runs `fn` in a child process as `user` (with their groups) at `nice`; its exit status.
  int AsUserProcess(const std::string& user, const std::function<int()>& fn, int nice = 0) const;

  uid_t Uid(const std::string& user) const;
  std::filesystem::path Home(const std::string& user) const { return dir_ / "home" / user; }
  const std::filesystem::path& dir() const { return dir_; }
  std::string socket() const { return (dir_ / "run" / "torchxd.sock").string(); }
  std::filesystem::path state() const { return dir_ / "state"; }
  std::filesystem::path logs() const { return dir_ / "logs"; }
  pid_t daemon_pid() const { return pid_; }
  std::string DaemonLog() const;

  static std::string ReadAll(const std::filesystem::path& file);
  // The handle a `run -d` printed (its first line).
  static std::string HandleOf(const Output& run) { return run.out.substr(0, run.out.find('\n')); }

 private:
  std::string UserPrefix(const std::string& user) const;

  std::filesystem::path dir_;
  std::vector<BoxUser> users_;
  pid_t pid_ = -1;
};

// Runs SharedBoxInner.DISABLED_<name> in a private mount namespace (see above).
void RunSharedBoxTest(const std::string& name);

#define SHARED_BOX_TEST(Name)                                           \
  TEST(SharedBoxTest, Name) { ::torchxd::testing::RunSharedBoxTest(#Name); } \
  TEST(SharedBoxInner, DISABLED_##Name)

// The directory an inner test works in; skips the test when it is not run by its outer one.
#define SHARED_BOX_DIR(var)                                                         \
  const char* var##_env = std::getenv("TORCHXD_SHARED_BOX_DIR");                   \
  if (var##_env == nullptr) GTEST_SKIP() << "run by its SharedBoxTest, in a mount namespace"; \
  std::filesystem::path var(var##_env)

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_SYSTEMD_SHARED_BOX_H_
