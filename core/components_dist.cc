// dist.* builtins: ddp and spmd (torchx/components/dist.py, structured_arg.py).
#include <filesystem>

#include "core/components.h"
#include "core/components_internal.h"
#include "core/macros.h"
#include "core/text.h"

namespace torchxd::core {
namespace {

struct RunName {
  std::string experiment;
  std::string run;
};

// StructuredNameArgument.parse_from: "{exp}/{run}", "exp/", "/run", "run".
RunName ParseRunName(const std::string& name, const std::optional<std::string>& m,
                     const std::optional<std::string>& script) {
  RunName out;
  size_t delim = name.find('/');
  if (delim == std::string::npos) {
    out.run = name;
  } else if (delim + 1 < name.size()) {
    out.run = name.substr(delim + 1);
  }
  if (delim != std::string::npos && delim > 0) out.experiment = name.substr(0, delim);
  if (out.run.empty()) {
    out.run = m ? m->substr(m->rfind('.') == std::string::npos ? 0 : m->rfind('.') + 1)
                : std::filesystem::path(*script).stem().string();
  }
  if (out.experiment.empty()) out.experiment = "default-experiment";
  return out;
}

std::string RoleName(const std::optional<std::string>& m, const std::optional<std::string>& script) {
  if (script) return std::filesystem::path(*script).stem().string();
  size_t dot = m->rfind('.');
  return dot == std::string::npos ? *m : m->substr(dot + 1);
}

Result<AppDef> BuildDdp(const ComponentArgs& a, const ComponentContext& ctx) {
  auto script = a.Str("script"), m = a.Str("m");
  if (script.has_value() == m.has_value()) {
    return Fail(Error::InvalidArgument("exactly one of --script and -m must be specified"));
  }
  auto nnodes = ParseNNodes(*a.Str("j"));
  if (!nnodes) return Fail(nnodes.error());
  auto rdzv_port = a.Int("rdzv_port");
  // Single node: port 0 lets torchelastic pick a free port. Multi-node: the
  // shell resolves rank 0's host from the scheduler's env var ($$ escapes $).
  std::string rdzv_endpoint =
      nnodes->max_nnodes == 1
          ? "localhost:0"
          : "$${" + std::string(kMacroRank0Env) + ":=localhost}:" + std::to_string(rdzv_port);

  auto env = a.Dict("env");
  RunName name = ParseRunName(*a.Str("name"), m, script);
  env["TORCHX_TRACKING_EXPERIMENT_NAME"] = name.experiment;
  env["TORCHX_TRACKING_RUN_NAME"] = name.run;
  SetDefaultLogLevel(env, ctx);
  if (a.Bool("debug")) {
    env["CUDA_LAUNCH_BLOCKING"] = "1";
    env["NCCL_DESYNC_DEBUG"] = "1";
    env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL";
    env["TORCH_SHOW_CPP_STACKTRACES"] = "1";
  }

  auto rdzv_backend = *a.Str("rdzv_backend");
  std::vector<std::string> cmd = {"torchrun", "--rdzv_backend", ShellQuote(rdzv_backend)};
  if (auto conf = a.Str("rdzv_conf")) {
    cmd.push_back("--rdzv_conf");
    cmd.push_back(ShellQuote(*conf));
  }
  cmd.insert(cmd.end(), {"--rdzv_endpoint", rdzv_endpoint,  // unquoted on purpose
                         "--rdzv_id", ShellQuote(kMacroAppId), "--nnodes",
                         ShellQuote(nnodes->nnodes_rep), "--nproc_per_node",
                         std::to_string(nnodes->nproc_per_node), "--tee",
                         std::to_string(a.Int("tee")), "--role", ShellQuote("")});
  if (rdzv_backend == "static") {
    cmd.push_back("--node_rank");
    cmd.push_back(ShellQuote(kMacroReplicaId));
  }
  if (script) {
    cmd.push_back(ShellQuote(*script));
  } else {
    cmd.push_back("-m");
    cmd.push_back(ShellQuote(*m));
  }
  for (const auto& arg : a.varargs) cmd.push_back(ShellQuote(arg));

  Role role;
  role.name = RoleName(m, script);
  role.image = *a.Str("image");
  role.min_replicas = nnodes->min_nnodes;
  role.entrypoint = "bash";
  role.num_replicas = nnodes->max_nnodes;
  auto resource = ResourceArg(a, ctx);
  if (!resource) return Fail(resource.error());
  role.resource = *resource;
  role.args = {"-c", Join(cmd, " ")};
  role.env = env;
  role.port_map = {{"c10d", static_cast<int>(rdzv_port)}};
  role.max_retries = static_cast<int>(a.Int("max_retries"));
  auto mounts = MountsArg(a, ctx);
  if (!mounts) return Fail(mounts.error());
  role.mounts = *mounts;
  return AppDef{name.run, {role}, a.Dict("metadata")};
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// StructuredJArgument.parse_from(h, j): "-j 2" on a GPU host -> 2x<gpus>.
Result<std::string> SpmdJ(const std::string& h, const std::string& j, const ComponentContext& ctx) {
  auto host = ctx.resources->Get(h);
  if (!host) return Fail(host.error());
  auto nums = Split(j, 'x');
  for (const auto& n : nums) {
    if (!AllDigits(n)) {
      return Fail(Error::InvalidArgument(
          "Invalid format for `-j $NNODESx$NPROCS_PER_NODE` (e.g. `-j 1x8`). Given: " + j));
    }
  }
  if (nums.size() == 1) {
    if (host->gpu <= 0) {
      return Fail(Error::InvalidArgument(
          "nproc_per_node cannot be inferred from GPU count. `" + h +
          "` is not a GPU instance. You must specify `-j $NNODESx$NPROCS_PER_NODE` (e.g. `-j " +
          nums[0] + "x8`)"));
    }
    return nums[0] + "x" + std::to_string(host->gpu);
  }
  if (nums.size() == 2) return nums[0] + "x" + nums[1];
  return Fail(Error::InvalidArgument(
      "Invalid format for `-j $NNODESx$NPROCS_PER_NODE` (e.g. `-j 1x8`). Given: " + j));
}

Result<AppDef> BuildSpmd(const ComponentArgs& a, const ComponentContext& ctx) {
  auto j = SpmdJ(*a.Str("h"), *a.Str("j"), ctx);
  if (!j) return Fail(j.error());
  ComponentArgs ddp = a;  // spmd is ddp with j resolved against the host type
  ddp.values["j"] = CfgValue{*j};
  ddp.values["cpu"] = CfgValue{int64_t{2}};
  ddp.values["gpu"] = CfgValue{int64_t{0}};
  ddp.values["memMB"] = CfgValue{int64_t{1024}};
  ddp.values["rdzv_backend"] = CfgValue{std::string("c10d")};
  ddp.values["rdzv_conf"] = CfgValue{};
  return BuildDdp(ddp, ctx);
}

ParamSpec P(std::string name, ParamType type, std::string help, std::optional<std::string> dflt) {
  return {std::move(name), type, std::move(help), std::move(dflt), false};
}

}  // namespace

Result<NNodes> ParseNNodes(std::string_view j) {
  // 1:2x4 (elastic), 1x4 (fixed) or 4 (processes on one node).
  std::string s(j);
  auto number = [](std::string_view digits) -> std::optional<int> {
    if (!AllDigits(digits) || digits.size() > 9) return std::nullopt;
    return std::stoi(std::string(digits));
  };
  size_t colon = s.find(':'), x = s.find('x');
  std::string_view v(s);
  if (colon != std::string::npos && x != std::string::npos && colon < x) {
    auto lo = number(v.substr(0, colon)), hi = number(v.substr(colon + 1, x - colon - 1)), procs = number(v.substr(x + 1));
    if (lo && hi && procs) return NNodes{*lo, *hi, *procs, s.substr(0, x)};
  } else if (colon == std::string::npos && x != std::string::npos) {
    auto nodes = number(v.substr(0, x)), procs = number(v.substr(x + 1));
    if (nodes && procs) return NNodes{*nodes, *nodes, *procs, s.substr(0, x)};
  } else if (colon == std::string::npos) {
    if (auto procs = number(v)) return NNodes{1, 1, *procs, "1"};
  }
  return Fail(Error::InvalidArgument(
      "Invalid format for -j, usage example: 1:2x4 or 1x4 or 4. Given: " + s));
}

std::vector<Component> DistComponents() {
  std::vector<ParamSpec> common_head = {
      P("script", ParamType::kStr, "script or binary to run within the image", std::nullopt),
      P("m", ParamType::kStr, "the python module path to run", std::nullopt),
      P("image", ParamType::kStr, "image (e.g. docker)", std::string(kTorchxImage)),
      P("name", ParamType::kStr,
        "job name override in the following format: ``{experimentname}/{runname}`` or "
        "``{experimentname}/`` or ``/{runname}`` or ``{runname}``. Uses the script or module "
        "name if ``{runname}`` not specified.",
        "/")};
  auto tail = [](std::vector<ParamSpec> v) {
    std::vector<ParamSpec> t = {
        P("env", ParamType::kDict,
          "environment varibles to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)",
          std::nullopt),
        P("metadata", ParamType::kDict,
          "metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)", std::nullopt),
        P("max_retries", ParamType::kInt, "the number of scheduler retries allowed", "0"),
        P("rdzv_port", ParamType::kInt,
          "the port on rank0's host to use for hosting the c10d store used for rendezvous. Only "
          "takes effect when running multi-node.",
          "29500")};
    v.insert(v.end(), t.begin(), t.end());
    return v;
  };
  std::vector<ParamSpec> ddp = common_head;
  ddp.push_back(P("h", ParamType::kStr,
                  "a registered named resource (if specified takes precedence over cpu, gpu, memMB)",
                  std::nullopt));
  ddp.push_back(P("cpu", ParamType::kInt, "number of cpus per replica", "2"));
  ddp.push_back(P("gpu", ParamType::kInt, "number of gpus per replica", "0"));
  ddp.push_back(P("memMB", ParamType::kInt, "cpu memory in MB per replica", "1024"));
  ddp.push_back(P("j", ParamType::kStr,
                  "[{min_nnodes}:]{nnodes}x{nproc_per_node}, for gpu hosts, nproc_per_node must "
                  "not exceed num gpus",
                  "1x2"));
  ddp = tail(ddp);
  ddp.push_back(P("rdzv_backend", ParamType::kStr, "the rendezvous backend to use", "c10d"));
  ddp.push_back(P("rdzv_conf", ParamType::kStr,
                  "the additional rendezvous configuration to use (ex. "
                  "join_timeout=600,close_timeout=600,timeout=600)",
                  std::nullopt));
  std::vector<ParamSpec> last = {
      P("mounts", ParamType::kList,
        "mounts to mount into the worker environment/container (ex. "
        "type=<bind/volume>,src=/host,dst=/job[,readonly])",
        std::nullopt),
      P("debug", ParamType::kBool, "whether to run with preset debug flags enabled", "False"),
      P("tee", ParamType::kInt,
        "tees the specified std stream(s) to console + file. 0: none, 1: stdout, 2: stderr, 3: both",
        "3")};
  ddp.insert(ddp.end(), last.begin(), last.end());

  std::vector<ParamSpec> spmd = common_head;
  spmd.push_back(P("h", ParamType::kStr,
                   "the type of host to run on (e.g. aws_p4d.24xlarge). Must be one of the "
                   "registered named resources",
                   "gpu.small"));
  spmd.push_back(P("j", ParamType::kStr,
                   "{nnodes}x{nproc_per_node}. For GPU hosts omitting nproc_per_node will infer it "
                   "from the GPU count on the host",
                   "1x1"));
  spmd = tail(spmd);
  spmd.insert(spmd.end(), last.begin(), last.end());

  return {
      {{"dist.ddp",
        "Distributed data parallel style application (one role, multi-replica). Uses "
        "torch.distributed.run to launch and coordinate PyTorch worker processes. Defaults to "
        "using ``c10d`` rendezvous backend on rendezvous_endpoint ``$rank_0_host:$rdzv_port``. "
        "Note that ``rdzv_port`` parameter is ignored when running on single node, and instead "
        "we use port 0 which instructs torchelastic to chose a free random port on the host.",
        ddp, ParamSpec{"script_args", ParamType::kStr, "arguments to the main module",
                       std::nullopt, false}},
       BuildDdp},
      {{"dist.spmd",
        "Creates a torchx.specs.AppDef (Job Definition) for a Single-Process-Multiple-Data (SPMD) "
        "style application. SPMD launches `n x m` (set via the `-j nxm` option) copies of the "
        "same program, where `n` is the number of nodes (hosts) and `m` is the number of "
        "processes on each node. (torchxd also accepts --rdzv_port and --tee here.)",
        spmd, ParamSpec{"args", ParamType::kStr,
                        "the arguments to the main module or script (e.g. my/trainer.py -foo bar)",
                        std::nullopt, false}},
       BuildSpmd},
  };
}

}  // namespace torchxd::core
