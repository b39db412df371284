// utils.* builtins: echo, touch, sh, python, binary, copy, booth (torchx/components/utils.py).
#include <charconv>

#include "core/components.h"
#include "core/components_internal.h"
#include "core/mounts.h"
#include "core/text.h"

namespace torchxd::core {
namespace {

Role SimpleRole(std::string name, std::string image, std::string entrypoint,
                std::vector<std::string> args, int num_replicas) {
  Role role;
  role.name = std::move(name);
  role.image = std::move(image);
  role.entrypoint = std::move(entrypoint);
  role.args = std::move(args);
  role.num_replicas = num_replicas;
  role.resource.cpu = 1;
  role.resource.gpu = 0;
  role.resource.mem_mb = 1024;
  return role;
}

Result<AppDef> BuildEcho(const ComponentArgs& a, const ComponentContext&) {
  return AppDef{"echo",
                {SimpleRole("echo", *a.Str("image"), "echo", {*a.Str("msg")},
                            static_cast<int>(a.Int("num_replicas")))},
                {}};
}

Result<AppDef> BuildTouch(const ComponentArgs& a, const ComponentContext&) {
  return AppDef{"touch", {SimpleRole("touch", *a.Str("image"), "touch", {*a.Str("file")}, 1)}, {}};
}

Result<AppDef> BuildSh(const ComponentArgs& a, const ComponentContext& ctx) {
  std::vector<std::string> escaped;
  for (const auto& arg : a.varargs) escaped.push_back(ShellQuote(arg));
  Role role;
  role.name = "sh";
  role.image = *a.Str("image");
  if (auto entrypoint = a.Str("entrypoint")) {
    role.entrypoint = *entrypoint;
    role.args = escaped;
  } else {
    role.entrypoint = "sh";
    role.args = {"-c", Join(escaped, " ")};
  }
  role.num_replicas = static_cast<int>(a.Int("num_replicas"));
  auto resource = ResourceArg(a, ctx);
  if (!resource) return Fail(resource.error());
  role.resource = *resource;
  role.env = a.Dict("env");
  SetDefaultLogLevel(role.env, ctx);
  role.max_retries = static_cast<int>(a.Int("max_retries"));
  auto mounts = MountsArg(a, ctx);
  if (!mounts) return Fail(mounts.error());
  role.mounts = *mounts;
  return AppDef{"sh", {role}, {}};
}

Result<AppDef> BuildPython(const ComponentArgs& a, const ComponentContext& ctx) {
  auto m = a.Str("m"), c = a.Str("c"), script = a.Str("script");
  if (static_cast<int>(m.has_value()) + c.has_value() + script.has_value() != 1) {
    return Fail(Error::InvalidArgument("exactly one of `-m`, `-c` and `--script` needs to be specified"));
  }
  std::vector<std::string> cmd = script ? std::vector<std::string>{*script}
                                 : m    ? std::vector<std::string>{"-m", *m}
                                        : std::vector<std::string>{"-c", *c};
  Role role;
  role.name = "python";
  role.image = *a.Str("image");
  role.entrypoint = "python";
  role.num_replicas = static_cast<int>(a.Int("num_replicas"));
  auto resource = ResourceArg(a, ctx);
  if (!resource) return Fail(resource.error());
  role.resource = *resource;
  role.args = cmd;
  role.args.insert(role.args.end(), a.varargs.begin(), a.varargs.end());
  if (m) role.env["HYDRA_MAIN_MODULE"] = *m;
  auto mounts = MountsArg(a, ctx);
  if (!mounts) return Fail(mounts.error());
  role.mounts = *mounts;
  return AppDef{*a.Str("name"), {role}, {}};
}

Result<AppDef> BuildBinary(const ComponentArgs& a, const ComponentContext& ctx) {
  Role role;
  role.name = "binary";
  role.image = std::string(kNone);
  role.entrypoint = *a.Str("entrypoint");
  role.num_replicas = static_cast<int>(a.Int("num_replicas"));
  role.args = a.varargs;
  auto resource = ResourceArg(a, ctx);
  if (!resource) return Fail(resource.error());
  role.resource = *resource;
  return AppDef{*a.Str("name"), {role}, {}};
}

// Python's str(float): the shortest text that reads back, with ".0" on whole numbers.
std::string PyFloat(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string text(buf, ec == std::errc() ? end : buf);
  if (text.find_first_of(".eninf") == std::string::npos) text += ".0";
  return text;
}

Result<AppDef> BuildCopy(const ComponentArgs& a, const ComponentContext&) {
  return AppDef{"torchx-utils-copy",
                {SimpleRole("torchx-utils-copy", *a.Str("image"), "python",
                            {"-m", "torchx.apps.utils.copy_main", "--src", *a.Str("src"), "--dst", *a.Str("dst")}, 1)},
                {}};
}

Result<AppDef> BuildBooth(const ComponentArgs& a, const ComponentContext&) {
  auto f = [&](const char* name) { return PyFloat(std::get<double>(a.values.at(name))); };
  return AppDef{"torchx-utils-booth",
                {SimpleRole("torchx-utils-booth", *a.Str("image"), "python",
                            {"-m", "torchx.apps.utils.booth_main", "--x1", f("x1"), "--x2", f("x2"), "--trial_idx",
                             std::to_string(a.Int("trial_idx")), "--tracker_base", *a.Str("tracker_base")},
                            1)},
                {}};
}

ParamSpec Str(std::string name, std::string help, std::optional<std::string> dflt) {
  return {std::move(name), ParamType::kStr, std::move(help), std::move(dflt), false};
}
ParamSpec Int(std::string name, std::string help, int dflt) {
  return {std::move(name), ParamType::kInt, std::move(help), std::to_string(dflt), false};
}
ParamSpec Image() { return Str("image", "image to use", std::string(kTorchxImage)); }

std::vector<ParamSpec> ResourceParams() {
  return {Int("cpu", "number of cpus per replica", 1), Int("gpu", "number of gpus per replica", 0),
          Int("memMB", "cpu memory in MB per replica", 1024),
          Str("h", "a registered named resource (if specified takes precedence over cpu, gpu, memMB)",
              std::nullopt)};
}

std::vector<ParamSpec> Concat(std::vector<ParamSpec> a, const std::vector<ParamSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

std::vector<Component> UtilsComponents() {
  ParamSpec mounts{"mounts", ParamType::kList,
                   "mounts to mount into the worker environment/container (ex. "
                   "type=<bind/volume>,src=/host,dst=/job[,readonly])",
                   std::nullopt, false};
  return {
      {{"utils.echo",
        "Echos a message to stdout (calls echo)",
        {Str("msg", "message to echo", "hello world"), Image(),
         Int("num_replicas", "number of replicas to run", 1)},
        std::nullopt},
       BuildEcho},
      {{"utils.touch",
        "Touches a file (calls touch)",
        {{"file", ParamType::kStr, "file to create", std::nullopt, true}, Image()},
        std::nullopt},
       BuildTouch},
      {{"utils.sh",
        "Runs the provided command via sh. Currently sh does not support environment variable "
        "substitution.",
        Concat(Concat({Image(), Int("num_replicas", "number of replicas to run", 1)},
                      ResourceParams()),
               {{"env", ParamType::kDict,
                 "environment varibles to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)",
                 std::nullopt, false},
                Int("max_retries", "the number of scheduler retries allowed", 0), mounts,
                Str("entrypoint", "the entrypoint to use for the command (defaults to sh)",
                    std::nullopt)}),
        ParamSpec{"args", ParamType::kStr, "bash arguments", std::nullopt, false}},
       BuildSh},
      {{"utils.python",
        "Runs ``python`` with the specified module, command or script on the specified image and "
        "host. Use ``--`` to separate component args and program args (e.g. ``torchx run "
        "utils.python --m foo.main -- --args to --main``)",
        Concat({Str("m", "run library module as a script", std::nullopt),
                Str("c", "program passed as string (may error if scheduler has a length limit on args)",
                    std::nullopt),
                Str("script", ".py script to run", std::nullopt), Image(),
                Str("name", "name of the job", "torchx_utils_python")},
               Concat(ResourceParams(),
                      {Int("num_replicas", "number of copies to run (each on its own container)", 1),
                       mounts})),
        ParamSpec{"args", ParamType::kStr,
                  "arguments passed to the program in sys.argv[1:] (ignored with `--c`)",
                  std::nullopt, false}},
       BuildPython},
      {{"utils.binary",
        "Test component",
        Concat({{"entrypoint", ParamType::kStr, "the binary to run", std::nullopt, true},
                Str("name", "name of the job", "torchx_utils_binary"),
                Int("num_replicas", "number of copies to run (each on its own container)", 1)},
               ResourceParams()),
        ParamSpec{"args", ParamType::kStr, "arguments passed to the program in sys.argv[1:]",
                  std::nullopt, false}},
       BuildBinary},
      {{"utils.copy",
        "copy copies the file from src to dst. src and dst can be any valid fsspec url. This does not "
        "support recursive copies or directories.",
        {{"src", ParamType::kStr, "the source fsspec file location", std::nullopt, true},
         {"dst", ParamType::kStr, "the destination fsspec file location", std::nullopt, true},
         Str("image", "the image that contains the copy app", std::string(kTorchxImage))},
        std::nullopt},
       BuildCopy},
      {{"utils.booth",
        "Evaluates the booth function, ``f(x1, x2) = (x1 + 2*x2 - 7)^2 + (2*x1 + x2 - 5)^2``. Output "
        "result is accessible via ``FsspecResultTracker(outdir)[trial_idx]``",
        {{"x1", ParamType::kFloat, "x1", std::nullopt, true},
         {"x2", ParamType::kFloat, "x2", std::nullopt, true},
         Int("trial_idx", "ignore if not running hpo", 0),
         Str("tracker_base", "URI of the tracker's base output directory (e.g. s3://foo/bar)",
             "/tmp/torchx-util-booth"),
         Str("image", "the image that contains the booth app", std::string(kTorchxImage))},
        std::nullopt},
       BuildBooth},
  };
}

}  // namespace torchxd::core
