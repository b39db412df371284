// Runs a shell command line on a pseudo-terminal of a given size, for CLI
// output that depends on being on a terminal (tables cut to its width).
#ifndef TORCHXD_TESTS_CLI_PTY_H_
#define TORCHXD_TESTS_CLI_PTY_H_

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tests/cli/shell.h"

namespace torchxd::testing {

// What `command` wrote to its terminal (stdout and stderr, as a terminal
// shows them: "\r\n" line ends), and its exit code; -1 after `seconds`.
inline Output RunInPty(const std::string& command, unsigned short columns, unsigned short rows = 40,
                       double seconds = 30) {
  Output result;
  struct winsize ws {};
  ws.ws_col = columns;
  ws.ws_row = rows;
  int master = -1;
  pid_t pid = ::forkpty(&master, nullptr, nullptr, &ws);
  if (pid < 0) return result;
  if (pid == 0) {
    ::unsetenv("COLUMNS");  // the terminal's own width counts
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    struct pollfd p = {master, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO once the child side is closed
    result.out.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(master);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : std::chrono::steady_clock::now() >= end ? -1 : 128 + WTERMSIG(status);
  return result;
}

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_CLI_PTY_H_
