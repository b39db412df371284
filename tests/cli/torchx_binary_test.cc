// Drives the real `torchx` binary: outputs, exit codes, and a table of bad
// inputs with their messages.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/shell.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using torchxd::testing::Output;
using torchxd::testing::Quote;
using torchxd::testing::RunShell;

class TorchxBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("torchx_cli_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs torchx in dir_ with a private HOME and no TORCHXCONFIG.
  Output Torchx(const std::vector<std::string>& args, const std::string& env = "") {
    std::string cmd = "cd " + Quote(dir_.string()) + " && env -u TORCHXCONFIG -u TORCHX_NAMED_RESOURCES HOME=" +
                      Quote(dir_.string()) + " " + env + " " + TORCHX_BIN;
    for (const auto& a : args) cmd += " " + Quote(a);
    return RunShell(cmd, (dir_ / "stderr").string());
  }

  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }

  fs::path dir_;
};

TEST_F(TorchxBinaryTest, BuiltinsListsEveryComponent) {
  auto o = Torchx({"builtins"});
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_THAT(o.out, HasSubstr("Found 9 builtin components:\n  1. dist.ddp\n"));
  EXPECT_THAT(o.out, HasSubstr("  3. utils.echo\n"));
}

TEST_F(TorchxBinaryTest, RunoptsPrintsUsage) {
  auto o = Torchx({"runopts", "local_cwd"});
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_THAT(o.out, HasSubstr("local_cwd:\n    usage:\n        [log_dir=LOG_DIR]"));
  EXPECT_THAT(o.out, HasSubstr("prepend_cwd=PREPEND_CWD (bool, False)"));
}

TEST_F(TorchxBinaryTest, VersionAndHelpNeedNoDaemon) {
  auto v = Torchx({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_THAT(v.out, HasSubstr("torchx (torchxd) "));
  auto h = Torchx({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_THAT(h.out, HasSubstr("Exit codes: 0 ok; 1"));
  auto ch = Torchx({"run", "utils.echo", "--help"});
  EXPECT_EQ(ch.exit_code, 0);
  EXPECT_THAT(ch.out, HasSubstr("usage: torchx run <run args...> utils.echo"));
}

TEST_F(TorchxBinaryTest, DryrunExpandsDdpPerReplica) {
  auto o = Torchx({"run", "--dryrun", "-cfg", "log_dir=/logs", "dist.ddp", "-j", "2x1", "--script",
                   "train.py", "--", "--steps", "3"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto app_at = o.out.find("=== APPLICATION ===\n");
  auto req_at = o.out.find("=== SCHEDULER REQUEST ===\n");
  ASSERT_EQ(app_at, 0u);
  ASSERT_NE(req_at, std::string::npos);
  auto app = nlohmann::json::parse(o.out.substr(20, req_at - 20));
  EXPECT_EQ(app["name"], "train");
  EXPECT_EQ(app["roles"][0]["num_replicas"], 2);
  auto req = nlohmann::json::parse(o.out.substr(req_at + 26));
  ASSERT_EQ(req["replicas"].size(), 2u);
  std::string handle = req["app_handle"];
  std::string app_id = handle.substr(handle.rfind('/') + 1);
  EXPECT_EQ(handle.rfind("local_cwd://torchx/train-", 0), 0u);
  const auto& r1 = req["replicas"][1];
  EXPECT_EQ(r1["replica_id"], 1);
  EXPECT_EQ(r1["cwd"], fs::canonical(dir_).string());
  EXPECT_EQ(r1["log_dir"], "/logs/torchx/" + app_id + "/train/1");
  // TorchX's port, or the first free one above it that the daemon would give
  // the app (a job of another test may hold 29500 now).
  EXPECT_THAT(r1["args"][1].get<std::string>(),
              ::testing::ContainsRegex("--rdzv_endpoint \\$\\{TORCHX_RANK0_HOST:=localhost\\}:(29[5-9][0-9][0-9]) --rdzv_id '" +
                                       app_id + "'"));
  EXPECT_THAT(r1["args"][1].get<std::string>(), HasSubstr("train.py --steps 3"));
  EXPECT_EQ(r1["env"]["TORCHX_RANK0_HOST"], "localhost");
}

TEST_F(TorchxBinaryTest, KubernetesDryrunPrintsTheExactVolcanoJob) {
  auto o = Torchx({"run", "--dryrun", "-s", "kubernetes", "-cfg", "queue=research,namespace=ml,tolerations=nvidia.com/gpu:NoSchedule",
                   "dist.ddp", "-j", "2x1", "--script", "train.py"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto req_at = o.out.find("=== SCHEDULER REQUEST ===\n");
  ASSERT_NE(req_at, std::string::npos);
  auto job = nlohmann::json::parse(o.out.substr(req_at + 26));
  EXPECT_EQ(job["kind"], "Job");
  EXPECT_EQ(job["spec"]["queue"], "research");
  EXPECT_EQ(job["spec"]["tasks"].size(), 2u);
  EXPECT_THAT(job["metadata"]["name"].get<std::string>(), ::testing::StartsWith("train-"));
  EXPECT_EQ(job["spec"]["tasks"][1]["template"]["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");
  // The rank-0 host is the svc plugin's host list on every replica but rank 0.
  EXPECT_THAT(job["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["command"][2].get<std::string>(),
              HasSubstr("${VC_TRAIN_0_HOSTS:=localhost}:29500"));
  auto no_queue = Torchx({"run", "--dryrun", "-s", "kubernetes", "utils.echo"});
  EXPECT_EQ(no_queue.exit_code, 2);
  EXPECT_THAT(no_queue.err, HasSubstr("Required run option: queue"));
  auto opts = Torchx({"runopts", "kubernetes"});
  EXPECT_EQ(opts.exit_code, 0);
  EXPECT_THAT(opts.out, HasSubstr("queue=QUEUE (str)\n            Volcano queue to schedule job in."));
}

TEST_F(TorchxBinaryTest, DryrunReadsAnAppDefJsonFileAndTorchxconfig) {
  Write("job.json", R"({"name": "hello", "roles": [{"name": "greeter", "entrypoint": "echo",
      "args": ["${replica_id}"], "num_replicas": 2, "resource": "cpu.small"}]})");
  Write(".torchxconfig", "[local_cwd]\nlog_dir = /from/config\n");
  auto o = Torchx({"run", "--dryrun", "./job.json"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("\"log_dir\": \"/from/config\""));
  EXPECT_THAT(o.out, HasSubstr("\"memMB\": 2048"));
  EXPECT_THAT(o.out, HasSubstr("\"args\": [\n        \"1\"\n      ]"));
  auto cfg_wins = Torchx({"run", "--dryrun", "-cfg", "log_dir=/from/cfg", "./job.json"});
  EXPECT_THAT(cfg_wins.out, HasSubstr("\"log_dir\": \"/from/cfg\""));
}

TEST_F(TorchxBinaryTest, UnknownCfgKeysWarnAndAreDropped) {
  auto o = Torchx({"run", "--dryrun", "-cfg", "logdir=/x", "utils.echo"});
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_THAT(o.err, HasSubstr("unknown run option passed to scheduler: logdir=/x. Did you mean `log_dir`?"));
}

TEST_F(TorchxBinaryTest, BadInputsAreOneClearLineAndExitTwo) {
  Write("bad.json", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "num_replicas": 0}]})");
  Write("broken.json", "{");
  struct Case {
    const char* name;
    std::vector<std::string> args;
    const char* message;
  };
  const Case cases[] = {
      {"unknown component", {"run", "--dryrun", "utils.ecoh"},
       "torchx: error: unknown component `utils.ecoh`. Did you mean `utils.echo`?"},
      {"unknown component arg", {"run", "--dryrun", "utils.echo", "--mesg", "x"},
       "utils.echo: unrecognized argument: --mesg. Did you mean `--msg`? (see `torchx run utils.echo --help`)"},
      {"bad -j", {"run", "--dryrun", "dist.ddp", "-j", "2x", "--script", "t.py"},
       "Invalid format for -j, usage example: 1:2x4 or 1x4 or 4. Given: 2x"},
      {"bad cfg value", {"run", "--dryrun", "-cfg", "prepend_cwd=maybe", "utils.echo"},
       "`maybe` is not a valid bool literal"},
      {"malformed cfg", {"run", "--dryrun", "-cfg", "log_dir", "utils.echo"},
       "-cfg: `log_dir` does not have at least one `key=value` pair"},
      {"unknown scheduler", {"run", "--dryrun", "-s", "local_cdw", "utils.echo"},
       "unknown scheduler `local_cdw`. Did you mean `local_cwd`?"},
      {"invalid appdef", {"run", "--dryrun", "bad.json"},
       "bad.json: roles[0].num_replicas: must be > 0, got 0"},
      {"broken json", {"run", "--dryrun", "broken.json"}, "broken.json: invalid JSON"},
      {"missing file", {"run", "--dryrun", "nope.json"}, "cannot read AppDef file nope.json"},
      {"missing component", {"run", "--dryrun"}, "missing COMPONENT"},
      {"local_dir bad image", {"run", "--dryrun", "-s", "local_dir", "utils.echo", "--image", "nodir"},
       "Invalid image name: nodir, does not exist or is not a directory"},
      {"workspace on local_docker", {"run", "--dryrun", "-s", "local_docker", "--workspace", ".", "utils.echo"},
       "--workspace .: torchxd does not build workspace images for local_docker"},
      {"repeated component option", {"run", "--dryrun", "utils.echo", "--msg", "a", "--msg", "b"},
       "Repeated Command Line Arguments: ['--msg']"},
      {"detach with wait", {"run", "-d", "--wait", "utils.echo"}, "-d/--detach returns at once"},
      {"repeated run option", {"run", "--dryrun", "-s", "local_cwd", "-s", "local_dir", "utils.echo"}, "-s"},
      {"print unknown builtin", {"builtins", "--print", "utils.ecoh"}, "unknown component `utils.ecoh`"},
      {"configure unknown scheduler", {"configure", "-s", "lsf"}, "unknown scheduler `lsf`"},
      {"unknown command", {"frobnicate"}, "torchx: error: "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto o = Torchx(c.args);
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_THAT(o.err, HasSubstr(c.message));
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
  // `tracker` is TorchX's: without a Python to hand it to, one line saying so.
  auto tracker = Torchx({"tracker", "list", "jobs"}, "TORCHX_PYTHON=/nonexistent/python3");
  EXPECT_EQ(tracker.exit_code, 2);
  EXPECT_THAT(tracker.err, HasSubstr("cannot run /nonexistent/python3 ($TORCHX_PYTHON): No such file or directory"));
}

TEST_F(TorchxBinaryTest, BuiltinsPrintShowsTheSignatureAndDocstring) {
  auto o = Torchx({"builtins", "--print", "utils.echo"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("def echo(\n    msg: str = 'hello world',\n"));
  EXPECT_THAT(o.out, HasSubstr("    num_replicas: int = 1,\n) -> specs.AppDef:\n"));
  EXPECT_THAT(o.out, HasSubstr("        msg: message to echo\n"));
  auto sh = Torchx({"builtins", "--print", "utils.sh"});
  EXPECT_THAT(sh.out, HasSubstr("    *args: str,\n"));
  EXPECT_THAT(sh.out, HasSubstr("    h: Optional[str] = None,\n"));
}

TEST_F(TorchxBinaryTest, ConfigureWritesTorchxsTemplateThatRunReadsBack) {
  auto printed = Torchx({"configure", "-s", "local_cwd,kubernetes", "--print"});
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  EXPECT_EQ(printed.out, "[local_cwd]\n\n[kubernetes]\nqueue = #FIXME:(str) Volcano queue to schedule job in.\n\n");
  Write(".torchxconfig", "[local_cwd]\nlog_dir = /mine\n");
  auto written = Torchx({"configure", "-s", "local_cwd", "-a"});
  ASSERT_EQ(written.exit_code, 0) << written.err;
  EXPECT_THAT(written.err, HasSubstr("the previous .torchxconfig is now .torchxconfig.bak"));
  std::ifstream in(dir_ / ".torchxconfig");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_THAT(text, HasSubstr("[local_cwd]\nlog_dir = None\nprepend_cwd = False\n"));
  EXPECT_THAT(text, HasSubstr("restart_backoff = 1.0\n"));
  // The template is valid input: every default reads back as itself.
  auto dry = Torchx({"run", "--dryrun", "utils.echo"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(dry.err, "");
  EXPECT_TRUE(fs::exists(dir_ / ".torchxconfig.bak"));
}

TEST_F(TorchxBinaryTest, ExampleTrainingScriptDryrunsAsTheReadmeShows) {
  auto o = Torchx({"run", "--dryrun", "dist.ddp", "-j", "2x1", "--tee", "1", "--env",
                   "PET_REDIRECTS=1", "--script", std::string(TORCHXD_SOURCE_DIR) + "/examples/train.py"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("--tee 1"));
  EXPECT_THAT(o.out, HasSubstr("\"PET_REDIRECTS\": \"1\""));
}

}  // namespace
