#include "tests/daemon/daemon_fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace torchxd::testing {

void DaemonFixture::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  // Short: a Unix socket path must fit in 108 bytes.
  static int counter = 0;
  dir_ = fs::temp_directory_path() / ("txd_" + std::to_string(::getpid()) + "_" + std::to_string(++counter));
  (void)info;
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  socket_ = (dir_ / "run" / "torchxd.sock").string();
  state_dir_ = (dir_ / "state").string();
  daemon_log_ = (dir_ / "daemon.log").string();
}

void DaemonFixture::TearDown() {
  if (daemon_pid_ > 0) StopDaemon(SIGTERM);
  KillLeftoverShims();
  std::string log = ReadFile(daemon_log_);
  if (HasFailure()) {
    std::cerr << "---- torchxd log ----\n" << log << "---------------------\n";
  }
  RemoveCgroupsLeftIn(log);
  // A test that mounted a small file system under the directory (in its
  // own mount namespace) leaves it mounted: unmount it, or the tree stays.
  std::ifstream mounts("/proc/self/mountinfo");
  std::vector<std::string> under;
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    if (point.rfind(dir_.string() + "/", 0) == 0) under.push_back(point);
  }
  for (auto it = under.rbegin(); it != under.rend(); ++it) (void)::umount2(it->c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

pid_t DaemonFixture::ForkDaemon(std::vector<std::string> args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a test process that dies takes its daemon along
    if (daemon_nofile_ > 0) {
      struct rlimit limit = {daemon_nofile_, daemon_nofile_};
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
    int fd = ::open(daemon_log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

void DaemonFixture::StartDaemon(const std::vector<std::string>& extra_args) {
  // The run dir explicitly: where the default puts it depends on the socket's filesystem.
  std::vector<std::string> args = {daemon_bin_, "--socket", socket_, "--state-dir", state_dir_,
                                   "--run-dir", state_dir_ + "/shims", "--grace-period", "0.5",
                                   "--log-level", "debug"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  daemon_pid_ = ForkDaemon(args);
  bool up = WaitUntil([&] {
    int status;
    if (::waitpid(daemon_pid_, &status, WNOHANG) == daemon_pid_) {
      daemon_pid_ = -1;
      return true;
    }
    // This daemon answering, not a socket a killed one left open in a child for a moment.
    auto client = DaemonClient::Connect(socket_);
    if (!client) return false;
    timeval tv{1, 0};
    ::setsockopt(client->fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    auto version = client->Call("version", json::object());
    return version.has_value() && version->value("pid", -1) == daemon_pid_;
  });
  ASSERT_TRUE(up && daemon_pid_ > 0) << "torchxd did not come up:\n" << ReadFile(daemon_log_);
}

std::vector<pid_t> DaemonFixture::ShimPids() {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(state_dir_ + "/shims", ec)) {
    std::string text = ReadFile(dir.path() / "state.json");
    size_t at = text.find("\"shim_pid\":");
    if (at == std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::atol(text.c_str() + at + 11));
    // Only a live torchxd-shim: never a stranger that reused the pid.
    if (pid > 0 && ReadFile("/proc/" + std::to_string(pid) + "/cmdline").find("torchxd-shim") != std::string::npos) {
      pids.push_back(pid);
    }
  }
  return pids;
}

void DaemonFixture::RemoveCgroupsLeftIn(const std::string& log) {
  // A daemon killed by a test (and not started again) leaves the cgroup
  // subtree it named in its log: its groups go once their processes have.
  constexpr std::string_view kSaid = "contained by cgroup v2 (";
  std::set<std::string> subtrees;
  for (size_t at = log.find(kSaid); at != std::string::npos; at = log.find(kSaid, at + 1)) {
    size_t start = at + kSaid.size();
    std::string path = log.substr(start, log.find_first_of(";)\n", start) - start);
    if (path.find("/torchxd-") != std::string::npos) subtrees.insert(path);
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (const auto& subtree : subtrees) {
    while (fs::exists(subtree)) {
      std::error_code ec;
      for (const auto& group : fs::directory_iterator(subtree, ec)) {
        if (group.is_directory()) ::rmdir(group.path().c_str());
      }
      if (::rmdir(subtree.c_str()) == 0 || std::chrono::steady_clock::now() > end) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

void DaemonFixture::KillLeftoverShims() {
  // Live-restore leaves replicas running by design; a test leaves none.
  for (pid_t pid : ShimPids()) ::kill(pid, SIGKILL);
}

int DaemonFixture::StopDaemon(int sig) {
  if (daemon_pid_ <= 0) return -1;
  ::kill(daemon_pid_, sig);
  int status = 0;
  ::waitpid(daemon_pid_, &status, 0);
  daemon_pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

UniqueFd DaemonFixture::Raw() {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

bool DaemonFixture::SendAll(int fd, std::string_view bytes) {
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

Result<json> DaemonFixture::Call(const std::string& method, const json& params) {
  auto client = DaemonClient::Connect(socket_);
  if (!client) return Fail(client.error());
  return client->Call(method, params);
}

json DaemonFixture::CallOk(const std::string& method, const json& params) {
  auto r = Call(method, params);
  EXPECT_TRUE(r.has_value()) << method << ": " << (r ? "" : r.error().message);
  return r ? *r : json();
}

std::string DaemonFixture::Run(const json& app, const json& cfg, const std::string& scheduler,
                               const std::string& cwd) {
  json env = json::object();
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  json result = CallOk("run", {{"app", app},
                               {"cfg", cfg},
                               {"scheduler", scheduler},
                               {"cwd", cwd.empty() ? dir_.string() : cwd},
                               {"env", env}});
  return result.value("app_handle", "");
}

json DaemonFixture::Wait(const std::string& handle) { return CallOk("wait", {{"app_handle", handle}}); }
json DaemonFixture::Status(const std::string& handle) { return CallOk("status", {{"app_handle", handle}}); }

json DaemonFixture::FakeRole(const std::string& name, const std::vector<std::string>& args,
                             int num_replicas) {
  return {{"name", name}, {"entrypoint", FAKE_JOB}, {"args", args}, {"num_replicas", num_replicas}};
}

json DaemonFixture::App(const std::string& name, const std::vector<json>& roles) {
  return {{"name", name}, {"roles", roles}};
}

std::string DaemonFixture::LogDirOf(const std::string& handle) {
  return state_dir_ + "/logs/torchx/" + handle.substr(handle.rfind('/') + 1);
}

std::string DaemonFixture::ReadLog(const std::string& handle, const std::string& role, int replica,
                                   const std::string& stream) {
  return ReadFile(LogDirOf(handle) + "/" + role + "/" + std::to_string(replica) + "/" + stream + ".log");
}

std::string DaemonFixture::ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<pid_t> DaemonFixture::ReadPids(const fs::path& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  for (pid_t p; in >> p;) pids.push_back(p);
  return pids;
}

bool DaemonFixture::ProcessGone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool DaemonFixture::WaitUntil(const std::function<bool()>& condition, double timeout_seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

const json& DaemonFixture::Replica(const json& status, const std::string& role, int id) {
  for (const auto& r : status["roles"]) {
    if (r["role"] != role) continue;
    for (const auto& rep : r["replicas"]) {
      if (rep["id"] == id) return rep;
    }
  }
  static const json kNull;
  ADD_FAILURE() << "no replica " << role << "/" << id << " in " << status.dump();
  return kNull;
}

}  // namespace torchxd::testing
