#include "cli/slurm_dryrun.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "core/app_json.h"
#include "core/ids.h"
#include "core/spawn_strings.h"
#include "core/unique_fd.h"
#include "slurmbridge/sbatch_script.h"

namespace torchxd::cli {
namespace {

int64_t NowMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

std::optional<std::string> CaptureCommand(const std::vector<std::string>& argv, const CliContext& ctx,
                                          int timeout_ms) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  SpawnStrings cargv(argv);
  SpawnStrings cenv = SpawnStrings::Env(ctx.environ);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  write_end.reset();
  if (rc != 0) return std::nullopt;
  std::string text;
  int64_t deadline = NowMs() + timeout_ms;
  bool timed_out = false;
  for (;;) {
    int64_t left = deadline - NowMs();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      timed_out = n == 0;
      break;
    }
    char buf[8192];
    ssize_t got = ::read(read_end.get(), buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (text.size() < (1u << 20)) text.append(buf, static_cast<size_t>(got));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return text;
}

int PrintSlurmDryrun(const core::AppDef& app, const core::Cfg& cfg, const CliContext& ctx) {
  slurmbridge::SlurmOptions options = slurmbridge::SlurmOptionsFromCfg(cfg);
  slurmbridge::SbatchInput in;
  in.session_id = core::SessionUuid();  // as TorchX's dry run: its own session's
  std::optional<std::pair<int, int>> version;
  if (auto out = CaptureCommand({"sinfo", "--version"}, ctx, 10000)) version = slurmbridge::ParseSlurmVersion(*out);
  if (!version) {
    *ctx.err << "torchx: warning: cannot run `sinfo --version` to learn the Slurm version (no Slurm reachable "
                "here?); assuming 24.05, as TorchX does\n";
    version = std::pair{24, 5};
  }
  in.gpus_per_node = slurmbridge::UsesGpusPerNode(*version);
  if (auto out = CaptureCommand({"sinfo", "--format", "%P,%m", "--noconvert"}, ctx, 10000)) {
    auto mb = slurmbridge::PartitionMemoryMb(*out, options.partition);
    in.small_memory_partition = mb && *mb <= 1000;
  }
  auto req = slurmbridge::AppDefToSbatch(app, options, in);
  if (!req) return ReportError(ctx, req.error().message, kExitUsage);
  *ctx.out << "=== APPLICATION ===\n"
           << core::AppDefToJson(app).dump(2) << "\n=== SCHEDULER REQUEST ===\n"
           << req->DryrunText() << "\n";
  return kExitOk;
}

}  // namespace torchxd::cli
