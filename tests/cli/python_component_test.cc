// TorchX components written in Python, end to end with the real torchx and
// torchxd: `PATH.py:FN`, `MODULE:FN` and entry-point components materialized
// by the user's `torchx` package (a stand-in under tests/cli/torchx_standin),
// their arguments, --help, errors, and `builtins`.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/shell.h"
#include "tests/cli/torchx_sandbox.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using torchxd::testing::Output;
using torchxd::testing::Quote;

constexpr const char* kPython = "/usr/bin/python3";

constexpr const char* kComponent = R"PY(import torchx.specs as specs


def trainer(*script_args: str, msg: str = "hi", nodes: int = 2) -> specs.AppDef:
    """Trains.

    Args:
        script_args: passed on
        msg: what to say
        nodes: replicas
    """
    return specs.AppDef(
        name="trainer",
        roles=[specs.Role(
            name="worker", image="/", entrypoint="sh",
            args=["-c", "echo " + msg + " $0 " + " ".join(script_args), specs.macros.replica_id],
            env={"JOB": specs.macros.app_id}, num_replicas=nodes,
            resource=specs.Resource(cpu=1, gpu=0, memMB=64),
            mounts=[specs.BindMount(src_path="/tmp", dst_path="/data", read_only=True)])])


def broken(msg: str = "x") -> specs.AppDef:
    """Raises.

    Args:
        msg: m
    """
    raise ValueError("no good: " + msg)
)PY";

class PythonComponentTest : public torchxd::testing::TorchxSandbox {
 protected:
  PythonComponentTest() : TorchxSandbox("txp_") {}

  void SetUp() override {
    TorchxSandbox::SetUp();
    if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is not installed";
    Write("my_component.py", kComponent);
  }
  void Write(const std::string& name, const std::string& text) {
    fs::create_directories((dir_ / "work" / name).parent_path());
    std::ofstream(dir_ / "work" / name) << text;
  }
  // torchx with the stand-in `torchx` package (and `extra_path`) on PYTHONPATH.
  Output Py(const std::vector<std::string>& args, const std::string& extra_path = "") {
    std::string path = std::string(TORCHXD_SOURCE_DIR) + "/tests/cli/torchx_standin";
    if (!extra_path.empty()) path += ":" + extra_path;
    return Torchx(args, "TORCHX_PYTHON=" + std::string(kPython) + " PYTHONPATH=" + Quote(path));
  }
};

TEST_F(PythonComponentTest, AFileComponentRunsWithTorchxsArgumentParsing) {
  auto run = Py({"run", "./my_component.py:trainer", "--msg", "hey", "--", "a", "b"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("worker/0 hey 0 a b\n"));
  EXPECT_THAT(run.err, HasSubstr("worker/1 hey 1 a b\n"));  // nodes defaults to 2

  auto dry = Py({"run", "--dryrun", "./my_component.py:trainer", "--nodes", "1"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  auto app_text = dry.out.substr(0, dry.out.find("=== SCHEDULER REQUEST ==="));
  auto app = nlohmann::json::parse(app_text.substr(app_text.find('{')));
  const auto& role = app["roles"][0];
  EXPECT_EQ(role["args"][2], "${replica_id}");  // macros stay for the scheduler
  EXPECT_EQ(role["env"]["JOB"], "${app_id}");
  EXPECT_EQ(role["num_replicas"], 1);
  EXPECT_EQ(role["resource"]["memMB"], 64);
  EXPECT_EQ(role["mounts"][0]["dst_path"], "/data");
  EXPECT_EQ(role["mounts"][0]["read_only"], true);

  auto help = Py({"run", "./my_component.py:trainer", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--msg"));
  auto usage = Py({"run", "./my_component.py:trainer", "--bogus", "1"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("unrecognized arguments: --bogus"));
}

TEST_F(PythonComponentTest, ComponentDefaultsComeFromTorchxconfig) {
  Write(".torchxconfig", "[component:./my_component.py:trainer]\nmsg = from-config\nnodes = 1\n");
  auto run = Py({"run", "./my_component.py:trainer"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("worker/0 from-config 0"));
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("worker/1")));
}

TEST_F(PythonComponentTest, ModuleAndEntryPointComponents) {
  Write("pkgs/my_pkg/__init__.py", "");
  Write("pkgs/my_pkg/components.py", kComponent);
  auto module = Py({"run", "my_pkg.components:trainer", "--nodes", "1"}, (dir_ / "work/pkgs").string());
  ASSERT_EQ(module.exit_code, 0) << module.err;
  EXPECT_THAT(module.err, HasSubstr("worker/0 hi 0"));

  Write("pkgs/my_pkg-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: my_pkg\nVersion: 0.1\n");
  Write("pkgs/my_pkg-0.1.dist-info/entry_points.txt", "[torchx.components]\nteam = my_pkg.components\n");
  auto listed = Py({"builtins"}, (dir_ / "work/pkgs").string());
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr(". team.trainer\n"));
  EXPECT_THAT(listed.out, HasSubstr(". utils.echo\n"));
  auto ep = Py({"run", "team.trainer", "--nodes", "1", "--msg", "ep"}, (dir_ / "work/pkgs").string());
  ASSERT_EQ(ep.exit_code, 0) << ep.err;
  EXPECT_THAT(ep.err, HasSubstr("worker/0 ep 0"));
  // Without the entry point a typo is still "unknown component", one line.
  auto typo = Py({"run", "team.trainr"}, (dir_ / "work/pkgs").string());
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("unknown component `team.trainr`"));
}

// The same through the real TorchX, HEAD and 0.7.0 (../shared/peers): their
// entrypoints APIs differ (0.7's load_group takes a default, HEAD's does not).
TEST_F(PythonComponentTest, EntryPointComponentsWorkWithTheRealTorchxHeadAnd070) {
  Write("pkgs/my_pkg/__init__.py", "");
  Write("pkgs/my_pkg/components.py", kComponent);
  Write("pkgs/my_pkg-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: my_pkg\nVersion: 0.1\n");
  Write("pkgs/my_pkg-0.1.dist-info/entry_points.txt",
        "[torchx.components]\nteam = my_pkg.components\n\n[torchx.named_resources]\nmy_res = my_pkg.resources:my_res\n");
  Write("pkgs/my_pkg/resources.py",
        "from torchx.specs import Resource\n\n\ndef my_res():\n    return Resource(cpu=3, gpu=0, memMB=1234)\n");
  int tried = 0;
  for (const char* peer : {"torchx-head", "torchx-0.7.0"}) {
    fs::path tree = fs::path(TORCHXD_SOURCE_DIR) / ".." / "shared" / "peers" / peer;
    if (!fs::exists(tree)) continue;
    std::string env = "TORCHX_PYTHON=" + std::string(kPython) + " PYTHONPATH=" + Quote(tree.string() + ":" + (dir_ / "work/pkgs").string());
    if (torchxd::testing::RunShell(env + " " + kPython + " -c 'import torchx.specs.finder'", (dir_ / "probe.err").string()).exit_code != 0) {
      continue;  // TorchX's Debian dependencies are missing here
    }
    ++tried;
    auto listed = Torchx({"builtins"}, env);
    EXPECT_EQ(listed.exit_code, 0) << peer << ": " << listed.err;
    EXPECT_EQ(listed.err.find("Traceback"), std::string::npos) << peer << ": " << listed.err;
    EXPECT_THAT(listed.out, HasSubstr(". team.trainer\n")) << peer;
    auto ep = Torchx({"run", "team.trainer", "--nodes", "1", "--msg", "real"}, env);
    EXPECT_EQ(ep.exit_code, 0) << peer << ": " << ep.err;
    EXPECT_THAT(ep.err, HasSubstr("worker/0 real 0")) << peer;
    // Named resources of entry points, read through that TorchX too.
    auto dry = Torchx({"run", "--dryrun", "utils.python", "-h", "my_res", "--c", "pass"}, env);
    EXPECT_EQ(dry.exit_code, 0) << peer << ": " << dry.err;
    EXPECT_THAT(dry.out, HasSubstr("\"memMB\": 1234")) << peer << ": " << dry.out;
    auto unknown = Torchx({"run", "--dryrun", "utils.python", "-h", "no_such_res", "--c", "pass"}, env);
    EXPECT_EQ(unknown.exit_code, 2) << peer;
    EXPECT_THAT(unknown.err, HasSubstr("No named resource found for `no_such_res`")) << peer;
  }
  if (tried == 0) GTEST_SKIP() << "../shared/peers/torchx-{head,0.7.0} are absent or do not import here";
}

TEST_F(PythonComponentTest, ErrorsAreOneClearLineAndExitTwo) {
  struct Case {
    const char* name;
    std::vector<std::string> args;
    std::string env;
    std::string message;
  };
  std::string standin = "PYTHONPATH=" + Quote(std::string(TORCHXD_SOURCE_DIR) + "/tests/cli/torchx_standin");
  const Case cases[] = {
      {"raises", {"run", "./my_component.py:broken"}, "TORCHX_PYTHON=/usr/bin/python3 " + standin,
       "component `./my_component.py:broken`: ValueError: no good: x"},
      {"no such function", {"run", "./my_component.py:nope"}, "TORCHX_PYTHON=/usr/bin/python3 " + standin,
       "Function nope does not exist in file ./my_component.py"},
      {"no torchx package", {"run", "./my_component.py:trainer"}, "TORCHX_PYTHON=/usr/bin/python3 PYTHONPATH=",
       "`/usr/bin/python3` cannot import TorchX (ModuleNotFoundError: No module named 'torchx'): install it there "
       "(pip install torchx) or set TORCHX_PYTHON to a Python that has it"},
      {"no interpreter", {"run", "./my_component.py:trainer"}, "TORCHX_PYTHON=/nonexistent/python3",
       "cannot run the Python interpreter `/nonexistent/python3` ($TORCHX_PYTHON)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto o = Torchx(c.args, c.env);
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_THAT(o.err, HasSubstr(c.message));
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
}

}  // namespace
