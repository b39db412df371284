// Runs a shell command line for the CLI tests and captures what it printed.
#ifndef TORCHXD_TESTS_CLI_SHELL_H_
#define TORCHXD_TESTS_CLI_SHELL_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include <fstream>
#include <iterator>
#include <string>

namespace torchxd::testing {

struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Single-quotes `s` for sh.
inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Starts `argv` (argv[0] a path) as a child of the test, its stdout and
// stderr in the files `out` and `err`; its pid. Reap it with ReapWithin.
inline pid_t SpawnToFiles(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

// A child's exit code (128 + signal when killed by one), or -1 when it did
// not end within `seconds` (it is then killed and reaped).
inline int ReapWithin(pid_t pid, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() >= end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `command` with sh; stderr goes through `stderr_path`.
inline Output RunShell(const std::string& command, const std::string& stderr_path) {
  Output o;
  FILE* p = ::popen((command + " 2>" + Quote(stderr_path)).c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  int status = ::pclose(p);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(stderr_path);
  o.err.assign(std::istreambuf_iterator<char>(err), {});
  return o;
}

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_CLI_SHELL_H_
