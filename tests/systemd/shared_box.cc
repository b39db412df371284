#include "tests/systemd/shared_box.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>

#include <nlohmann/json.hpp>

#include "core/client.h"

namespace torchxd::testing {
namespace {

namespace fs = std::filesystem;

bool HaveTool(const char* tool) {
  return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0;
}

// The machine's file without the lines naming our users and groups, or using their ids.
std::string Without(const fs::path& file, const std::set<std::string>& names, const std::set<std::string>& ids) {
  std::ifstream in(file);
  std::ostringstream out;
  for (std::string line; std::getline(in, line);) {
    size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    std::string id;
    if (colon != std::string::npos) {
      size_t second = line.find(':', colon + 1);
      size_t third = second == std::string::npos ? std::string::npos : line.find(':', second + 1);
      if (third != std::string::npos) id = line.substr(second + 1, third - second - 1);
    }
    if (names.count(name) || ids.count(id)) continue;
    out << line << "\n";
  }
  return out.str();
}

}  // namespace

SharedBox::SharedBox(fs::path dir) : dir_(std::move(dir)) {
  users_ = {{"alice", 5001, true}, {"bob", 5002, true}, {"carol", 5003, false}, {"dave", 5004, true},
            {"erin", 5005, true}};
}

SharedBox::~SharedBox() { Stop(5); }

::testing::AssertionResult SharedBox::MakeUsers() {
  fs::create_directories(dir_ / "home");
  fs::create_directories(dir_ / "run");
  for (fs::path p = dir_; p != p.parent_path() && p != "/tmp"; p = p.parent_path()) {
    fs::permissions(p, fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add);
  }
  std::set<std::string> names{"torchx", "torchxadm"}, ids{std::to_string(kTorchxGid), std::to_string(kAdminGid)};
  for (const auto& u : users_) {
    names.insert(u.name);
    ids.insert(std::to_string(u.uid));
  }
  std::string passwd = Without("/etc/passwd", names, ids), group = Without("/etc/group", names, ids);
  std::string members, admins = "dave";
  for (const auto& u : users_) {
    fs::create_directories(Home(u.name));
    if (::chown(Home(u.name).c_str(), u.uid, u.uid) != 0) return ::testing::AssertionFailure() << "chown home";
    passwd += u.name + ":x:" + std::to_string(u.uid) + ":" + std::to_string(u.uid) + "::" + Home(u.name).string() +
              ":/bin/sh\n";
    group += u.name + ":x:" + std::to_string(u.uid) + ":\n";
    if (u.member) members += (members.empty() ? "" : ",") + u.name;
  }
  group += "torchx:x:" + std::to_string(kTorchxGid) + ":" + members + "\n";
  group += "torchxadm:x:" + std::to_string(kAdminGid) + ":" + admins + "\n";
  std::ofstream(dir_ / "passwd") << passwd;
  std::ofstream(dir_ / "group") << group;
  fs::permissions(dir_ / "passwd", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                       fs::perms::others_read);
  fs::permissions(dir_ / "group", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                      fs::perms::others_read);
  std::string mount = "mount --bind " + Quote((dir_ / "passwd").string()) + " /etc/passwd && mount --bind " +
                      Quote((dir_ / "group").string()) + " /etc/group";
  if (std::system(mount.c_str()) != 0) return ::testing::AssertionFailure() << "cannot bind-mount " << mount;
  return ::testing::AssertionSuccess();
}

// Runs this (forked) process at `nice` as a service would: in a scheduling
// group of its own. Where the kernel groups tasks by session (autogroup),
// every replica's session weighs as much as the test's whole session, so a
// nice value alone would not rank this process above them: it leaves the
// test's session and gives its group the nice. For a freshly forked child.
static void RunAtNice(int nice) {
  ::setpriority(PRIO_PROCESS, 0, nice);
  if (nice == 0) return;
  ::setsid();
  int fd = ::open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;  // no autogroups in this kernel
  char text[16];
  int n = std::snprintf(text, sizeof text, "%d", nice);
  (void)!::write(fd, text, static_cast<size_t>(n));
  ::close(fd);
}

::testing::AssertionResult SharedBox::Start(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {TORCHXD_BIN,        "--system",          "--socket",    socket(),
                                   "--state-dir",      state().string(),    "--log-dir",   logs().string(),
                                   "--grace-period",   "0.5",               "--admin-group", "torchxadm"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::string log = (dir_ / "daemon.log").string();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a killed test takes its root daemon along
    RunAtNice(-5);  // as the system unit runs it (Nice=-5, in its own cgroup)
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  for (int i = 0; i < 1000; ++i) {
    if (DaemonClient::Connect(socket())) return ::testing::AssertionSuccess();
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return ::testing::AssertionFailure() << "torchxd exited: " << DaemonLog();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ::testing::AssertionFailure() << "torchxd does not answer: " << DaemonLog();
}

int SharedBox::Stop(double seconds) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

uid_t SharedBox::Uid(const std::string& user) const {
  for (const auto& u : users_) {
    if (u.name == user) return u.uid;
  }
  ADD_FAILURE() << "no user " << user;
  return 65534;
}

std::string SharedBox::UserPrefix(const std::string& user) const {
  std::string id = std::to_string(Uid(user));
  return "cd " + Quote(Home(user).string()) + " && setpriv --reuid=" + id + " --regid=" + id +
         " --init-groups env HOME=" + Quote(Home(user).string()) + " USER=" + user + " TORCHX_NO_AUTOSTART=1 ";
}

namespace {
std::string ErrFile(const fs::path& dir) {
  static std::atomic<int> n{0};
  return (dir / ("err." + std::to_string(++n))).string();
}
}  // namespace

Output SharedBox::As(const std::string& user, const std::string& args) const {
  return RunShell(UserPrefix(user) + TORCHX_BIN + " --socket " + Quote(socket()) + " " + args, ErrFile(dir_));
}

Output SharedBox::Sh(const std::string& user, const std::string& command) const {
  return RunShell(UserPrefix(user) + "sh -c " + Quote(command), ErrFile(dir_));
}

Output SharedBox::Root(const std::string& args) const {
  return RunShell(std::string(TORCHX_BIN) + " --socket " + Quote(socket()) + " " + args, ErrFile(dir_));
}

namespace {

// Drops to `uid` with its groups (from the box's /etc/group); false on failure.
bool BecomeUser(const std::string& name, uid_t uid) {
  return ::initgroups(name.c_str(), uid) == 0 && ::setresgid(uid, uid, uid) == 0 && ::setresuid(uid, uid, uid) == 0;
}

}  // namespace

SharedBox::Held SharedBox::Hold(const std::string& user, int connections) {
  int fds[2];
  Held held;
  if (::pipe2(fds, O_CLOEXEC) != 0) return held;
  uid_t uid = Uid(user);
  std::string sock = socket();
  held.pid = ::fork();
  if (held.pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(fds[0]);
    if (!BecomeUser(user, uid)) ::_exit(1);
    std::vector<DaemonClient> open;
    std::string refusal;
    for (int i = 0; i < connections; ++i) {
      auto client = DaemonClient::Connect(sock);
      if (!client) {
        if (refusal.empty()) refusal = client.error().message;
        continue;
      }
      auto answer = client->Call("version", nlohmann::json::object());
      if (answer) {
        open.push_back(std::move(*client));
      } else if (refusal.empty()) {
        refusal = answer.error().message;
      }
    }
    std::string report = std::to_string(open.size()) + "\n" + refusal + "\n";
    if (::write(fds[1], report.data(), report.size()) < 0) ::_exit(1);
    ::close(fds[1]);
    for (;;) ::pause();
  }
  ::close(fds[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) {
    report.append(buf, static_cast<size_t>(n));
    if (std::count(report.begin(), report.end(), '\n') >= 2) break;
  }
  ::close(fds[0]);
  size_t nl = report.find('\n');
  if (nl != std::string::npos) {
    held.accepted = std::atoi(report.substr(0, nl).c_str());
    held.refusal = report.substr(nl + 1, report.find('\n', nl + 1) - nl - 1);
  }
  return held;
}

void SharedBox::Release(Held& held) {
  if (held.pid <= 0) return;
  ::kill(held.pid, SIGKILL);
  ::waitpid(held.pid, nullptr, 0);
  held.pid = -1;
}

int SharedBox::AsUserProcess(const std::string& user, const std::function<int()>& fn, int nice) const {
  uid_t uid = Uid(user);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    RunAtNice(nice);
    if (!BecomeUser(user, uid)) ::_exit(126);
    ::_exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string SharedBox::ReadAll(const fs::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string SharedBox::DaemonLog() const {
  std::ifstream in(dir_ / "daemon.log");
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void RunSharedBoxTest(const std::string& name) {
  if (::geteuid() != 0 || !HaveTool("setpriv") || std::system("unshare -m true 2>/dev/null") != 0) {
    GTEST_SKIP() << "needs root, setpriv and unshare -m (users are simulated in a private mount namespace)";
  }
  static int n = 0;
  fs::path dir = fs::temp_directory_path() / ("txbox_" + std::to_string(::getpid()) + "_" + std::to_string(++n));
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  // The simulated users run the build's torchx: they must be able to reach it.
  auto reach = RunShell(std::string("setpriv --reuid=65534 --regid=65534 --clear-groups ") + TORCHX_BIN +
                            " --version",
                        (dir / "reach.err").string());
  if (reach.exit_code != 0) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    GTEST_SKIP() << "other users cannot run " << TORCHX_BIN << " (" << reach.err
                 << "): put the build tree where every user may traverse";
  }
  auto inner = RunShell("TORCHXD_SHARED_BOX_DIR=" + Quote(dir.string()) + " unshare -m --propagation private " +
                            Quote(fs::read_symlink("/proc/self/exe").string()) + " --gtest_filter=" +
                            Quote("SharedBoxInner.DISABLED_" + name) + " --gtest_also_run_disabled_tests",
                        (dir / "inner.err").string());
  EXPECT_EQ(inner.exit_code, 0) << inner.out << inner.err;
  EXPECT_THAT(inner.out, ::testing::HasSubstr("[  PASSED  ] 1 test"));
  // What the inner test measured, for the outer one's output.
  std::istringstream lines(inner.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("measured: ", 0) == 0) std::cout << line << "\n";
  }
  if (::testing::Test::HasFailure()) {
    std::ifstream in(dir / "daemon.log");
    std::string log((std::istreambuf_iterator<char>(in)), {});
    ADD_FAILURE() << "the daemon's log (" << (dir / "daemon.log").string() << "), its end:\n"
                  << log.substr(log.size() > 6000 ? log.size() - 6000 : 0);
  } else {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
}

}  // namespace torchxd::testing
