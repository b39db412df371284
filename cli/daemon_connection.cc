#include "cli/daemon_connection.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/paths.h"

namespace torchxd::cli {
namespace {

namespace fs = std::filesystem;

std::string TorchxdBinary() {
  std::string beside = core::SelfExecutableDir() + "/torchxd";
  if (::access(beside.c_str(), X_OK) == 0) return beside;
  return "torchxd";  // from PATH
}

// Double fork + setsid: the daemon is nobody's child and holds none of our fds.
Result<void> SpawnDetached(const std::string& state_dir) {
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  std::string out = state_dir + "/torchxd.out";
  std::string binary = TorchxdBinary();
  pid_t first = ::fork();
  if (first < 0) return Fail(Error::Io("fork failed"));
  if (first == 0) {
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    int devnull = ::open("/dev/null", O_RDONLY);
    int log = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(devnull, 0);
    ::dup2(log >= 0 ? log : devnull, 1);
    ::dup2(log >= 0 ? log : devnull, 2);
    ::close_range(3, ~0U, 0);
    char* argv[] = {binary.data(), nullptr};
    ::execvp(argv[0], argv);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(first, &status, 0);
  return {};
}

// The first exchange: a daemon that refuses us (its connection limit, another
// uid's daemon) says why in its answer, and that reason is what the user sees.
Result<void> Greet(DaemonClient& client, const std::string& socket, const CliContext& ctx) {
  auto v = client.Call("version", nlohmann::json::object());
  if (!v) {
    return Fail(Error::Disconnected("torchxd on " + socket + " refused the connection: " + v.error().message));
  }
  if (v->value("version", "") != TORCHXD_VERSION) {
    *ctx.err << "torchx: warning: torchx " << TORCHXD_VERSION << " is talking to torchxd "
             << v->value("version", "?") << "; versions differ\n";
  }
  return {};
}

}  // namespace

Result<DaemonClient> ConnectToDaemon(const ConnectOptions& options, const CliContext& ctx) {
  std::string explicit_socket = options.socket;
  if (explicit_socket.empty()) explicit_socket = ctx.env("TORCHXD_SOCKET").value_or("");
  if (!explicit_socket.empty()) {
    auto c = DaemonClient::Connect(explicit_socket);
    if (!c) {
      return Fail(Error::Disconnected("torchxd is not answering on " + explicit_socket + " (" +
                                      c.error().message + ")"));
    }
    if (auto ok = Greet(*c, explicit_socket, ctx); !ok) return Fail(ok.error());
    return c;
  }
  std::string user_socket = core::UserSocketPath(ctx.env, ::getuid());
  if (auto c = DaemonClient::Connect(user_socket)) {
    if (auto ok = Greet(*c, user_socket, ctx); !ok) return Fail(ok.error());
    return c;
  }
  std::string system_socket(core::kSystemSocket);
  struct stat st;
  if (::stat(system_socket.c_str(), &st) == 0) {
    auto c = DaemonClient::Connect(system_socket);
    if (!c) {
      return Fail(Error::Disconnected("the system torchxd is not answering on " + system_socket +
                                      "; start it with `systemctl start torchxd`"));
    }
    if (auto ok = Greet(*c, system_socket, ctx); !ok) return Fail(ok.error());
    return c;
  }
  bool no_autostart = ctx.env("TORCHX_NO_AUTOSTART").value_or("") == "1";
  if (!options.autostart || no_autostart) {
    return Fail(Error::Disconnected(
        "no torchxd is running (looked at " + user_socket + ")" +
        (no_autostart ? "; TORCHX_NO_AUTOSTART=1 is set, so none was started: run `torchxd &`" : "")));
  }
  std::string state_dir = core::UserStateDir(ctx.env);
  if (auto spawned = SpawnDetached(state_dir); !spawned) return Fail(spawned.error());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto c = DaemonClient::Connect(user_socket)) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Fail(Error::Disconnected("started torchxd but it did not answer on " + user_socket +
                                 " within 10 s; see " + state_dir + "/torchxd.out"));
}

}  // namespace torchxd::cli
