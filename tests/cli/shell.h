// Runs a shell command line for the CLI tests and captures what it printed.
#ifndef TORCHXD_TESTS_CLI_SHELL_H_
#define TORCHXD_TESTS_CLI_SHELL_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
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
