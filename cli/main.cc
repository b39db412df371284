// torchx: the command line (TorchX-compatible), built on CLI11.
//
// Debian's CLI11 2.1.2 cannot declare a `-cfg` option, so `-cfg` is mapped to
// `--scheduler_args` before parsing, and everything from COMPONENT on is
// passed to the component untouched.
#include <CLI/CLI.hpp>

#include "cli/argv.h"
#include "cli/commands.h"

namespace {

using torchxd::cli::CliContext;

constexpr const char* kFooter =
    "Exit codes: 0 ok; 1 the operation failed (not found, refused, app did not succeed under "
    "--wait); 2 usage or invalid input; 3 daemon unreachable or not ready in time.";

int NotSupported(const CliContext& ctx, const std::string& what) {
  return torchxd::cli::ReportError(
      ctx, what + " is not supported by torchxd yet (see `torchx --help` for what is)",
      torchxd::cli::kExitUsage);
}

int Main(int argc, char** argv) {
  CliContext ctx = CliContext::FromProcess();
  std::vector<std::string> args = torchxd::cli::NormalizeArgv(argc, argv);

  CLI::App app{"torchx: launch TorchX jobs through the torchxd daemon", "torchx"};
  app.footer(kFooter);
  app.set_version_flag("--version", "torchx (torchxd) " TORCHXD_VERSION);
  app.require_subcommand(1);

  torchxd::cli::RunArgs run_args;
  auto* run = app.add_subcommand("run", "Run a component (builtin or AppDef JSON file)");
  run->add_option("-s,--scheduler", run_args.scheduler, "scheduler (default: local_cwd)");
  run->add_option("--scheduler_args", run_args.scheduler_args,
                  "-cfg k1=v1,k2=v2: scheduler run options (see `torchx runopts`)");
  run->add_flag("--dryrun", run_args.dryrun, "print the AppDef and scheduler request, run nothing");
  run->add_flag("--wait", run_args.wait, "wait until the app is terminal");
  run->add_flag("--log", run_args.log, "stream the app's logs (implies --wait)");
  std::string unsupported;
  for (const char* flag : {"--workspace", "--buck-target", "--parent_run_id", "--stdin",
                           "--tee_logs"}) {
    run->add_option_function<std::string>(
        flag, [&unsupported, flag](const std::string&) { unsupported = flag; }, "not supported yet");
  }
  run->prefix_command();  // COMPONENT and everything after it stay untouched

  auto* builtins = app.add_subcommand("builtins", "List the builtin components");
  std::string runopts_scheduler;
  auto* runopts = app.add_subcommand("runopts", "Show the run options of the schedulers");
  runopts->add_option("scheduler", runopts_scheduler, "only this scheduler");
  for (const char* name : {"configure", "tracker"}) {
    app.add_subcommand(name, "not supported yet")->allow_extras()->prefix_command();
  }

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return torchxd::cli::ReportError(
        ctx, std::string(e.what()) + " (see `torchx --help`)", torchxd::cli::kExitUsage);
  }

  if (*run) {
    if (!unsupported.empty()) return NotSupported(ctx, "`torchx run " + unsupported + "`");
    auto rest = run->remaining();
    if (!rest.empty()) {
      run_args.component = rest[0];
      run_args.component_args.assign(rest.begin() + 1, rest.end());
    }
    return torchxd::cli::CmdRun(run_args, ctx);
  }
  if (*builtins) return torchxd::cli::CmdBuiltins(ctx);
  if (*runopts) return torchxd::cli::CmdRunopts(runopts_scheduler, ctx);
  for (const auto* sub : app.get_subcommands()) {
    return NotSupported(ctx, "`torchx " + sub->get_name() + "`");
  }
  return torchxd::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "torchx: internal error: " << e.what() << "\n";
    return torchxd::cli::kExitFailed;
  }
}
