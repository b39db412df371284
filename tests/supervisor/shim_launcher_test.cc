// The shim launcher (launch_protocol.h), the real static torchxd-shim in
// --launcher mode: it forks working shims, refuses every request that is not
// exactly the daemon's, ends with the daemon, and ShimLauncher replaces one
// that died while the daemon's shims are exec'd meanwhile.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <gmock/gmock.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/unique_fd.h"
#include "supervisor/launch_protocol.h"
#include "supervisor/replica_process.h"
#include "supervisor/shim_launcher.h"
#include "supervisor/shim_protocol.h"
#include "supervisor/shim_spawn.h"
#include "tests/supervisor/launcher_harness.h"

namespace torchxd::supervisor {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ShimLauncherTest, ForgedRequestsAreRefusedAndTheLauncherGoesOnServing) {
  Launcher l = StartLauncher();
  auto [ours, theirs] = ControlSockets();
  UniqueFd file(::open("/etc/hostname", O_RDONLY | O_CLOEXEC));
  RunDir run_dir;
  const UniqueFd& dir = run_dir.fd;
  ASSERT_TRUE(file.valid() && dir.valid());
  struct Case {
    const char* name;
    std::string payload;
    std::vector<int> fds;
  };
  const Case forged[] = {
      {"no descriptor", "S", {}},
      {"another request byte", "X", {theirs.get()}},
      {"more than the byte (credentials, a path)", "S uid=0", {theirs.get()}},
      {"a file as the control socket", "S", {file.get()}},
      {"a file as the run directory", "S", {theirs.get(), file.get()}},
      {"a socket as the run directory", "S", {theirs.get(), theirs.get()}},
      {"a directory as the control socket", "S", {dir.get(), dir.get()}},
      {"three descriptors for a plain launch", "S", {theirs.get(), dir.get(), dir.get()}},
      {"a launch into a group without its group", "C", {theirs.get(), dir.get()}},
      {"a directory that is no cgroup as the group", "C", {theirs.get(), dir.get(), dir.get()}},
      {"a file as the group", "C", {theirs.get(), dir.get(), file.get()}},
  };
  for (const auto& c : forged) {
    LaunchReply r = Ask(l.socket.get(), c.payload, c.fds);
    EXPECT_EQ(r.pid, -1) << c.name;
    EXPECT_EQ(r.error, EINVAL) << c.name;
  }
  // Five descriptors do not fit a request: the kernel cuts them, the launcher refuses it.
  {
    int three[5] = {theirs.get(), dir.get(), dir.get(), dir.get(), dir.get()};
    struct iovec iov {
      const_cast<char*>("S"), 1
    };
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(three))] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(three));
    memcpy(CMSG_DATA(cm), three, sizeof(three));
    ASSERT_EQ(::sendmsg(l.socket.get(), &msg, 0), 1);
    LaunchReply r;
    std::vector<UniqueFd> got;
    bool complete = false;
    ASSERT_EQ(RecvWithFds(l.socket.get(), &r, sizeof(r), got, complete), static_cast<ssize_t>(sizeof(r)));
    EXPECT_EQ(r.error, EINVAL);
  }
  // Still serving: a real request forks a shim that runs the spec it is sent.
  UniqueFd pidfd;
  LaunchReply r = Ask(l.socket.get(), "S", {theirs.get(), dir.get()}, &pidfd);
  ASSERT_GT(r.pid, 0) << strerror(r.error);
  ASSERT_TRUE(pidfd.valid());
  theirs.reset();
  std::string spec = EncodeShimSpec(TrueSpec());
  ASSERT_EQ(::write(ours.get(), spec.data(), spec.size()), static_cast<ssize_t>(spec.size()));
  std::string said = ReadUntilClosed(ours.get());
  EXPECT_THAT(said, HasSubstr("started "));
  EXPECT_THAT(said, HasSubstr("exited 7"));
  struct pollfd p = {pidfd.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 5000), 1) << "the pidfd did not say the shim ended";
  // The daemon closes its end: the launcher, with no shim left, exits.
  l.socket.reset();
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
}

// A launch into a group ('C'): the shim is born in it (no one moves it
// there), so its replica runs in it from its first instruction.
TEST(ShimLauncherTest, AShimLaunchedIntoAGroupIsBornInIt) {
  std::string why;
  std::string group = MakeTestGroup(why);
  if (group.empty()) GTEST_SKIP() << why;
  Launcher l = StartLauncher();
  auto [ours, theirs] = ControlSockets();
  auto out = std::filesystem::temp_directory_path() / ("launcher-group-" + std::to_string(::getpid()));
  RunDir run_dir;
  const UniqueFd& dir = run_dir.fd;
  UniqueFd group_fd(::open(group.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(dir.valid() && group_fd.valid());
  UniqueFd pidfd;
  LaunchReply r = Ask(l.socket.get(), "C", {theirs.get(), dir.get(), group_fd.get()}, &pidfd);
  ASSERT_GT(r.pid, 0) << strerror(r.error);
  EXPECT_EQ(r.in_group, 1) << "forked where the launcher is (a kernel before 5.7?)";
  std::string procs;
  std::ifstream(group + "/cgroup.procs") >> procs;
  EXPECT_EQ(procs, std::to_string(r.pid)) << "the shim, waiting for its spec, is in the group";
  theirs.reset();
  ShimSpec spec = TrueSpec();
  spec.argv = {"/bin/sh", "-c", "cat /proc/self/cgroup > " + out.string()};
  std::string text = EncodeShimSpec(spec);
  ASSERT_EQ(::write(ours.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  EXPECT_THAT(ReadUntilClosed(ours.get()), HasSubstr("exited 0"));
  std::string v2_line;  // the replica's group in the v2 hierarchy (a hybrid host lists v1's too)
  std::ifstream cgroups(out);
  for (std::string line; std::getline(cgroups, line);) {
    if (line.rfind("0::", 0) == 0) v2_line = line;
  }
  EXPECT_EQ(v2_line, "0::" + group.substr(group.rfind('/')));
  std::filesystem::remove(out);
  l.socket.reset();
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
  for (int i = 0; i < 500 && ::rmdir(group.c_str()) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// Some kernels (6.18) kill at birth a process cloned into a group whose
// cgroup.kill count differs from its parent's group's (one once killed, or a
// fresh one from a launcher whose own group was once killed): the launcher
// asks once, on its first group, and forks the gated way where they do, so a
// shim still runs.
TEST(ShimLauncherTest, AKernelThatKillsWhatIsClonedIntoAKilledGroupGetsTheGatedFork) {
  std::string why;
  std::string group = MakeTestGroup(why);
  if (group.empty()) GTEST_SKIP() << why;
  {
    std::ofstream kill(group + "/cgroup.kill");
    kill << "1";  // empty: nothing dies, but the group's count moves on
  }
  Launcher l = StartLauncher();
  auto [ours, theirs] = ControlSockets();
  RunDir run_dir;
  UniqueFd group_fd(::open(group.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(run_dir.fd.valid() && group_fd.valid());
  ShimSpec spec = TrueSpec();
  std::string text = EncodeShimSpec(spec);
  ASSERT_EQ(::write(ours.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  UniqueFd pidfd;
  LaunchReply r = Ask(l.socket.get(), "C", {theirs.get(), run_dir.fd.get(), group_fd.get()}, &pidfd);
  ASSERT_GT(r.pid, 0) << strerror(r.error);
  EXPECT_EQ(r.in_group, 1);
  theirs.reset();
  std::string said = ReadUntilClosed(ours.get());
  EXPECT_THAT(said, HasSubstr("started ")) << "the shim died before it said a word";
  EXPECT_THAT(said, HasSubstr("exited 7"));
  l.socket.reset();
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
  for (int i = 0; i < 500 && ::rmdir(group.c_str()) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// Where the kernel cannot clone into a group (forced here with --gated-fork),
// the launcher forks a child that waits at a gate until the launcher has its
// pidfd and has moved it into its group: a spec written before the request
// (as the daemon writes it) still starts a replica that is in the group.
TEST(ShimLauncherTest, AGatedForkIsInItsGroupBeforeItReadsTheSpecWrittenBeforeTheRequest) {
  std::string why;
  std::string group = MakeTestGroup(why);
  if (group.empty()) GTEST_SKIP() << why;
  Launcher l = StartLauncher(/*gated=*/true);
  auto out = std::filesystem::temp_directory_path() / ("launcher-gated-" + std::to_string(::getpid()));
  std::filesystem::remove(out);
  for (bool into_group : {true, false}) {
    SCOPED_TRACE(into_group ? "C" : "S");
    auto [ours, theirs] = ControlSockets();
    ShimSpec spec = TrueSpec();
    spec.argv = {"/bin/sh", "-c", "cat /proc/self/cgroup > " + out.string()};
    std::string text = EncodeShimSpec(spec);
    ASSERT_EQ(::write(ours.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
    RunDir run_dir;
    const UniqueFd& dir = run_dir.fd;
    UniqueFd group_fd(::open(group.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(dir.valid() && group_fd.valid());
    UniqueFd pidfd;
    LaunchReply r = into_group ? Ask(l.socket.get(), "C", {theirs.get(), dir.get(), group_fd.get()}, &pidfd)
                               : Ask(l.socket.get(), "S", {theirs.get()}, &pidfd);
    ASSERT_GT(r.pid, 0) << strerror(r.error);
    EXPECT_EQ(r.in_group, into_group ? 1 : 0);
    EXPECT_TRUE(pidfd.valid());
    theirs.reset();
    EXPECT_THAT(ReadUntilClosed(ours.get()), HasSubstr("exited 0"));
    std::string v2_line;  // the replica's group in the v2 hierarchy (a hybrid host lists v1's too)
    std::ifstream cgroups(out);
    for (std::string line; std::getline(cgroups, line);) {
      if (line.rfind("0::", 0) == 0) v2_line = line;
    }
    if (into_group) {
      EXPECT_EQ(v2_line, "0::" + group.substr(group.rfind('/')));
    } else {
      EXPECT_NE(v2_line, "0::" + group.substr(group.rfind('/')));
      EXPECT_THAT(v2_line, StartsWith("0::"));
    }
    std::filesystem::remove(out);
  }
  l.socket.reset();
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
  for (int i = 0; i < 500 && ::rmdir(group.c_str()) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

TEST(ShimLauncherTest, TheLauncherWaitsForItsShimsAfterTheDaemonClosesAndDiesWithTheDaemon) {
  Launcher l = StartLauncher();
  auto [ours, theirs] = ControlSockets();
  LaunchReply r = Ask(l.socket.get(), "S", {theirs.get()});
  ASSERT_GT(r.pid, 0);
  theirs.reset();
  ShimSpec spec = TrueSpec();
  spec.argv = {"/bin/sleep", "0.5"};
  std::string text = EncodeShimSpec(spec);
  ASSERT_EQ(::write(ours.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  // Closed with a shim still running (a daemon re-executing itself): the launcher lingers...
  l.socket.reset();
  EXPECT_FALSE(ExitsWithin(l.pid, 0.2));
  // ...until its last shim has ended.
  EXPECT_THAT(ReadUntilClosed(ours.get()), HasSubstr("exited 0"));
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
}

// A daemon that dies right after it sends a stop (a cancel) behind the spec,
// before the shim has said a word: the shim's first line finds no one, and
// the stop it was sent still reaches the replica (with live-restore the shim
// goes on without the daemon). It used to be dropped with the socket.
TEST(ShimLauncherTest, AStopSentJustBeforeTheDaemonDiedStillReachesTheReplica) {
  Launcher l = StartLauncher();
  auto [ours, theirs] = ControlSockets();
  RunDir run_dir;
  UniqueFd pidfd;
  LaunchReply r = Ask(l.socket.get(), "S", {theirs.get(), run_dir.fd.get()}, &pidfd);
  ASSERT_GT(r.pid, 0) << strerror(r.error);
  ASSERT_TRUE(pidfd.valid());
  theirs.reset();
  ShimSpec spec = TrueSpec();
  spec.keep = true;
  spec.argv = {"/bin/sleep", "30"};
  std::string text = EncodeShimSpec(spec) + "stop 300\n";
  ASSERT_EQ(::write(ours.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ours.reset();  // gone before the shim has started the replica, let alone said so
  // Stopped, the replica ends within its grace, and its shim with it; a lost
  // stop leaves both running for the 30 s.
  struct pollfd p = {pidfd.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 10000), 1) << "the shim never ended: the stop was lost";
  std::string exit_text = ReadText(std::filesystem::path("/proc/self/fd") / std::to_string(run_dir.fd.get()) / "exit.json");
  EXPECT_THAT(exit_text, HasSubstr("\"signal\":15")) << exit_text;
  l.socket.reset();
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
}

// libuv keeps one descriptor per loop (for EMFILE), opened with its first
// stream: opened here first, so that tests counting descriptors or filling
// them up see only the replica's.
void InitLoopWithItsSpareDescriptor(uv_loop_t* loop) {
  uv_loop_init(loop);
  uv_pipe_t first;
  uv_pipe_init(loop, &first, 0);
  uv_close(reinterpret_cast<uv_handle_t*>(&first), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);
}

TEST(ShimLauncherTest, ALauncherThatDiedIsReplacedAndShimsAreExecdMeanwhile) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    uv_update_time(&loop);
    auto constructed = std::chrono::steady_clock::now();
    ShimLauncher launcher(&loop, TORCHXD_SHIM, true);
    std::string first = launcher.Describe();
    ASSERT_THAT(first, StartsWith("forked by the launcher (pid "));
    pid_t pid = LauncherPid(first);
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ASSERT_TRUE(RunUntil(&loop, [&] { return launcher.Describe() != first; })) << launcher.Describe();
    EXPECT_THAT(launcher.Describe(), HasSubstr("posix_spawn of torchxd-shim (the launcher (pid "));
    // Its socket's end may be seen a loop turn before its exit: reaped then (a zombie
    // still answers kill 0; only a reaped pid is gone).
    EXPECT_TRUE(RunUntil(&loop, [&] { return ::kill(pid, 0) == -1 && errno == ESRCH; })) << "the dead launcher was reaped";
    auto [ours, theirs] = ControlSockets();
    uv_update_time(&loop);
    // Within a second of the last start: no new launcher yet, the caller execs the shim
    // (checked when this machine got here in time).
    if (std::chrono::steady_clock::now() - constructed < std::chrono::milliseconds(900)) {
      EXPECT_FALSE(launcher.Launch(UniqueFd(::dup(theirs.get())), UniqueFd(), UniqueFd(), [](auto) { ADD_FAILURE(); }).has_value());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    uv_update_time(&loop);
    std::optional<Result<ShimLauncher::Launched>> launched;
    auto queued = launcher.Launch(std::move(theirs), UniqueFd(), UniqueFd(), [&](auto r) { launched.emplace(std::move(r)); });
    ASSERT_TRUE(queued.has_value()) << queued.error().message;
    EXPECT_FALSE(launched.has_value()) << "answered on a later loop turn, never within Launch";
    ASSERT_TRUE(RunUntil(&loop, [&] { return launched.has_value(); }));
    ASSERT_TRUE(launched->has_value()) << launched->error().message;
    EXPECT_THAT(launcher.Describe(), StartsWith("forked by the launcher (pid "));
    EXPECT_NE(launcher.Describe(), first);
    std::string text = EncodeShimSpec(TrueSpec());
    ASSERT_EQ(::write(ours.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
    EXPECT_THAT(ReadUntilClosed(ours.get()), HasSubstr("exited 7"));
  }
  {
    ShimLauncher off(&loop, TORCHXD_SHIM, false);
    EXPECT_EQ(off.Describe(), "posix_spawn of torchxd-shim (--no-launcher)");
    EXPECT_FALSE(off.Launch(UniqueFd(), UniqueFd(), UniqueFd(), [](auto) { ADD_FAILURE(); }).has_value());
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// Launches queued together are answered in order, each a working shim; a
// launcher that stops answering (stopped here) is killed after 2 s and every
// launch still queued fails, saying why, so that its caller execs the shim.
TEST(ShimLauncherTest, QueuedLaunchesAreAnsweredInOrderAndAStalledLauncherFailsThemAll) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    ShimLauncher launcher(&loop, TORCHXD_SHIM, true);
    ASSERT_THAT(launcher.Describe(), StartsWith("forked by the launcher (pid "));
    constexpr int kShims = 20;
    std::vector<UniqueFd> ours;
    std::vector<int> order;
    std::vector<pid_t> pids;
    for (int i = 0; i < kShims; ++i) {
      auto [mine, theirs] = ControlSockets();
      ours.push_back(std::move(mine));
      auto queued = launcher.Launch(std::move(theirs), UniqueFd(), UniqueFd(), [&, i](auto r) {
        order.push_back(i);
        if (r) pids.push_back(r->pid);
      });
      ASSERT_TRUE(queued.has_value()) << queued.error().message;
    }
    ASSERT_TRUE(RunUntil(&loop, [&] { return order.size() == kShims; })) << order.size();
    std::vector<int> expected(kShims);
    for (int i = 0; i < kShims; ++i) expected[static_cast<size_t>(i)] = i;
    EXPECT_EQ(order, expected);
    EXPECT_EQ(pids.size(), static_cast<size_t>(kShims));
    std::string text = EncodeShimSpec(TrueSpec());
    for (auto& fd : ours) {
      ASSERT_EQ(::write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
      EXPECT_THAT(ReadUntilClosed(fd.get()), HasSubstr("exited 7"));
    }

    pid_t pid = LauncherPid(launcher.Describe());
    ASSERT_GT(pid, 0) << launcher.Describe();
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    std::vector<std::string> errors;
    for (int i = 0; i < 3; ++i) {
      auto [mine, theirs] = ControlSockets();
      auto queued = launcher.Launch(std::move(theirs), UniqueFd(), UniqueFd(), [&](auto r) {
        errors.push_back(r ? "forked" : r.error().message);
      });
      ASSERT_TRUE(queued.has_value()) << queued.error().message;
    }
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(RunUntil(&loop, [&] { return errors.size() == 3; })) << errors.size();
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1900));
    EXPECT_THAT(errors, ::testing::Each(std::string("the launcher did not answer within 2 s")));
    EXPECT_THAT(launcher.Describe(), HasSubstr("posix_spawn of torchxd-shim (the launcher did not answer within 2 s)"));
    // Killed and reaped (a zombie could still be signaled).
    EXPECT_TRUE(RunUntil(&loop, [&] { return ::kill(pid, 0) == -1 && errno == ESRCH; })) << "the stalled launcher lives";
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// The spec goes with the launch: the shim starts its replica as soon as the
// launcher has forked it, not once the loop has taken the launcher's answer
// (the loop does not run here until the replica has). A spec larger than the
// control socket holds sends its rest once the answer is in.
TEST(ShimLauncherTest, AShimStartsItsReplicaBeforeTheLoopTakesTheLaunchersAnswer) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    ShimLauncher launcher(&loop, TORCHXD_SHIM, true);
    ASSERT_THAT(launcher.Describe(), StartsWith("forked by the launcher (pid "));
    for (size_t padding : {size_t{0}, size_t{12}}) {  // 12 variables of 100 KB: more than a socket holds
      SCOPED_TRACE(padding);
      auto marker = std::filesystem::temp_directory_path() / ("launch-early-" + std::to_string(::getpid()));
      std::filesystem::remove(marker);
      ShimSpec spec = TrueSpec();
      spec.argv = {"/bin/sh", "-c", "echo ran > " + marker.string()};
      for (size_t i = 0; i < padding; ++i) spec.env.push_back("PAD" + std::to_string(i) + "=" + std::string(100000, 'x'));
      std::optional<ReplicaExit> exit;
      ReplicaCallbacks callbacks;
      callbacks.on_exit = [&](const ReplicaExit& e) { exit = e; };
      auto replica = ReplicaProcess::Start(&loop, TORCHXD_SHIM, spec, MonitorRecord{}, callbacks, {}, nullptr, {},
                                           &launcher);
      if (padding == 0) {
        // All of it is in the socket: the replica runs with the loop idle.
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!std::filesystem::exists(marker) && std::chrono::steady_clock::now() < end) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        EXPECT_TRUE(std::filesystem::exists(marker)) << "the replica waited for the loop";
      }
      ASSERT_TRUE(RunUntil(&loop, [&] { return exit.has_value(); }));
      EXPECT_FALSE(exit->spawn_failed) << exit->message;
      EXPECT_EQ(exit->exit_code, 0);
      EXPECT_TRUE(std::filesystem::exists(marker));
      std::filesystem::remove(marker);
    }
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// A replica asked to stop, or to be killed, while its shim's launch waits
// for the launcher's answer: the stop reaches it once the answer is in (it
// ends by the signal, not by its own end 30 s later); one destroyed
// meanwhile leaves no callback behind, and the shim forked for it, which had
// its spec with the launch, is left alone as a running one is: its replica
// runs to its own end.
TEST(ShimLauncherTest, AStopOrKillWhileTheLaunchIsQueuedReachesTheReplica) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    ShimLauncher launcher(&loop, TORCHXD_SHIM, true);
    ASSERT_THAT(launcher.Describe(), StartsWith("forked by the launcher (pid "));
    ShimSpec spec = TrueSpec();
    spec.argv = {"/bin/sleep", "30"};
    std::vector<std::optional<ReplicaExit>> exits(2);
    std::vector<std::unique_ptr<ReplicaProcess>> replicas;
    for (size_t i = 0; i < exits.size(); ++i) {
      ReplicaCallbacks callbacks;
      callbacks.on_exit = [&exits, i](const ReplicaExit& e) { exits[i] = e; };
      replicas.push_back(ReplicaProcess::Start(&loop, TORCHXD_SHIM, spec, MonitorRecord{}, callbacks, {}, nullptr, {},
                                               &launcher));
    }
    replicas[0]->Terminate(0.5);
    replicas[1]->Kill();
    auto marker = std::filesystem::temp_directory_path() / ("launch-destroyed-" + std::to_string(::getpid()));
    std::filesystem::remove(marker);
    {
      ReplicaCallbacks callbacks;
      callbacks.on_exit = [](const ReplicaExit&) { ADD_FAILURE() << "a destroyed replica's callback ran"; };
      ShimSpec left = TrueSpec();
      left.argv = {"/bin/sh", "-c", "sleep 0.2; echo ran > " + marker.string()};
      auto gone = ReplicaProcess::Start(&loop, TORCHXD_SHIM, left, MonitorRecord{}, callbacks, {}, nullptr, {}, &launcher);
    }
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(RunUntil(&loop, [&] { return exits[0] && exits[1]; }));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
    for (const auto& e : exits) {
      EXPECT_FALSE(e->spawn_failed) << e->message;
      EXPECT_TRUE(e->signal.has_value()) << "ended by a stop, not by itself";
    }
    // The third shim ran its replica to its end, and ended (the launcher reaps it).
    EXPECT_TRUE(RunUntil(&loop, [&] { return std::filesystem::exists(marker); })) << "the left replica did not run";
    std::filesystem::remove(marker);
    std::string pid = std::to_string(LauncherPid(launcher.Describe()));
    std::string children = "/proc/" + pid + "/task/" + pid + "/children";
    EXPECT_TRUE(RunUntil(&loop, [&] {
      std::ifstream in(children);
      std::string any;
      return bool(in) && !(in >> any);
    })) << "the launcher still has a child";
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// A replica whose launch fails (the launcher stopped answering) is started
// with posix_spawn instead and runs to its own end; the control socket handed
// to the failed launch is not kept.
TEST(ShimLauncherTest, AReplicaWhoseLaunchFailsIsSpawnedHereAndRuns) {
  auto open_fds = [] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  uv_loop_t loop;
  InitLoopWithItsSpareDescriptor(&loop);
  size_t fds_before = 0;
  {
    ShimLauncher launcher(&loop, TORCHXD_SHIM, true);
    pid_t pid = LauncherPid(launcher.Describe());
    ASSERT_GT(pid, 0) << launcher.Describe();
    fds_before = open_fds();
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    std::optional<ReplicaExit> exit;
    ReplicaCallbacks callbacks;
    callbacks.on_exit = [&](const ReplicaExit& e) { exit = e; };
    auto replica = ReplicaProcess::Start(&loop, TORCHXD_SHIM, TrueSpec(), MonitorRecord{}, callbacks, {}, nullptr, {},
                                         &launcher);
    ASSERT_TRUE(RunUntil(&loop, [&] { return exit.has_value(); }));
    EXPECT_FALSE(exit->spawn_failed) << exit->message;
    EXPECT_EQ(exit->exit_code, 7);
    EXPECT_THAT(launcher.Describe(), HasSubstr("the launcher did not answer within 2 s"));
    // The retired launcher's socket and, once it is reaped, its pidfd are closed; nothing else of it is left.
    ASSERT_TRUE(RunUntil(&loop, [&] { return ::kill(pid, 0) == -1 && errno == ESRCH; }));
    // The replica, ended but not destroyed, holds its own control socket and nothing of the failed launch.
    EXPECT_EQ(open_fds(), fds_before - 2 + 1) << "a descriptor of the failed launch is kept";
    replica.reset();
    uv_run(&loop, UV_RUN_NOWAIT);
    EXPECT_EQ(open_fds(), fds_before - 2);
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// While the process is at its descriptor limit. The limit applies to numbers:
// every free number below the highest open one is taken, and the limit is
// set just above it, so the next descriptor this process is given fails with
// EMFILE, as a received one is dropped.
class OutOfDescriptors {
 public:
  OutOfDescriptors() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    int highest = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      highest = std::max(highest, std::stoi(e.path().filename().string()));
    }
    struct rlimit low = saved_;
    low.rlim_cur = static_cast<rlim_t>(highest) + 1;
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers_.emplace_back(fd);
    EXPECT_EQ(errno, EMFILE);
  }
  ~OutOfDescriptors() { Release(); }
  void Release() {
    fillers_.clear();
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }

 private:
  struct rlimit saved_ {};
  std::vector<UniqueFd> fillers_;
};

// The launcher forked the shim, but the daemon had no room for the pidfd in
// its answer (the kernel dropped it): the launcher is not blamed, and the
// shim, which had its spec and runs, is followed by its control socket: the
// replica's exit is its own, and a kill reaches it.
TEST(ShimLauncherTest, AShimWhosePidfdTheDaemonHadNoRoomForIsFollowedByItsControlSocket) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the sanitizer runtimes need descriptors of their own for their checks (a pipe to probe memory)";
#endif
  uv_loop_t loop;
  InitLoopWithItsSpareDescriptor(&loop);
  {
    ShimLauncher launcher(&loop, TORCHXD_SHIM, true);
    std::string described = launcher.Describe();
    ASSERT_GT(LauncherPid(described), 0) << described;
    for (bool kill : {false, true}) {
      SCOPED_TRACE(kill ? "killed" : "to its end");
      ShimSpec spec = TrueSpec();
      if (kill) spec.argv = {"/bin/sleep", "30"};
      std::optional<ReplicaExit> exit;
      int started = 0;
      ReplicaCallbacks callbacks;
      callbacks.on_exit = [&](const ReplicaExit& e) { exit = e; };
      callbacks.on_started = [&](int pid) { started = pid; };
      auto replica = ReplicaProcess::Start(&loop, TORCHXD_SHIM, spec, MonitorRecord{}, callbacks, {}, nullptr, {},
                                           &launcher);
      OutOfDescriptors full;
      if (kill) {
        ASSERT_TRUE(RunUntil(&loop, [&] { return started > 0; }));
        replica->Kill();
      }
      auto start = std::chrono::steady_clock::now();
      ASSERT_TRUE(RunUntil(&loop, [&] { return exit.has_value(); }));
      full.Release();
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
      EXPECT_FALSE(exit->spawn_failed) << exit->message;
      if (kill) {
        EXPECT_EQ(exit->signal, SIGKILL);
        EXPECT_EQ(::kill(started, 0), -1) << "the replica outlived its kill";
      } else {
        EXPECT_EQ(exit->exit_code, 7);
      }
      EXPECT_EQ(launcher.Describe(), described) << "the launcher was retired";
    }
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace torchxd::supervisor
