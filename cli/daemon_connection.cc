#include "cli/daemon_connection.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/paths.h"
#include "core/unique_fd.h"

namespace torchxd::cli {
namespace {

namespace fs = std::filesystem;

// A started daemon that lives is waited for this long, and told about after kStartPatience.
constexpr std::chrono::seconds kStartLimit{60};
constexpr std::chrono::seconds kStartPatience{10};

std::string TorchxdBinary() {
  std::string beside = core::SelfExecutableDir() + "/torchxd";
  if (::access(beside.c_str(), X_OK) == 0) return beside;
  return "torchxd";  // from PATH
}

// Double fork + setsid: the daemon is nobody's child and holds none of our fds.
// Returns its pid (the middle child passes it up a pipe).
Result<pid_t> SpawnDetached(const std::string& state_dir) {
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  std::string out = state_dir + "/torchxd.out";
  std::string binary = TorchxdBinary();
  int pid_pipe[2];
  if (::pipe2(pid_pipe, O_CLOEXEC) != 0) return Fail(Error::Io(std::string("pipe: ") + strerror(errno)));
  pid_t first = ::fork();
  if (first < 0) {
    ::close(pid_pipe[0]);
    ::close(pid_pipe[1]);
    return Fail(Error::Io("fork failed"));
  }
  if (first == 0) {
    ::setsid();
    pid_t second = ::fork();
    if (second != 0) {
      (void)!::write(pid_pipe[1], &second, sizeof(second));
      ::_exit(0);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    int log = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(devnull, 0);
    ::dup2(log >= 0 ? log : devnull, 1);
    ::dup2(log >= 0 ? log : devnull, 2);
    ::close_range(3, ~0U, 0);
    // The daemon appends to the same file itself, and keeps it within its --output-max-bytes.
    std::string output_flag = "--output";
    char* argv[] = {binary.data(), output_flag.data(), out.data(), nullptr};
    ::execvp(argv[0], argv);
    ::_exit(127);
  }
  ::close(pid_pipe[1]);
  pid_t daemon = -1;
  ssize_t n;
  do {
    n = ::read(pid_pipe[0], &daemon, sizeof(daemon));
  } while (n < 0 && errno == EINTR);
  ::close(pid_pipe[0]);
  int status = 0;
  ::waitpid(first, &status, 0);
  if (n != sizeof(daemon) || daemon <= 0) return Fail(Error::Io("could not start torchxd (fork failed)"));
  return daemon;
}

// Whether a process lives (a zombie counts as gone), through a pidfd where
// the kernel has them: the spawned daemon is not our child.
class Watched {
 public:
  explicit Watched(pid_t pid) : pid_(pid), fd_(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))) {}
  bool Alive() const {
    if (!fd_.valid()) return ::kill(pid_, 0) == 0 || errno == EPERM;
    struct pollfd p = {fd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

 private:
  pid_t pid_;
  UniqueFd fd_;
};

// The pid holding the state dir's lock (a daemon that won the start), or 0.
pid_t LockHolder(const std::string& state_dir) {
  UniqueFd fd(::open((state_dir + "/torchxd.lock").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return 0;
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(fd.get(), F_GETLK, &lock) != 0 || lock.l_type == F_UNLCK) return 0;
  return lock.l_pid;
}

// The last line the daemon wrote (why it stopped), or "": from the file's
// last 4 KiB alone (it holds every autostart's lines).
std::string LastLine(const std::string& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : 0;
  in.seekg(std::max<std::streamoff>(0, size - 4096));
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last.substr(0, 2000);
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
  std::string out = state_dir + "/torchxd.out";
  auto spawned = SpawnDetached(state_dir);
  if (!spawned) return Fail(spawned.error());
  // A daemon still starting is waited for (a fresh store's first syncs can
  // take seconds on a busy disk); one that exited is reported at once, unless
  // another CLI's daemon won the state dir and is the one starting.
  Watched ours(*spawned);
  auto start = std::chrono::steady_clock::now();
  bool told = false;
  for (;;) {
    if (auto c = DaemonClient::Connect(user_socket)) return c;
    auto waited = std::chrono::steady_clock::now() - start;
    bool alive = ours.Alive() || LockHolder(state_dir) > 0;
    if (!alive) {
      if (auto c = DaemonClient::Connect(user_socket)) return c;  // it answered as it went
      std::string last = LastLine(out);
      return Fail(Error::Disconnected("torchxd exited before it answered on " + user_socket +
                                      (last.empty() ? "; see " + out : "; it said: " + last + " (" + out + ")")));
    }
    if (waited >= kStartLimit) {
      return Fail(Error::Disconnected("started torchxd (pid " + std::to_string(*spawned) + ") but it did not answer on " +
                                      user_socket + " within " + std::to_string(kStartLimit.count()) + " s; see " + out));
    }
    if (!told && waited >= kStartPatience) {
      told = true;
      *ctx.err << "torchx: torchxd (pid " << *spawned << ") is still starting; waiting up to "
               << kStartLimit.count() << " s (its output: " << out << ")\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace torchxd::cli
