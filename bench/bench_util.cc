#include "bench/bench_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

extern char** environ;

namespace torchxd::bench {

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Stats Summarize(std::vector<double> s) {
  if (s.empty()) return {};
  std::sort(s.begin(), s.end());
  return {s[s.size() / 2], s.front(), s.back()};
}

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env, int stdout_fd) {
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> args, env;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : env_store) env.push_back(e.data());
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd >= 0 ? stdout_fd : devnull, 1);
  posix_spawn_file_actions_adddup2(&actions, devnull, 2);
  pid_t pid = -1;
  posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(devnull);
  return pid;
}

pid_t SpawnTrueInSession(int out, int err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out, 1);
  posix_spawn_file_actions_adddup2(&fa, err, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  char arg0[] = "/bin/true";
  char* argv[] = {arg0, nullptr};
  pid_t pid = -1;
  posix_spawn(&pid, "/bin/true", &fa, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return pid;
}

void Drain(int fd) {
  char buf[4096];
  while (::read(fd, buf, sizeof(buf)) > 0) {
  }
  ::close(fd);
}

int WaitExit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

double TimeCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  auto start = Clock::now();
  WaitExit(Spawn(argv, extra_env));
  return SecondsSince(start);
}

long RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

long PssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Pss:", 0) == 0) return std::atol(line.c_str() + 4);
  }
  return -1;
}

long CpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt
  long utime = 0, stime = 0;
  fields >> utime >> stime;
  return utime + stime;
}

unsigned long long FreeBytes(const std::string& path) {
  struct statvfs st;
  if (::statvfs(path.c_str(), &st) != 0) return 0;
  return static_cast<unsigned long long>(st.f_bavail) * st.f_frsize;
}

std::pair<std::string, double> InodeCost(const std::string& dir, int n) {
  ::mkdir(dir.c_str(), 0755);
  struct statfs fs;
  std::string type = ::statfs(dir.c_str(), &fs) != 0 ? "?"
                     : fs.f_type == 0xEF53       ? "ext4"
                     : fs.f_type == 0x01021994   ? "tmpfs"
                     : fs.f_type == 0x58465342   ? "xfs"
                     : fs.f_type == 0x9123683E   ? "btrfs"
                                                 : std::to_string(fs.f_type);
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    auto start = Clock::now();
    ::mkdir((dir + "/" + std::to_string(i)).c_str(), 0755);
    us.push_back(SecondsSince(start) * 1e6);
  }
  std::sort(us.begin(), us.end());
  return {type, us.empty() ? 0 : us[us.size() / 2]};
}

}  // namespace torchxd::bench
