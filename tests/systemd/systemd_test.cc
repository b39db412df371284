// systemd behaviour without systemd as PID 1: the units pass
// `systemd-analyze verify` (no output at all), and torchxd speaks the notify
// and socket-activation protocols under systemd-socket-activate.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/client.h"
#include "core/unique_fd.h"
#include "tests/cli/shell.h"

namespace torchxd::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

bool Have(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0; }

class SystemdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int n = 0;
    dir_ = fs::temp_directory_path() / ("txs_" + std::to_string(::getpid()) + "_" + std::to_string(++n));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A datagram socket standing in for systemd's NOTIFY_SOCKET.
  std::string ListenNotify() {
    notify_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    std::string path = (dir_ / "notify").string();
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(notify_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    timeval tv{0, 50000};
    ::setsockopt(notify_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return path;
  }
  // A connection to `socket`, tried every 10 ms for up to `seconds`: its file exists from bind(),
  // a moment before the daemon listens, and a connection is refused until then.
  static auto ConnectWithin(const std::string& socket, double seconds) {
    auto client = DaemonClient::Connect(socket);
    for (int i = 0; i < seconds * 100 && !client.has_value(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      client = DaemonClient::Connect(socket);
    }
    return client;
  }
  // Notify messages received within `seconds`.
  std::vector<std::string> Receive(double seconds) {
    std::vector<std::string> got;
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    char buf[4096];
    while (std::chrono::steady_clock::now() < end) {
      ssize_t n = ::recv(notify_.get(), buf, sizeof(buf), 0);
      if (n > 0) got.emplace_back(buf, static_cast<size_t>(n));
    }
    return got;
  }
  static int Count(const std::vector<std::string>& msgs, const std::string& needle) {
    int n = 0;
    for (const auto& m : msgs) n += m.find(needle) != std::string::npos;
    return n;
  }
  void Start(const std::vector<std::string>& argv) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
      int log = ::open((dir_ / "daemon.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(log, 1);
      ::dup2(log, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
  }

  std::string ReadLog() {
    std::ifstream in(dir_ / "daemon.log");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  fs::path dir_;
  UniqueFd notify_;
  pid_t pid_ = -1;
};

TEST_F(SystemdTest, UnitsVerifyWithoutAnyOutput) {
  if (!Have("systemd-analyze")) GTEST_SKIP() << "systemd-analyze is not installed";
  std::string units = std::string(UNITS_DIR);
  auto system = RunShell("cd " + Quote(units) + " && systemd-analyze verify --man=no ./torchxd.service ./torchxd.socket",
                         (dir_ / "err").string());
  EXPECT_EQ(system.exit_code, 0);
  EXPECT_EQ(system.err, "");
  EXPECT_EQ(system.out, "");
  fs::create_directories(dir_ / "xdg");
  auto user = RunShell("cd " + Quote(units) + " && XDG_RUNTIME_DIR=" + Quote((dir_ / "xdg").string()) +
                       " systemd-analyze --user verify --man=no ./torchxd-user.service",
                       (dir_ / "err").string());
  EXPECT_EQ(user.exit_code, 0);
  EXPECT_EQ(user.err, "");
  for (const char* unit : {"torchxd.service", "torchxd-user.service"}) {
    std::ifstream in(units + "/" + unit);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_THAT(text, HasSubstr("Type=notify"));
    // The system daemon keeps replicas across restarts; a user daemon stops them with itself.
    bool system = std::string(unit) == "torchxd.service";
    EXPECT_THAT(text, HasSubstr(system ? "KillMode=process" : "KillMode=mixed"));
    if (system) {
      EXPECT_THAT(text, HasSubstr("--live-restore"));
    }
    EXPECT_THAT(text, HasSubstr("RestartPreventExitStatus=2"));
  }
}

// Without a cgroup v2 group of its own a daemon holds replicas by process
// groups, which a process that calls setsid leaves: both units delegate one.
TEST_F(SystemdTest, BothUnitsDelegateACgroupToTheDaemon) {
  for (const char* unit : {"torchxd.service", "torchxd-user.service"}) {
    std::ifstream in(std::string(UNITS_DIR) + "/" + unit);
    ASSERT_TRUE(in.good()) << unit;
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_THAT(text, HasSubstr("\nDelegate=yes\n")) << unit;
  }
}

TEST_F(SystemdTest, SocketActivationNotifyWatchdogAndStopping) {
  if (!Have("systemd-socket-activate")) GTEST_SKIP() << "systemd-socket-activate is not installed";
  std::string notify = ListenNotify();
  std::string socket = (dir_ / "act.sock").string();
  Start({"systemd-socket-activate", "-l", socket, "-E", "NOTIFY_SOCKET=" + notify, "-E", "WATCHDOG_USEC=200000",
         TORCHXD_BIN, "--socket", socket, "--state-dir", (dir_ / "state").string()});
  // The first connection makes systemd-socket-activate exec torchxd with the
  // socket as fd 3. Its socket file exists from bind(), a moment before it
  // listens: a connection is refused until then.
  auto client = ConnectWithin(socket, 5);
  ASSERT_TRUE(client.has_value()) << client.error().message;
  auto version = client->Call("version", nlohmann::json::object());
  ASSERT_TRUE(version.has_value()) << version.error().message;
  auto msgs = Receive(1.0);
  EXPECT_EQ(Count(msgs, "READY=1"), 1);
  EXPECT_GE(Count(msgs, "WATCHDOG=1"), 3);
  EXPECT_GE(Count(msgs, "STATUS="), 1);
  std::string log = ReadLog();
  EXPECT_THAT(log, HasSubstr("(socket from systemd)"));
  // Replicas do not inherit the notify socket.
  auto run = client->Call("run", {{"app", {{"name", "env"}, {"roles", {{{"name", "r"}, {"entrypoint", "sh"},
                                   {"args", {"-c", "echo NS=${NOTIFY_SOCKET:-none} LF=${LISTEN_FDS:-none}"}}}}}}},
                                  {"cwd", dir_.string()}, {"env", {{"PATH", "/usr/bin:/bin"}}}});
  ASSERT_TRUE(run.has_value()) << run.error().message;
  auto waited = client->Call("wait", {{"app_handle", (*run)["app_handle"]}});
  ASSERT_TRUE(waited.has_value());
  std::string app_id = (*run)["app_id"];
  std::ifstream out(dir_ / "state/logs/torchx" / app_id / "r/0/stdout.log");
  std::string text((std::istreambuf_iterator<char>(out)), {});
  EXPECT_EQ(text, "NS=none LF=none\n");
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_GE(Count(Receive(0.2), "STOPPING=1"), 1);
  EXPECT_TRUE(fs::exists(socket));  // handed to us: never unlinked
}

TEST_F(SystemdTest, NoWatchdogTimerWithoutWatchdogUsec) {
  std::string notify = ListenNotify();
  std::string socket = (dir_ / "d.sock").string();
  ::setenv("NOTIFY_SOCKET", notify.c_str(), 1);
  Start({TORCHXD_BIN, "--socket", socket, "--state-dir", (dir_ / "state").string()});
  ::unsetenv("NOTIFY_SOCKET");
  // Answering first (a sanitizer build on a busy machine takes a while to start): READY=1 waits
  // in the notify socket, and a watchdog would have a second to show itself.
  auto client = ConnectWithin(socket, 10);
  ASSERT_TRUE(client.has_value()) << client.error().message;
  auto version = client->Call("version", nlohmann::json::object());
  ASSERT_TRUE(version.has_value()) << version.error().message;
  auto msgs = Receive(1.0);
  EXPECT_EQ(Count(msgs, "READY=1"), 1);
  EXPECT_EQ(Count(msgs, "WATCHDOG=1"), 0);
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  EXPECT_FALSE(fs::exists(socket));  // bound by torchxd itself: removed on exit
}

}  // namespace
}  // namespace torchxd::testing
