#include "cli/python_component.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/commands.h"
#include "cli/component_helper.h"
#include "core/app_json.h"
#include "core/json_parse.h"
#include "core/spawn_strings.h"
#include "core/unique_fd.h"

namespace torchxd::cli {
namespace {

constexpr int kResultFd = 3;

struct HelperRun {
  std::string interpreter;
  nlohmann::json reply;  // discarded when the helper wrote nothing usable
  int status = 0;
};

std::string Interpreter(const CliContext& ctx) { return PythonInterpreter(ctx); }

}  // namespace

std::string PythonInterpreter(const CliContext& ctx) {
  auto chosen = ctx.env("TORCHX_PYTHON");
  return chosen && !chosen->empty() ? *chosen : "python3";
}

int ExecPython(const std::vector<std::string>& argv, const CliContext& ctx) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ctx.out->flush();
  ::execvp(args[0], args.data());
  return ReportError(ctx, "cannot run " + argv[0] + " (" + (ctx.env("TORCHX_PYTHON") ? "$TORCHX_PYTHON" : "python3 on PATH") +
                              "): " + strerror(errno) + "; set TORCHX_PYTHON to a Python with TorchX",
                     kExitUsage);
}

namespace {

// Runs the helper with `args`; its stdout and stderr are ours (the user's
// component may print, argparse prints --help there).
Result<HelperRun> RunHelper(const std::vector<std::string>& args, const CliContext& ctx) {
  HelperRun run;
  run.interpreter = Interpreter(ctx);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Fail(Error::Io(std::string("pipe: ") + strerror(errno)));
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  std::vector<std::string> argv = {run.interpreter, "-c", kComponentHelperSource, std::to_string(kResultFd)};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnStrings cargv(std::move(argv));
  SpawnStrings cenv = SpawnStrings::Env(ctx.environ);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), kResultFd);  // dup2 clears CLOEXEC
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, run.interpreter.c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  write_end.reset();
  if (rc != 0) {
    return Fail(Error::Unavailable("cannot run the Python interpreter `" + run.interpreter + "` (" +
                                       (ctx.env("TORCHX_PYTHON") ? "$TORCHX_PYTHON" : "python3 on PATH") +
                                       "): " + strerror(rc) + "; set TORCHX_PYTHON to a Python with TorchX"));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(read_end.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  while (::waitpid(pid, &run.status, 0) < 0 && errno == EINTR) {
  }
  run.reply = core::ParseJsonOrDiscarded(text);
  return run;
}

}  // namespace

bool IsPythonComponentName(const std::string& name) { return name.find(':') != std::string::npos; }

Result<PythonComponent> MaterializePythonComponent(const std::string& name, const std::vector<std::string>& args,
                                                   const CliContext& ctx) {
  std::vector<std::string> helper_args = {"run", name};
  helper_args.insert(helper_args.end(), args.begin(), args.end());
  auto run = RunHelper(helper_args, ctx);
  if (!run) return Fail(run.error());
  const nlohmann::json& r = run->reply;
  if (!r.is_object()) {
    std::string how = WIFSIGNALED(run->status) ? "was killed by signal " + std::to_string(WTERMSIG(run->status))
                                                : "exited with code " + std::to_string(WEXITSTATUS(run->status));
    return Fail(Error::InvalidArgument("component `" + name + "`: `" + run->interpreter + "` " + how +
                                       " before it gave an AppDef (the component may have called exit)"));
  }
  if (r.contains("app")) return PythonComponent{r["app"], std::nullopt};
  if (r.contains("exit") && r["exit"].is_number_integer()) return PythonComponent{std::nullopt, r["exit"].get<int>()};
  std::string message = r.value("error", "no answer");
  std::string kind = r.value("kind", "");
  if (kind == "no_torchx") {
    return Fail(Error::Unavailable("component `" + name + "` is a TorchX Python component, and `" +
                                       run->interpreter + "` cannot import TorchX (" + message +
                                       "): install it there (pip install torchx) or set TORCHX_PYTHON to a "
                                       "Python that has it"));
  }
  if (kind == "not_found") return Fail(Error::NotFound(message));
  return Fail(Error::InvalidArgument("component `" + name + "`: " + message));
}

std::optional<core::Resource> PythonNamedResource(const std::string& name, const CliContext& ctx) {
  auto run = RunHelper({"resource", name}, ctx);
  if (!run || !run->reply.is_object() || !run->reply.contains("resource")) return std::nullopt;
  auto resource = core::ResourceFromJson(run->reply["resource"], name);
  if (!resource) return std::nullopt;
  return *resource;
}

std::vector<ComponentListing> ListPythonComponents(const CliContext& ctx) {
  auto run = RunHelper({"list"}, ctx);
  std::vector<ComponentListing> out;
  if (!run || !run->reply.is_object() || !run->reply.contains("components")) return out;
  for (const auto& c : run->reply["components"]) {
    if (!c.is_object()) continue;
    out.push_back({c.value("name", ""), c.value("description", "")});
  }
  return out;
}

}  // namespace torchxd::cli
