// `torchx run -s slurm --dryrun`: the sbatch command and script, probing the
// installed Slurm as TorchX's dry run does (`sinfo --version` for how GPUs are
// asked for, `sinfo --format %P,%m --noconvert` for a small-memory
// partition); without a reachable Slurm it assumes 24.05, as TorchX does.
#ifndef TORCHXD_CLI_SLURM_DRYRUN_H_
#define TORCHXD_CLI_SLURM_DRYRUN_H_

#include <optional>
#include <string>
#include <vector>

#include "cli/cli_context.h"
#include "core/app_def.h"
#include "core/runopts.h"

namespace torchxd::cli {

int PrintSlurmDryrun(const core::AppDef& app, const core::Cfg& cfg, const CliContext& ctx);

// Runs `argv` (found on the caller's PATH) with the caller's environment and
// returns its stdout when it exits 0 within `timeout_ms`; stderr is dropped.
std::optional<std::string> CaptureCommand(const std::vector<std::string>& argv, const CliContext& ctx,
                                          int timeout_ms);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_SLURM_DRYRUN_H_
