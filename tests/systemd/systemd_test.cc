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
#include "tests/daemon/http_get.h"

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

TEST_F(SystemdTest, SocketActivationNotifyWatchdogAndStopping) {
  if (!Have("systemd-socket-activate")) GTEST_SKIP() << "systemd-socket-activate is not installed";
  std::string notify = ListenNotify();
  std::string socket = (dir_ / "act.sock").string();
  Start({"systemd-socket-activate", "-l", socket, "-E", "NOTIFY_SOCKET=" + notify, "-E", "WATCHDOG_USEC=200000",
         TORCHXD_BIN, "--socket", socket, "--state-dir", (dir_ / "state").string()});
  // The first connection makes systemd-socket-activate exec torchxd with the
  // socket as fd 3. Its socket file exists from bind(), a moment before it
  // listens: a connection is refused until then.
  auto client = DaemonClient::Connect(socket);
  for (int i = 0; i < 500 && !client.has_value(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    client = DaemonClient::Connect(socket);
  }
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
  auto msgs = Receive(1.0);
  EXPECT_EQ(Count(msgs, "READY=1"), 1);
  EXPECT_EQ(Count(msgs, "WATCHDOG=1"), 0);
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  EXPECT_FALSE(fs::exists(socket));  // bound by torchxd itself: removed on exit
}

// Runs the MultiUserInner tests inside a private mount namespace.
TEST_F(SystemdTest, MultiUserIsolationOnTheSystemDaemon) {
  if (::geteuid() != 0 || !Have("setpriv") || std::system("unshare -m true 2>/dev/null") != 0) {
    GTEST_SKIP() << "needs root, setpriv and unshare -m (users are simulated in a private mount namespace)";
  }
  // The simulated users run the build's torchx: they must be able to reach it.
  auto reach = RunShell(std::string("setpriv --reuid=65534 --regid=65534 --clear-groups ") + TORCHX_BIN +
                            " --version",
                        (dir_ / "reach.err").string());
  if (reach.exit_code != 0) {
    GTEST_SKIP() << "other users cannot run " << TORCHX_BIN << " (" << reach.err
                 << "): put the build tree where every user may traverse";
  }
  auto inner = RunShell("TORCHXD_MULTIUSER_DIR=" + Quote(dir_.string()) + " unshare -m --propagation private " +
                            Quote(fs::read_symlink("/proc/self/exe").string()) +
                            " --gtest_filter='MultiUserInner.*' --gtest_also_run_disabled_tests",
                        (dir_ / "inner.err").string());
  EXPECT_EQ(inner.exit_code, 0) << inner.out << inner.err;
  EXPECT_THAT(inner.out, HasSubstr("[  PASSED  ] 1 test"));
}

// Only meaningful inside the namespace the test above makes.
TEST(MultiUserInner, DISABLED_UsersSeeAndActOnlyOnTheirOwnApps) {
  const char* base = std::getenv("TORCHXD_MULTIUSER_DIR");
  if (base == nullptr) GTEST_SKIP() << "run by SystemdTest.MultiUserIsolationOnTheSystemDaemon";
  fs::path t = fs::path(base) / "mu";
  fs::create_directories(t / "home");
  fs::permissions(base, fs::perms::all & ~fs::perms::others_write & ~fs::perms::group_write);
  fs::permissions(t, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                         fs::perms::others_read | fs::perms::others_exec);
  // A private /etc/passwd and /etc/group: the machine's files are never edited.
  fs::copy_file("/etc/passwd", t / "passwd");
  fs::copy_file("/etc/group", t / "group");
  {
    std::ofstream pw(t / "passwd", std::ios::app), gr(t / "group", std::ios::app);
    for (auto [name, id] : {std::pair{"alice", 5001}, {"bob", 5002}, {"carol", 5003}, {"dave", 5004}}) {
      fs::create_directories(t / "home" / name);
      ASSERT_EQ(::chown((t / "home" / name).c_str(), static_cast<uid_t>(id), static_cast<gid_t>(id)), 0);
      pw << name << ":x:" << id << ":" << id << "::" << (t / "home" / name).string() << ":/bin/sh\n";
      gr << name << ":x:" << id << ":\n";
    }
    gr << "torchx:x:5100:alice,bob,dave\n";
    gr << "torchxadm:x:5200:dave\n";
  }
  ASSERT_EQ(std::system(("mount --bind " + (t / "passwd").string() + " /etc/passwd && mount --bind " +
                         (t / "group").string() + " /etc/group").c_str()), 0);
  std::string sock = (t / "run" / "torchxd.sock").string();
  // Stopped however this test ends: a failed assertion must not leave a root daemon behind.
  struct Stopper {
    pid_t pid = -1;
    ~Stopper() {
      if (pid <= 0) return;
      ::kill(pid, SIGTERM);
      for (int i = 0; i < 200 && ::waitpid(pid, nullptr, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } stopper;
  pid_t daemon = ::fork();
  if (daemon == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a killed test takes its root daemon along
    int log = ::open((t / "daemon.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execl(TORCHXD_BIN, TORCHXD_BIN, "--system", "--socket", sock.c_str(), "--state-dir", (t / "state").c_str(),
            "--grace-period", "0.5", "--admin-group", "torchxadm", "--ui-listen", "127.0.0.1:0", nullptr);
    ::_exit(127);
  }
  stopper.pid = daemon;
  for (int i = 0; i < 500 && !DaemonClient::Connect(sock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto as = [&](const std::string& user, const std::string& args, bool member = true) {
    std::string id = user == "alice" ? "5001" : user == "bob" ? "5002" : user == "dave" ? "5004" : "5003";
    std::string groups = member ? "--init-groups" : "--clear-groups";
    return RunShell("cd " + Quote((t / "home" / user).string()) + " && setpriv --reuid=" + id + " --regid=" + id +
                        " " + groups + " env HOME=" + Quote((t / "home" / user).string()) +
                        " TORCHX_NO_AUTOSTART=1 " + TORCHX_BIN + " --socket " + Quote(sock) + " " + args,
                    (t / "err").string());
  };
  auto root = [&](const std::string& args) {
    return RunShell(std::string(TORCHX_BIN) + " --socket " + Quote(sock) + " " + args, (t / "err").string());
  };
  struct stat st;
  ASSERT_EQ(::stat(sock.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);  // group-accessible, never world-writable
  EXPECT_EQ(st.st_gid, 5100u);

  auto run = as("alice", "run --wait utils.sh -- sh -c 'echo uid=$(id -u) gid=$(id -g) user=$USER; sleep 0.1'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string h = run.out.substr(0, run.out.find('\n'));
  auto log = as("alice", "log " + h);
  EXPECT_EQ(log.out, "sh/0 uid=5001 gid=5001 user=alice\n");  // replicas run as the caller
  std::string app_id = h.substr(h.rfind('/') + 1);
  ASSERT_EQ(::stat((t / "state/logs/torchx" / app_id / "sh/0/stdout.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 5001u);  // its logs are its own

  auto bob_status = as("bob", "status " + h);
  EXPECT_EQ(bob_status.exit_code, 1);
  EXPECT_THAT(bob_status.err, HasSubstr("belongs to uid 5001; uid 5002 may not see it"));
  auto bob_cancel = as("bob", "cancel " + h);
  EXPECT_EQ(bob_cancel.exit_code, 1);
  EXPECT_THAT(bob_cancel.err, HasSubstr("may not cancel it"));
  EXPECT_THAT(as("bob", "log " + h).err, HasSubstr("may not read the logs of it"));
  EXPECT_THAT(as("bob", "delete " + h).err, HasSubstr("may not delete it"));
  EXPECT_EQ(as("bob", "list --json").out.find(app_id), std::string::npos);   // bob sees only his apps
  EXPECT_NE(as("alice", "list --json").out.find(app_id), std::string::npos);
  EXPECT_NE(root("list --json").out.find(app_id), std::string::npos);        // root sees all
  EXPECT_EQ(root("status " + h).exit_code, 0);
  EXPECT_THAT(as("bob", "daemon stop").err, HasSubstr("only root"));
  // The admin group acts on every app.
  EXPECT_NE(as("dave", "list --json").out.find(app_id), std::string::npos);
  EXPECT_EQ(as("dave", "status " + h).exit_code, 0);

  fs::create_directory_symlink("/etc", t / "home/alice/evil");
  auto evil = as("alice", "run -cfg log_dir=" + (t / "home/alice/evil").string() + " utils.echo");
  EXPECT_EQ(evil.exit_code, 2);
  EXPECT_THAT(evil.err, HasSubstr("is a symbolic link"));
  // A user-chosen log_dir is created as the caller: alice cannot make root write where she cannot.
  auto denied = as("alice", "run -cfg log_dir=/root/nope utils.echo");
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_FALSE(fs::exists("/root/nope"));

  // local_docker gives the engine's rights (root's, for dockerd): not for every user of the box.
  auto docker = as("alice", "run -s local_docker utils.echo");
  EXPECT_EQ(docker.exit_code, 1);
  EXPECT_THAT(docker.err, HasSubstr("only root and the admin group may use it"));

  auto carol = as("carol", "list", /*member=*/false);
  EXPECT_EQ(carol.exit_code, 3);  // outside group torchx: the socket refuses her
  EXPECT_THAT(carol.err, HasSubstr("Permission denied"));

  // A NUL smuggled into an argument once injected fields that made the shim
  // skip dropping to alice: refused at submit now, and nothing runs at all.
  std::ofstream(t / "home/alice/nul.json")
      << R"({"name": "nul", "roles": [{"name": "r", "entrypoint": "/bin/sh", "args": ["-c", "id -u > )"
      << (t / "home/alice/ran").string() << R"(\u00000\u00000"]}]})";
  ::chown((t / "home/alice/nul.json").c_str(), 5001, 5001);
  auto nul = as("alice", "run --wait ./nul.json");
  EXPECT_EQ(nul.exit_code, 2);
  EXPECT_THAT(nul.err, HasSubstr("roles[0].args[1]: must not contain a NUL character"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(fs::exists(t / "home/alice/ran")) << "something ran";

  // Her replica swaps its log file for a link to a file only root may read:
  // the daemon reads her logs with her rights, so she gets nothing of it.
  std::ofstream(t / "secret") << "root only\n";
  fs::permissions(t / "secret", fs::perms::owner_read | fs::perms::owner_write);
  auto linked = as("alice", "run --wait utils.sh -- sh -c 'ln -sf " + (t / "secret").string() +
                                " \"$(dirname $TORCHELASTIC_ERROR_FILE)/stderr.log\"'");
  ASSERT_EQ(linked.exit_code, 0) << linked.err;
  std::string lh = linked.out.substr(0, linked.out.find('\n'));
  auto leak = as("alice", "log --streams stderr " + lh);
  EXPECT_EQ(leak.out.find("root only"), std::string::npos) << leak.out;
  // Her logs are deleted with her rights: the link goes, its target stays.
  EXPECT_EQ(as("alice", "delete " + lh).exit_code, 0);
  std::string lid = lh.substr(lh.rfind('/') + 1);
  for (int i = 0; i < 200 && fs::exists(t / "state/logs/torchx" / (lid + ".evicted")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(fs::exists(t / "state/logs/torchx" / lid));
  EXPECT_FALSE(fs::exists(t / "state/logs/torchx" / (lid + ".evicted")));
  EXPECT_TRUE(fs::exists(t / "secret"));

  // The web page applies the same rules: a user's token is theirs alone.
  ASSERT_EQ(::stat((t / "run" / "ui.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, 5100u);
  auto sleeper = as("alice", "run -d utils.sh sleep 60");
  ASSERT_EQ(sleeper.exit_code, 0) << sleeper.err;
  std::string sh = sleeper.out.substr(0, sleeper.out.find('\n'));
  auto token_of = [&](const std::string& user) {
    auto ui = nlohmann::json::parse(as(user, "ui --json").out);
    return std::pair{ui["token"].get<std::string>(), std::stoi(ui["url"].get<std::string>().substr(17))};
  };
  auto [alice_token, port] = token_of("alice");
  auto [bob_token, bob_port] = token_of("bob");
  EXPECT_EQ(port, bob_port);
  EXPECT_NE(alice_token, bob_token);
  HttpTarget web{"", port};
  std::string host = "127.0.0.1:" + std::to_string(port);
  auto get = [&](const std::string& token, const std::string& path) {
    return HttpGet(web, path, {"Authorization: token " + token}, host);
  };
  auto cancel = [&](const std::string& token) {
    std::string csrf = nlohmann::json::parse(get(token, "/api/session").body)["csrf"].get<std::string>();
    return HttpExchangeRaw(web, "POST /api/cancel HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: token " + token +
                                    "\r\nX-Torchxd-Csrf: " + csrf + "\r\nContent-Type: application/json",
                           nlohmann::json{{"app_handle", sh}}.dump());
  };
  EXPECT_EQ(nlohmann::json::parse(get(alice_token, "/api/session").body)["user"], "alice");
  auto bob_sees = get(bob_token, "/api/status?app_handle=" + sh);
  EXPECT_EQ(bob_sees.status, 403);
  EXPECT_THAT(bob_sees.body, HasSubstr("may not see it"));
  EXPECT_EQ(get(bob_token, "/api/list").body.find(sh), std::string::npos);  // bob's list has only his apps
  auto bob_cancels = cancel(bob_token);
  EXPECT_EQ(bob_cancels.status, 403) << bob_cancels.body;
  EXPECT_THAT(as("alice", "status " + sh).out, HasSubstr("RUNNING"));
  auto alice_cancels = cancel(alice_token);
  EXPECT_EQ(alice_cancels.status, 200) << alice_cancels.body;
  EXPECT_THAT(alice_cancels.body, HasSubstr("CANCELLED"));
  EXPECT_EQ(as("carol", "ui --json", /*member=*/false).exit_code, 3);  // no socket, no token
}

}  // namespace
}  // namespace torchxd::testing
