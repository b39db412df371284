// Command: one short-lived program run on the loop (uv_spawn), its stdout and
// stderr captured up to a bound, optionally as another user, with a time
// limit after which it is killed. For the tools a scheduler drives (sbatch,
// squeue, scancel); never for replicas (those run under the shim).
//
// Thread contract: loop thread only. The callback runs once, on the loop,
// after the process was reaped and both pipes closed.
#ifndef TORCHXD_CORE_COMMAND_H_
#define TORCHXD_CORE_COMMAND_H_

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/uv_handle.h"

namespace torchxd {

struct CommandSpec {
  std::vector<std::string> argv;  // argv[0] is looked up on `search_path`, else on the env's PATH
  std::map<std::string, std::string> env;
  // Where a bare argv[0] is looked up, when the env's PATH is not to be trusted
  // (the caller's, for a program the daemon runs as them): "" = the env's.
  std::string search_path;
  std::string cwd;  // "" = the daemon's
  std::optional<std::pair<uid_t, gid_t>> as;  // run as this user (no supplementary groups)
  std::string input;                          // written to its stdin, then closed
  double timeout_seconds = 60;
  size_t max_output = 8u << 20;  // per stream; the rest is dropped (`truncated`)
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  bool truncated = false;
  std::string out, err;
  bool ok() const { return exit_code == 0 && !timed_out; }
  // "exited with code 1: <first line of stderr>" and the like, for messages.
  std::string Describe() const;
};

// The first executable regular file named `name` in the absolute directories
// of `path` (colon-separated; relative and empty entries are skipped): nothing
// when there is none. A name with a '/' is not searched for.
std::optional<std::string> FindProgram(const std::string& name, const std::string& path);

class CommandRunner {
 public:
  using Done = std::function<void(Result<CommandResult>)>;  // an error only when it could not start
  explicit CommandRunner(uv_loop_t* loop);
  ~CommandRunner();
  CommandRunner(const CommandRunner&) = delete;
  CommandRunner& operator=(const CommandRunner&) = delete;

  void Run(CommandSpec spec, Done done);
  size_t running() const { return running_.size(); }
  // Kills what runs (SIGKILL); `done` once every one was reaped (their callbacks do not run).
  void Shutdown(std::function<void()> done);

  struct Running;  // one program's handles and output (command.cc)

 private:
  void Finish(uint64_t id);

  uv_loop_t* loop_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Running>> running_;
  std::function<void()> shutdown_done_;
};

}  // namespace torchxd

#endif  // TORCHXD_CORE_COMMAND_H_
