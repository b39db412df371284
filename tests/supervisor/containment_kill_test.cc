// Containment::Kill with no descriptor free: a replica's group is killed all the same.
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/unique_fd.h"
#include "supervisor/containment.h"

extern char** environ;

namespace torchxd::supervisor {
namespace {

// True once `pid` (our child) has ended within 5 s; its status in `status`.
bool Reaped(pid_t pid, int& status) {
  for (int i = 0; i < 500; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ContainmentKillTest, AGroupIsKilledWhenNoDescriptorIsFree) {
  if (::geteuid() != 0) GTEST_SKIP() << "making a cgroup subtree needs root";
  auto containment = Containment::Discover("killtest-" + std::to_string(::getpid()));
  if (!containment->cgroups()) GTEST_SKIP() << containment->Describe();
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  for (int round = 0; round < 2; ++round) {  // the second finds the spare taken again
    SCOPED_TRACE("round " + std::to_string(round));
    std::string group = containment->TakeGroup("kill-at-limit-" + std::to_string(round));
    ASSERT_TRUE(containment->Create(group, {}));
    pid_t pid = -1;
    char sleep_path[] = "/bin/sleep", arg[] = "30";
    char* argv[] = {sleep_path, arg, nullptr};
    ASSERT_EQ(::posix_spawn(&pid, sleep_path, nullptr, nullptr, argv, environ), 0);
    ASSERT_TRUE(containment->Enter(group, pid));
    {
      // Every descriptor taken, under a limit lowered so that this is quick.
      struct rlimit low = saved;
      low.rlim_cur = 256;
      ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
      std::vector<UniqueFd> filler;
      for (int fd; (fd = ::dup(0)) >= 0;) filler.emplace_back(fd);
      ASSERT_EQ(errno, EMFILE);
      containment->Kill(group);
    }
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
    int status = 0;
    bool ended = Reaped(pid, status);
    if (!ended) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
    EXPECT_TRUE(ended && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the group's process outlived its Kill";
    containment->Remove(group);
  }
  containment->RemoveSubtree(true);
}

}  // namespace
}  // namespace torchxd::supervisor
