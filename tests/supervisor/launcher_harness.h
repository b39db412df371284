// What the launcher's and the host's tests share: the real static
// torchxd-shim in --launcher mode, asked over its socket as the daemon does.
#ifndef TORCHXD_TESTS_SUPERVISOR_LAUNCHER_HARNESS_H_
#define TORCHXD_TESTS_SUPERVISOR_LAUNCHER_HARNESS_H_

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <gmock/gmock.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/unique_fd.h"
#include "supervisor/launch_protocol.h"
#include "supervisor/shim_protocol.h"
#include "supervisor/shim_spawn.h"

namespace torchxd::supervisor {
namespace {

// A run directory of the test's own: a shim binds its socket `s` there, so tests
// that run at once (ctest -j) must not share one (/tmp/s was unlinked under one).
struct RunDir {
  RunDir() {
    char name[] = "/tmp/launcher-run-XXXXXX";
    if (::mkdtemp(name) != nullptr) path = name;
    fd.reset(::open(path.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  }
  ~RunDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  std::string path;
  UniqueFd fd;
};

struct Launcher {
  pid_t pid = -1;
  UniqueFd socket;
};

// Runs the loop until `done` or 5 s. The launcher's watches never keep a
// loop alive (a daemon's has its server): a timer does here.
template <class F>
bool RunUntil(uv_loop_t* loop, F done) {
  uv_timer_t alive;
  uv_timer_init(loop, &alive);
  uv_timer_start(&alive, [](uv_timer_t*) {}, 5, 5);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < end) uv_run(loop, UV_RUN_ONCE);
  uv_close(reinterpret_cast<uv_handle_t*>(&alive), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);
  return done();
}

// `gated`: the launcher forks as it does where clone3 cannot (--gated-fork).
inline Launcher StartLauncher(bool gated = false) {
  int pair[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd theirs(::fcntl(pair[1], F_DUPFD_CLOEXEC, 10));  // never the number it moves to
  ::close(pair[1]);
  Launcher l;
  std::vector<std::string> args = {kLauncherFlag, std::to_string(::getpid())};
  if (gated) args.push_back("--gated-fork");
  EXPECT_EQ(SpawnShim(TORCHXD_SHIM, args, {{theirs.get(), kLauncherFd}}, &l.pid), 0);
  l.socket.reset(pair[0]);
  return l;
}

inline LaunchReply Ask(int socket, const std::string& payload, std::vector<int> fds, UniqueFd* pidfd = nullptr) {
  EXPECT_EQ(SendWithFds(socket, payload.data(), payload.size(), fds.data(), fds.size()), 0);
  struct pollfd p = {socket, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 5000), 1) << "the launcher did not answer";
  LaunchReply reply;
  std::vector<UniqueFd> got;
  bool complete = false;
  EXPECT_EQ(RecvWithFds(socket, &reply, sizeof(reply), got, complete), static_cast<ssize_t>(sizeof(reply)));
  EXPECT_TRUE(complete);
  EXPECT_EQ(got.size(), reply.pid > 0 ? 1u : 0u);
  if (pidfd != nullptr && !got.empty()) *pidfd = std::move(got[0]);
  return reply;
}

// Whether `pid` (our child) exits within `seconds`; reaps it.
inline bool ExitsWithin(pid_t pid, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

inline std::string ReadUntilClosed(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

// A file's whole text ("" when it cannot be read).
inline std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A control socketpair: ours, then the shim's.
inline std::pair<UniqueFd, UniqueFd> ControlSockets() {
  int sockets[2] = {-1, -1};
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets), 0);
  return {UniqueFd(sockets[0]), UniqueFd(sockets[1])};
}

// The pid in "forked by the launcher (pid N)"; -1 when it says another thing.
inline pid_t LauncherPid(const std::string& described) {
  const std::string prefix = "forked by the launcher (pid ";
  if (described.rfind(prefix, 0) != 0) return -1;
  return static_cast<pid_t>(std::stoi(described.substr(prefix.size())));
}

inline ShimSpec TrueSpec() {
  ShimSpec spec;
  spec.cwd = "/";
  spec.argv = {"/bin/sh", "-c", "exit 7"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.credentials.uid = ::geteuid();
  spec.credentials.gid = ::getegid();
  return spec;
}

// Where this process may make a cgroup v2 group (root on a writable
// hierarchy): its path, else "" with why in `why`.
inline std::string MakeTestGroup(std::string& why) {
  std::ifstream in("/proc/self/mountinfo");
  std::string mount;
  for (std::string line; std::getline(in, line);) {
    size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, dev, root;
    fields >> id >> parent >> dev >> root >> mount;
    break;
  }
  if (mount.empty()) {
    why = "no cgroup v2 hierarchy is mounted";
    return "";
  }
  std::string group = mount + "/torchxd-launcher-test-" + std::to_string(::getpid());
  if (::mkdir(group.c_str(), 0755) != 0) {
    why = "cannot make " + group + ": " + strerror(errno);
    return "";
  }
  return group;
}

}  // namespace
}  // namespace torchxd::supervisor

#endif  // TORCHXD_TESTS_SUPERVISOR_LAUNCHER_HARNESS_H_
