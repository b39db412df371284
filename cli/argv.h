// Argument pre-processing for torchx, before CLI11 sees argv.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CLI_ARGV_H_
#define TORCHXD_CLI_ARGV_H_

#include <string>
#include <vector>

namespace torchxd::cli {

// argv[1..] with `run`'s `-cfg` / `-cfg=...` renamed to `--scheduler_args`.
// Only the run options before COMPONENT are touched; the component's own
// arguments pass through as given.
std::vector<std::string> NormalizeArgv(int argc, char** argv);
std::vector<std::string> NormalizeArgs(std::vector<std::string> args);
// `torchx run [OPTIONS] -- COMPONENT ...`: takes the `--` and what follows it
// out of `args` (CLI11 would refuse them) and returns what followed; empty
// when run's options are not ended by `--`.
std::vector<std::string> TakeRunRemainder(std::vector<std::string>& args);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_ARGV_H_
