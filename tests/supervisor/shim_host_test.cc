// A host (shim_host.h): one torchxd-shim forked by the launcher for a batch
// of attempts ('B'), each monitored as a shim of its own would be: its
// replica in its own group, its logs, its exit record and its control
// socket; a stop kills one attempt's group and nothing of the others; it runs
// nothing for another user, nor for an attempt whose socket a restarted
// daemon claimed; and the launcher refuses every batch not shaped as the daemon's.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "supervisor/launch_protocol.h"
#include "supervisor/shim_files.h"
#include "supervisor/shim_protocol.h"
#include "tests/supervisor/launcher_harness.h"

namespace torchxd::supervisor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The process's group in the v2 hierarchy, as /proc/PID/cgroup or a copy of it says ("0::/x").
std::string V2Line(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::", 0) == 0) return line;
  }
  return "";
}

bool Populated(const std::string& group) { return Slurp(group + "/cgroup.events").find("populated 1") != std::string::npos; }

// A batch's parts: under a test group of its own, `h` for the host and
// `a<i>` for each attempt, with a run directory and a control socket each.
struct Batch {
  explicit Batch(const std::string& root_group, int n) : root(root_group), dirs(static_cast<size_t>(n)) {
    host = root + "/h";
    ::mkdir(host.c_str(), 0755);
    host_fd.reset(::open(host.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
    for (int i = 0; i < n; ++i) {
      groups.push_back(root + "/a" + std::to_string(i));
      ::mkdir(groups.back().c_str(), 0755);
      group_fds.emplace_back(::open(groups.back().c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
      auto [mine, theirs_one] = ControlSockets();
      ours.push_back(std::move(mine));
      theirs.push_back(std::move(theirs_one));
    }
  }
  ~Batch() {
    for (const auto& g : groups) Remove(g);
    Remove(host);
    Remove(root);
  }
  static void Remove(const std::string& group) {
    for (int i = 0; i < 500 && ::rmdir(group.c_str()) != 0 && errno == EBUSY; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void Send(int i, const ShimSpec& spec) {
    std::string text = EncodeShimSpec(spec);
    ASSERT_EQ(::write(ours[static_cast<size_t>(i)].get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  std::vector<int> Fds() const {
    std::vector<int> fds = {host_fd.get()};
    for (size_t i = 0; i < theirs.size(); ++i) fds.insert(fds.end(), {theirs[i].get(), dirs[i].fd.get(), group_fds[i].get()});
    return fds;
  }
  std::string root, host;
  UniqueFd host_fd;
  std::vector<RunDir> dirs;
  std::vector<std::string> groups;
  std::vector<UniqueFd> group_fds, ours, theirs;
};

// Where the test may make groups; "" (skipped, saying why) where it may not.
std::string TestGroup(std::string& why) { return MakeTestGroup(why); }

TEST(ShimHostTest, AHostRunsEachAttemptInItsOwnGroupWithItsOwnLogsAndExitRecord) {
  for (bool gated : {false, true}) {
    SCOPED_TRACE(gated ? "gated fork" : "clone3");
    std::string why;
    std::string root = TestGroup(why);
    if (root.empty()) GTEST_SKIP() << why;
    constexpr int kAttempts = 3;
    Batch b(root, kAttempts);
    Launcher l = StartLauncher(gated);
    auto tmp = std::filesystem::temp_directory_path() / ("host-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(tmp);
    for (int i = 0; i < kAttempts; ++i) {
      ShimSpec spec = TrueSpec();
      std::string n = std::to_string(i);
      spec.argv = {"/bin/sh", "-c",
                   "cat /proc/self/cgroup > " + (tmp / ("cg" + n)).string() + "; echo out-" + n + "; echo err-" + n +
                       " >&2; exit 1" + n};
      spec.log_dir = (tmp / ("logs" + n)).string();
      spec.attempt = i + 1;
      b.Send(i, spec);  // before the request, as the daemon writes it
    }
    UniqueFd pidfd;
    LaunchReply r = Ask(l.socket.get(), "B", b.Fds(), &pidfd);
    ASSERT_GT(r.pid, 0) << strerror(r.error);
    EXPECT_EQ(r.in_group, 1);
    b.theirs.clear();
    std::string root_name = root.substr(root.rfind('/'));
    for (int i = 0; i < kAttempts; ++i) {
      std::string n = std::to_string(i);
      std::string said = ReadUntilClosed(b.ours[static_cast<size_t>(i)].get());
      EXPECT_THAT(said, HasSubstr("started ")) << i;
      EXPECT_THAT(said, HasSubstr("exited 1" + n)) << i;
      EXPECT_EQ(V2Line(Slurp((tmp / ("cg" + n)).string())), "0::" + root_name + "/a" + n)
          << "the replica entered its attempt's group before it ran";
      EXPECT_THAT(Slurp((tmp / ("logs" + n) / "stdout.log").string()), HasSubstr("out-" + n));
      EXPECT_THAT(Slurp((tmp / ("logs" + n) / "stderr.log").string()), HasSubstr("err-" + n));
      EXPECT_THAT(Slurp((tmp / ("logs" + n) / "stdout.log").string()), Not(HasSubstr("out-" + std::to_string((i + 1) % kAttempts))));
      auto exit = ReadShimFile(b.dirs[static_cast<size_t>(i)].fd.get(), kShimExitFile);
      ASSERT_TRUE(exit.has_value()) << i;
      auto decoded = DecodeShimExit(*exit);
      ASSERT_TRUE(decoded.has_value());
      EXPECT_EQ(decoded->exit_code, 10 + i);
      EXPECT_EQ(decoded->attempt, i + 1);
      auto state = ReadShimFile(b.dirs[static_cast<size_t>(i)].fd.get(), kShimStateFile);
      ASSERT_TRUE(state.has_value());
      auto st = DecodeShimState(*state);
      ASSERT_TRUE(st.has_value());
      EXPECT_TRUE(st->hosted);
      EXPECT_EQ(st->shim_pid, r.pid) << "one monitor for all";
    }
    struct pollfd p = {pidfd.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 5000), 1) << "the host ended after its last attempt";
    std::filesystem::remove_all(tmp);
    l.socket.reset();
    EXPECT_TRUE(ExitsWithin(l.pid, 5));
  }
}

TEST(ShimHostTest, AKillEndsOneAttemptsWholeGroupAndNothingOfTheOthers) {
  std::string why;
  std::string root = TestGroup(why);
  if (root.empty()) GTEST_SKIP() << why;
  Batch b(root, 2);
  Launcher l = StartLauncher();
  ShimSpec stubborn = TrueSpec();
  // A child in the background (orphaned to the host once sh dies) and TERM ignored.
  stubborn.argv = {"/bin/sh", "-c", "trap '' TERM; sleep 100 & sleep 100"};
  b.Send(0, stubborn);
  ShimSpec other = TrueSpec();
  other.argv = {"/bin/sh", "-c", "sleep 2; exit 3"};
  b.Send(1, other);
  UniqueFd pidfd;
  LaunchReply r = Ask(l.socket.get(), "B", b.Fds(), &pidfd);
  ASSERT_GT(r.pid, 0) << strerror(r.error);
  b.theirs.clear();
  for (int i = 0; i < 200 && (!Populated(b.groups[0]) || !Populated(b.groups[1])); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(Populated(b.groups[0]) && Populated(b.groups[1]));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the background sleep is running too
  const std::string kill = "kill\n";
  ASSERT_EQ(::write(b.ours[0].get(), kill.data(), kill.size()), static_cast<ssize_t>(kill.size()));
  std::string said = ReadUntilClosed(b.ours[0].get());
  EXPECT_THAT(said, HasSubstr("signaled 9"));
  EXPECT_FALSE(Populated(b.groups[0])) << "nothing of the killed attempt is left, its orphan neither";
  EXPECT_TRUE(Populated(b.groups[1])) << "the other attempt runs on";
  struct pollfd p = {pidfd.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "the host lives on for the other attempt";
  EXPECT_THAT(ReadUntilClosed(b.ours[1].get()), HasSubstr("exited 3"));
  EXPECT_EQ(::poll(&p, 1, 5000), 1);
  l.socket.reset();
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
}

// The host's CPU ticks (user + system) so far, from /proc/PID/stat.
long CpuTicks(pid_t pid) {
  std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  long ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::atol(field.c_str());
  }
  return ticks;
}

// Replicas that run quietly cost their host nothing: it sleeps in epoll (a
// cgroup file it watched would poll ready for ever and spin it).
TEST(ShimHostTest, AHostOfQuietReplicasUsesNoCpu) {
  std::string why;
  std::string root = TestGroup(why);
  if (root.empty()) GTEST_SKIP() << why;
  Batch b(root, 2);
  Launcher l = StartLauncher();
  for (int i = 0; i < 2; ++i) {
    ShimSpec spec = TrueSpec();
    spec.argv = {"/bin/sleep", "3"};
    b.Send(i, spec);
  }
  LaunchReply r = Ask(l.socket.get(), "B", b.Fds());
  ASSERT_GT(r.pid, 0) << strerror(r.error);
  b.theirs.clear();
  for (int i = 0; i < 200 && (!Populated(b.groups[0]) || !Populated(b.groups[1])); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  long before = CpuTicks(r.pid);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_LE(CpuTicks(r.pid) - before, 2) << "the host spun while its replicas slept";
  const std::string kill = "kill\n";
  for (auto& ours : b.ours) ASSERT_EQ(::write(ours.get(), kill.data(), kill.size()), static_cast<ssize_t>(kill.size()));
  for (auto& ours : b.ours) EXPECT_THAT(ReadUntilClosed(ours.get()), HasSubstr("signaled 9"));
  l.socket.reset();
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
}

TEST(ShimHostTest, AHostRunsNothingForAnotherUserNorForAnAttemptWhoseSocketIsClaimed) {
  std::string why;
  std::string root = TestGroup(why);
  if (root.empty()) GTEST_SKIP() << why;
  Batch b(root, 3);
  Launcher l = StartLauncher();
  auto tmp = std::filesystem::temp_directory_path() / ("host-claim-" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  auto marker = [&](int i) { return (tmp / ("ran" + std::to_string(i))).string(); };
  for (int i = 0; i < 3; ++i) {
    ShimSpec spec = TrueSpec();
    spec.argv = {"/bin/sh", "-c", "touch " + marker(i)};
    if (i == 0) {  // a forged spec naming another user: a host never changes its credentials
      spec.credentials.uid = ::geteuid() == 0 ? 65534 : 0;
      spec.credentials.gid = spec.credentials.uid;
    }
    b.Send(i, spec);
  }
  // A restarted daemon found nothing of attempt 1 and claimed its socket to start it again.
  UniqueFd claim(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", b.dirs[1].path.c_str(), kShimSocket);
  ASSERT_EQ(::bind(claim.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  UniqueFd pidfd;
  LaunchReply r = Ask(l.socket.get(), "B", b.Fds(), &pidfd);
  ASSERT_GT(r.pid, 0) << strerror(r.error);
  b.theirs.clear();
  std::string said0 = ReadUntilClosed(b.ours[0].get());
  EXPECT_THAT(said0, HasSubstr("spawn-failed " + std::to_string(EPERM)));
  EXPECT_THAT(said0, HasSubstr("runs only its own user's"));
  EXPECT_EQ(ReadUntilClosed(b.ours[1].get()), "") << "a claimed attempt is neither run nor told";
  EXPECT_FALSE(ReadShimFile(b.dirs[1].fd.get(), kShimExitFile).has_value());
  EXPECT_THAT(ReadUntilClosed(b.ours[2].get()), HasSubstr("exited 0"));
  EXPECT_FALSE(std::filesystem::exists(marker(0)));
  EXPECT_FALSE(std::filesystem::exists(marker(1)));
  EXPECT_TRUE(std::filesystem::exists(marker(2)));
  std::filesystem::remove_all(tmp);
  l.socket.reset();
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
}

TEST(ShimHostTest, BatchesNotShapedAsTheDaemonsAreRefused) {
  std::string why;
  std::string root = TestGroup(why);
  if (root.empty()) GTEST_SKIP() << why;
  Batch b(root, 2);
  Launcher l = StartLauncher();
  RunDir plain;
  int host = b.host_fd.get(), sock = b.theirs[0].get(), dir = b.dirs[0].fd.get(), group = b.group_fds[0].get();
  struct Case {
    const char* name;
    std::vector<int> fds;
  };
  const Case forged[] = {
      {"a host group alone", {host}},
      {"no host group", {sock, dir, group}},
      {"a plain directory as the host's group", {plain.fd.get(), sock, dir, group}},
      {"an attempt without its group", {host, sock, dir}},
      {"an attempt's group a plain directory", {host, sock, dir, plain.fd.get()}},
      {"a directory as an attempt's control socket", {host, dir, dir, group}},
      {"a group as an attempt's run directory", {host, sock, group, group}},
      {"one attempt and a part", {host, sock, dir, group, sock}},
  };
  for (const auto& c : forged) {
    LaunchReply r = Ask(l.socket.get(), "B", c.fds);
    EXPECT_EQ(r.pid, -1) << c.name;
    EXPECT_EQ(r.error, EINVAL) << c.name;
  }
  // More attempts than a batch holds are cut by the kernel or refused.
  {
    std::vector<int> many = {host};
    for (size_t i = 0; i <= kMaxHostedAttempts; ++i) many.insert(many.end(), {sock, dir, group});
    EXPECT_NE(SendWithFds(l.socket.get(), "B", 1, many.data(), many.size()), 0) << "the sender refuses more";
  }
  // Still serving.
  b.Send(0, TrueSpec());
  b.Send(1, TrueSpec());
  LaunchReply r = Ask(l.socket.get(), "B", b.Fds());
  ASSERT_GT(r.pid, 0) << strerror(r.error);
  b.theirs.clear();
  EXPECT_THAT(ReadUntilClosed(b.ours[0].get()), HasSubstr("exited 7"));
  EXPECT_THAT(ReadUntilClosed(b.ours[1].get()), HasSubstr("exited 7"));
  l.socket.reset();
  EXPECT_TRUE(ExitsWithin(l.pid, 5));
}

}  // namespace
}  // namespace torchxd::supervisor
