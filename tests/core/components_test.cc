#include "core/components.h"

#include <gtest/gtest.h>

#include "core/macros.h"

namespace torchxd::core {
namespace {

class ComponentsTest : public ::testing::Test {
 protected:
  Result<AppDef> Run(const std::string& name, const std::vector<std::string>& argv,
                     std::map<std::string, std::string> env = {}) {
    auto component = FindBuiltin(name);
    if (!component) return Fail(component.error());
    auto args = ParseComponentArgs((*component)->spec, argv);
    if (!args) return Fail(args.error());
    ComponentContext ctx{MapEnv(std::move(env)), &resources_, "/home/u"};
    return BuildComponent(**component, *args, ctx);
  }
  NamedResources resources_ = NamedResources::Builtin();
};

TEST_F(ComponentsTest, BuiltinsAreListed) {
  std::vector<std::string> names;
  for (const auto& c : Builtins()) names.push_back(c.spec.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dist.ddp", "dist.spmd", "utils.echo", "utils.touch",
                                             "utils.sh", "utils.python", "utils.binary", "utils.copy",
                                             "utils.booth"}));
  auto unknown = FindBuiltin("utils.ecoh");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().message.find("Did you mean `utils.echo`?"), std::string::npos);
}

TEST_F(ComponentsTest, EchoMatchesTorchx) {
  auto app = Run("utils.echo", {"--msg", "hi", "--num_replicas", "2"});
  ASSERT_TRUE(app.has_value()) << app.error().message;
  EXPECT_EQ(app->name, "echo");
  const Role& r = app->roles[0];
  EXPECT_EQ(r.name, "echo");
  EXPECT_EQ(r.entrypoint, "echo");
  EXPECT_EQ(r.args, std::vector<std::string>{"hi"});
  EXPECT_EQ(r.num_replicas, 2);
  EXPECT_EQ(r.image, kTorchxImage);
  EXPECT_EQ(r.resource.cpu, 1);
  EXPECT_EQ(r.resource.mem_mb, 1024);
  auto dflt = Run("utils.echo", {});
  EXPECT_EQ(dflt->roles[0].args, std::vector<std::string>{"hello world"});
}

TEST_F(ComponentsTest, ShQuotesArgsAndSetsLoglevel) {
  auto app = Run("utils.sh", {"--env", "A=1", "echo", "hello world", "$HOME"}, {{"LOGLEVEL", "INFO"}});
  ASSERT_TRUE(app.has_value()) << app.error().message;
  const Role& r = app->roles[0];
  EXPECT_EQ(r.entrypoint, "sh");
  EXPECT_EQ(r.args, (std::vector<std::string>{"-c", "echo 'hello world' '$HOME'"}));
  EXPECT_EQ(r.env, (std::map<std::string, std::string>{{"A", "1"}, {"LOGLEVEL", "INFO"}}));
  auto custom = Run("utils.sh", {"--entrypoint", "bash", "--", "-x", "a b"});
  ASSERT_TRUE(custom.has_value()) << custom.error().message;
  EXPECT_EQ(custom->roles[0].entrypoint, "bash");
  EXPECT_EQ(custom->roles[0].args, (std::vector<std::string>{"-x", "'a b'"}));
  EXPECT_EQ(custom->roles[0].env.at("LOGLEVEL"), "WARNING");
}

TEST_F(ComponentsTest, PythonNeedsExactlyOneProgram) {
  auto app = Run("utils.python", {"-m", "foo.main", "--", "--x", "1"});
  ASSERT_TRUE(app.has_value()) << app.error().message;
  EXPECT_EQ(app->name, "torchx_utils_python");
  EXPECT_EQ(app->roles[0].entrypoint, "python");
  EXPECT_EQ(app->roles[0].args, (std::vector<std::string>{"-m", "foo.main", "--x", "1"}));
  EXPECT_EQ(app->roles[0].env.at("HYDRA_MAIN_MODULE"), "foo.main");
  auto none = Run("utils.python", {});
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().message,
            "utils.python: exactly one of `-m`, `-c` and `--script` needs to be specified");
  EXPECT_FALSE(Run("utils.python", {"-c", "x", "--script", "y.py"}).has_value());
}

TEST_F(ComponentsTest, BinaryAndTouch) {
  auto bin = Run("utils.binary", {"--entrypoint", "/bin/true", "a"});
  ASSERT_TRUE(bin.has_value());
  EXPECT_EQ(bin->roles[0].image, "<NONE>");
  EXPECT_EQ(bin->roles[0].args, std::vector<std::string>{"a"});
  EXPECT_FALSE(Run("utils.binary", {}).has_value());
  auto touch = Run("utils.touch", {"--file", "/tmp/x"});
  ASSERT_TRUE(touch.has_value());
  EXPECT_EQ(touch->roles[0].args, std::vector<std::string>{"/tmp/x"});
}

TEST_F(ComponentsTest, CopyAndBoothMatchTorchx) {
  auto copy = Run("utils.copy", {"--src", "s3://a/x", "--dst", "/tmp/x"});
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  EXPECT_EQ(copy->name, "torchx-utils-copy");
  EXPECT_EQ(copy->roles[0].entrypoint, "python");
  EXPECT_EQ(copy->roles[0].args, (std::vector<std::string>{"-m", "torchx.apps.utils.copy_main", "--src", "s3://a/x",
                                                           "--dst", "/tmp/x"}));
  EXPECT_EQ(copy->roles[0].resource.mem_mb, 1024);
  // str(float) as Python prints it: 1 -> "1.0", 0.25 -> "0.25".
  auto booth = Run("utils.booth", {"--x1", "1", "--x2", "0.25"});
  ASSERT_TRUE(booth.has_value()) << booth.error().message;
  EXPECT_EQ(booth->roles[0].args,
            (std::vector<std::string>{"-m", "torchx.apps.utils.booth_main", "--x1", "1.0", "--x2", "0.25", "--trial_idx",
                                      "0", "--tracker_base", "/tmp/torchx-util-booth"}));
  EXPECT_FALSE(Run("utils.booth", {"--x1", "1"}).has_value());  // x2 is required
}

TEST_F(ComponentsTest, DdpBuildsTorchxTorchrunCommand) {
  auto app = Run("dist.ddp", {"-j", "2x4", "--script", "main.py"});
  ASSERT_TRUE(app.has_value()) << app.error().message;
  EXPECT_EQ(app->name, "main");
  const Role& r = app->roles[0];
  EXPECT_EQ(r.name, "main");
  EXPECT_EQ(r.entrypoint, "bash");
  EXPECT_EQ(r.num_replicas, 2);
  EXPECT_EQ(r.min_replicas, 2);
  EXPECT_EQ(r.port_map.at("c10d"), 29500);
  EXPECT_EQ(r.resource.cpu, 2);
  EXPECT_EQ(r.resource.mem_mb, 1024);
  ASSERT_EQ(r.args.size(), 2u);
  EXPECT_EQ(r.args[0], "-c");
  EXPECT_EQ(r.args[1],
            "torchrun --rdzv_backend c10d --rdzv_endpoint $${${rank0_env}:=localhost}:29500 "
            "--rdzv_id '${app_id}' --nnodes 2 --nproc_per_node 4 --tee 3 --role '' main.py");
  EXPECT_EQ(r.env.at("TORCHX_TRACKING_EXPERIMENT_NAME"), "default-experiment");
  EXPECT_EQ(r.env.at("TORCHX_TRACKING_RUN_NAME"), "main");
  EXPECT_EQ(r.env.at("LOGLEVEL"), "WARNING");
  // After macros, as the local scheduler would run it.
  MacroValues values{"/cwd", "main-abc", "0", "TORCHX_RANK0_HOST"};
  EXPECT_EQ(values.Apply(r).args[1],
            "torchrun --rdzv_backend c10d --rdzv_endpoint ${TORCHX_RANK0_HOST:=localhost}:29500 "
            "--rdzv_id 'main-abc' --nnodes 2 --nproc_per_node 4 --tee 3 --role '' main.py");
}

TEST_F(ComponentsTest, DdpOptionsOverrideEveryDefault) {
  auto app = Run("dist.ddp",
                 {"-j", "1:3x2", "-m", "pkg.trainer", "--name", "exp/run1", "--rdzv_port", "29600",
                  "--rdzv_backend", "static", "--rdzv_conf", "timeout=600", "--tee", "1",
                  "--debug", "true", "--env", "PET_REDIRECTS=1", "--max_retries", "2", "--mounts",
                  "type=bind,src=/data,dst=/data", "--cpu", "4", "--memMB", "0", "--", "--lr",
                  "0.1"});
  ASSERT_TRUE(app.has_value()) << app.error().message;
  EXPECT_EQ(app->name, "run1");
  const Role& r = app->roles[0];
  EXPECT_EQ(r.name, "trainer");
  EXPECT_EQ(r.num_replicas, 3);
  EXPECT_EQ(r.min_replicas, 1);
  EXPECT_EQ(r.max_retries, 2);
  EXPECT_EQ(r.resource.cpu, 4);
  EXPECT_EQ(r.resource.mem_mb, 1024);  // TorchX: an explicit 0 becomes the default
  EXPECT_EQ(r.port_map.at("c10d"), 29600);
  EXPECT_EQ(r.args[1],
            "torchrun --rdzv_backend static --rdzv_conf timeout=600 --rdzv_endpoint "
            "$${${rank0_env}:=localhost}:29600 --rdzv_id '${app_id}' --nnodes 1:3 "
            "--nproc_per_node 2 --tee 1 --role '' --node_rank '${replica_id}' -m pkg.trainer "
            "--lr 0.1");
  EXPECT_EQ(r.env.at("TORCHX_TRACKING_EXPERIMENT_NAME"), "exp");
  EXPECT_EQ(r.env.at("PET_REDIRECTS"), "1");
  EXPECT_EQ(r.env.at("TORCH_DISTRIBUTED_DEBUG"), "DETAIL");
  EXPECT_EQ(std::get<BindMount>(r.mounts.at(0)), (BindMount{"/data", "/data", false}));
}

TEST_F(ComponentsTest, DdpSingleNodeUsesARandomPort) {
  auto app = Run("dist.ddp", {"-j", "1x2", "--script", "t.py"});
  ASSERT_TRUE(app.has_value());
  EXPECT_NE(app->roles[0].args[1].find("--rdzv_endpoint localhost:0 "), std::string::npos);
  auto bare = Run("dist.ddp", {"-j", "4", "--script", "t.py"});
  EXPECT_NE(bare->roles[0].args[1].find("--nnodes 1 --nproc_per_node 4"), std::string::npos);
}

TEST_F(ComponentsTest, DdpNamedResourceWins) {
  auto app = Run("dist.ddp", {"-h", "gpu.small", "--cpu", "64", "--script", "t.py"});
  ASSERT_TRUE(app.has_value());
  EXPECT_EQ(app->roles[0].resource.cpu, 8);
  EXPECT_EQ(app->roles[0].resource.gpu, 1);
  auto bad = Run("dist.ddp", {"-h", "gpu.smal", "--script", "t.py"});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("Did you mean `gpu.small`?"), std::string::npos);
}

TEST_F(ComponentsTest, DdpErrorCases) {
  auto neither = Run("dist.ddp", {});
  ASSERT_FALSE(neither.has_value());
  EXPECT_EQ(neither.error().message, "dist.ddp: exactly one of --script and -m must be specified");
  EXPECT_FALSE(Run("dist.ddp", {"--script", "a.py", "-m", "b"}).has_value());
  auto bad_mount = Run("dist.ddp", {"--script", "a.py", "--mounts", "src=/a"});
  ASSERT_FALSE(bad_mount.has_value());
  EXPECT_EQ(bad_mount.error().message, "dist.ddp: argument --mounts: type must be specified first");
}

TEST(ParseNNodesTest, MatchesTorchx) {
  struct Case {
    const char* j;
    int min, max, nproc;
    const char* rep;
  };
  const Case ok[] = {{"2:4x1", 2, 4, 1, "2:4"}, {"2x1", 2, 2, 1, "2"}, {"2", 1, 1, 2, "1"},
                     {"0:1x8", 0, 1, 8, "0:1"}};
  for (const auto& c : ok) {
    SCOPED_TRACE(c.j);
    auto n = ParseNNodes(c.j);
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(n->min_nnodes, c.min);
    EXPECT_EQ(n->max_nnodes, c.max);
    EXPECT_EQ(n->nproc_per_node, c.nproc);
    EXPECT_EQ(n->nnodes_rep, c.rep);
  }
  for (const char* bad : {"1x", "x2", ":3", ":2x1", "1x2:3", "", "axb", "99999999999x1"}) {
    SCOPED_TRACE(bad);
    auto n = ParseNNodes(bad);
    ASSERT_FALSE(n.has_value());
    EXPECT_EQ(n.error().message,
              std::string("Invalid format for -j, usage example: 1:2x4 or 1x4 or 4. Given: ") + bad);
  }
}

TEST_F(ComponentsTest, SpmdInfersProcsFromTheHostGpus) {
  auto app = Run("dist.spmd", {"-j", "2", "-h", "aws_p4d.24xlarge", "--script", "t.py"});
  ASSERT_TRUE(app.has_value()) << app.error().message;
  EXPECT_NE(app->roles[0].args[1].find("--nnodes 2 --nproc_per_node 8"), std::string::npos);
  EXPECT_EQ(app->roles[0].resource.gpu, 8);
  auto cpu_host = Run("dist.spmd", {"-j", "2", "-h", "aws_trn1.32xlarge", "--script", "t.py"});
  ASSERT_FALSE(cpu_host.has_value());
  EXPECT_NE(cpu_host.error().message.find("nproc_per_node cannot be inferred from GPU count"),
            std::string::npos);
  auto dflt = Run("dist.spmd", {"--script", "t.py"});
  ASSERT_TRUE(dflt.has_value());
  EXPECT_EQ(dflt->roles[0].resource.gpu, 1);  // gpu.small
  EXPECT_FALSE(Run("dist.spmd", {"-j", "1:2x8", "--script", "t.py"}).has_value());
}

}  // namespace
}  // namespace torchxd::core
