// TorchX's `run` contract, end to end with the real torchx and torchxd: on a
// local scheduler `run` stays attached (role/N lines on stderr, the job's
// result as exit code), Ctrl-C cancels, SIGHUP detaches, -d returns at once;
// .torchxconfig's [cli:run], --stdin, and the flags TorchX users pass.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/shell.h"
#include "tests/cli/torchx_sandbox.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using torchxd::testing::Output;
using torchxd::testing::Quote;

class RunContractTest : public torchxd::testing::TorchxSandbox {
 protected:
  RunContractTest() : TorchxSandbox("txr_") {}

  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / "work" / name) << text; }
  std::string Read(const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  // torchx ARGS in the background, stdout and stderr to files; its pid.
  pid_t Start(const std::vector<std::string>& args) {
    std::string cmd = TorchxCommand(args, "", true) + " >" + Quote((dir_ / "bg.out").string()) + " 2>" +
                      Quote((dir_ / "bg.err").string());
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  }
  // Until `text` is in the background torchx's stderr (false after 30 s).
  bool AwaitErr(const std::string& text) {
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30); std::chrono::steady_clock::now() < end;) {
      if (Read(dir_ / "bg.err").find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // The wait status of `pid` (-1 if it has not ended within 30 s; it is then killed).
  int Reap(pid_t pid) {
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30); std::chrono::steady_clock::now() < end;) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) return status;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return -1;
  }
  // The state once the app started: PENDING ("starting: ...") until its first replica runs.
  std::string State(const std::string& handle) {
    json j;
    WaitUntil([&] {
      j = json::parse(Torchx({"status", "--json", handle}).out, nullptr, false);
      return !j.is_object() || j["state"] != "PENDING" || j.value("msg", "").rfind("starting:", 0) != 0;
    }, 10);
    return j.is_object() ? j.value("state", "?") : "?";
  }
};

TEST_F(RunContractTest, LocalRunStaysAttachedStreamsPrefixedLinesAndExitsWithTheJobsResult) {
  auto ok = Torchx({"run", "utils.sh", "--num_replicas", "2", "--", "sh", "-c", "echo one; echo two >&2"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, ::testing::MatchesRegex("local_cwd://torchx/sh-[a-z0-9]+\n"));  // only the handle
  for (const char* line : {"sh/0 one\n", "sh/0 two\n", "sh/1 one\n", "sh/1 two\n"}) EXPECT_THAT(ok.err, HasSubstr(line));
  EXPECT_EQ(State(Handle(ok)), "SUCCEEDED");  // it returned after the end, not before

  auto failed = Torchx({"run", "utils.sh", "false"});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_THAT(failed.err, HasSubstr("State: FAILED"));

  // Long enough that a busy machine's `status` still finds it running (a second was not).
  auto detached = Torchx({"run", "-d", "utils.sh", "--", "sh", "-c", "sleep 60; exit 3"});
  EXPECT_EQ(detached.exit_code, 0) << detached.err;
  EXPECT_EQ(detached.err, "");
  EXPECT_EQ(State(Handle(detached)), "RUNNING");
  EXPECT_EQ(Torchx({"cancel", Handle(detached)}).exit_code, 0);
}

TEST_F(RunContractTest, CtrlCCancelsTheAppAndTheCliEndsBySigint) {
  pid_t pid = Start({"run", "utils.sh", "--", "sh", "-c", "echo started; sleep 60"});
  ASSERT_TRUE(AwaitErr("sh/0 started")) << Read(dir_ / "bg.err");
  ::kill(pid, SIGINT);
  int status = Reap(pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status << "\n" << Read(dir_ / "bg.err");
  EXPECT_EQ(WTERMSIG(status), SIGINT);  // a calling shell loop stops too
  std::string handle = Read(dir_ / "bg.out");
  handle = handle.substr(0, handle.find('\n'));
  EXPECT_EQ(State(handle), "CANCELLED");
  std::string err = Read(dir_ / "bg.err");
  EXPECT_THAT(err, HasSubstr("interrupted: cancelling " + handle));
  EXPECT_THAT(err, HasSubstr("State: CANCELLED"));  // it stayed until the app had ended
}

TEST_F(RunContractTest, SighupDetachesAndTheAppKeepsRunning) {
  pid_t pid = Start({"run", "utils.sh", "--", "sh", "-c", "echo started; sleep 60"});
  ASSERT_TRUE(AwaitErr("sh/0 started")) << Read(dir_ / "bg.err");
  ::kill(pid, SIGHUP);
  int status = Reap(pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGHUP);
  std::string handle = Read(dir_ / "bg.out");
  handle = handle.substr(0, handle.find('\n'));
  EXPECT_EQ(State(handle), "RUNNING");
  EXPECT_EQ(Torchx({"cancel", handle}).exit_code, 0);
}

TEST_F(RunContractTest, CliRunSectionGivesDefaultsTheCommandLineOverrides) {
  Write(".torchxconfig",
        "[cli:run]\nscheduler = local_dir\ncomponent = utils.echo\ndetach = True\nworkspace =\nfrobs = 1\n");
  // component and scheduler from the file: the args start with an option.
  auto dry = Torchx({"run", "--dryrun", "--msg", "hey", "--image", "."});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("\"app_handle\": \"local_dir://torchx/echo-"));
  EXPECT_THAT(dry.out, HasSubstr("\"hey\""));
  EXPECT_THAT(dry.err, HasSubstr("`frobs = 1` in [cli:run] of " + (dir_ / "work/.torchxconfig").string() +
                                 " is not a `torchx run` argument; ignored"));
  // detach = True: returns at once; -s on the command line wins over the file.
  // (It runs far longer than a starved CLI can take to return.)
  auto detached = Torchx({"run", "-s", "local_cwd", "utils.sh", "--", "sh", "-c", "sleep 120"});
  ASSERT_EQ(detached.exit_code, 0) << detached.err;
  EXPECT_THAT(detached.out, HasSubstr("local_cwd://torchx/sh-"));
  EXPECT_EQ(State(Handle(detached)), "RUNNING");
  EXPECT_EQ(Torchx({"cancel", Handle(detached)}).exit_code, 0);
  // --wait on the command line overrides detach = True.
  auto waited = Torchx({"run", "-s", "local_cwd", "--wait", "utils.sh", "false"});
  EXPECT_EQ(waited.exit_code, 1);
  Write(".torchxconfig", "[cli:run]\ndetach = sometimes\n");
  auto bad = Torchx({"run", "utils.echo"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("[cli:run] detach in " + (dir_ / "work/.torchxconfig").string() +
                                 ": `sometimes` is not a boolean"));
  Write(".torchxconfig", "[cli:run]\nscheduler = local_cwd\n");
  auto missing = Torchx({"run", "--msg", "x"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("unrecognized arguments: --msg (missing COMPONENT"));
}

TEST_F(RunContractTest, StdinTakesTorchxRunArgsAsJson) {
  Write("args.json", json{{"component_name", "utils.sh"},
                          {"scheduler", "local_cwd"},
                          {"scheduler_args", {{"log_dir", (dir_ / "mylogs").string()}}},
                          {"component_args_str", {"sh", "-c", "echo from-stdin"}},
                          {"parent_run_id", "exp-7"}}
                         .dump());
  auto run = torchxd::testing::RunShell(TorchxCommand({"run", "--stdin"}) + " <" + Quote((dir_ / "work/args.json").string()),
                                        (dir_ / "stdin.err").string());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("sh/0 from-stdin"));
  EXPECT_TRUE(fs::exists(dir_ / "mylogs")) << "scheduler_args became the cfg";

  Write("kw.json", R"({"component_name": "utils.echo", "scheduler": "local_cwd", "dryrun": true,
                       "component_args": {"msg": "kw hello", "num_replicas": 2}})");
  auto kw = torchxd::testing::RunShell(TorchxCommand({"run", "--stdin"}) + " <" + Quote((dir_ / "work/kw.json").string()),
                                       (dir_ / "kw.err").string());
  ASSERT_EQ(kw.exit_code, 0) << kw.err;
  EXPECT_THAT(kw.out, HasSubstr("\"kw hello\""));
  EXPECT_THAT(kw.out, HasSubstr("\"num_replicas\": 2"));

  auto both = torchxd::testing::RunShell(TorchxCommand({"run", "--stdin", "-s", "local_cwd"}) + " </dev/null",
                                         (dir_ / "both.err").string());
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("Cannot specify --scheduler when using --stdin"));
  Write("bad.json", R"({"component_name": "utils.echo", "scheduler": "local_cwd", "colour": "red"})");
  auto bad = torchxd::testing::RunShell(TorchxCommand({"run", "--stdin"}) + " <" + Quote((dir_ / "work/bad.json").string()),
                                        (dir_ / "bad.err").string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--stdin: these fields are not run arguments: colour"));
}

TEST_F(RunContractTest, TorchxFlagsAreAccepted) {
  // --parent_run_id reaches every replica's environment; $TORCHX_PARENT_RUN_ID wins, as in TorchX.
  auto dry = Torchx({"run", "--dryrun", "--parent_run_id", "exp-1", "--tee_logs", "--workspace", "", "utils.sh", "env"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("\"TORCHX_PARENT_RUN_ID\": \"exp-1\""));
  auto env_wins = Torchx({"run", "--dryrun", "--parent_run_id", "exp-1", "utils.sh", "env"}, "TORCHX_PARENT_RUN_ID=exp-2");
  EXPECT_THAT(env_wins.out, HasSubstr("\"TORCHX_PARENT_RUN_ID\": \"exp-2\""));
  EXPECT_THAT(env_wins.out, Not(HasSubstr("exp-1")));
  // A workspace on local_cwd changes nothing (as in TorchX); `--` before COMPONENT is allowed.
  auto run = Torchx({"run", "--workspace", ".", "--", "utils.sh", "--", "sh", "-c", "echo $TORCHX_JOB_ID"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("sh/0 " + Handle(run) + "\n"));
  auto docker = Torchx({"run", "--dryrun", "-s", "local_docker", "--workspace", "", "utils.echo"});
  EXPECT_EQ(docker.exit_code, 0) << docker.err;
}

TEST_F(RunContractTest, TrackersAndTheContextNameReachTheReplicasAsTorchxSetsThem) {
  Write(".torchxconfig", "[torchx:tracker]\nfsspec =\nmlflow =\n\n[tracker:fsspec]\nconfig = /tmp/runs\n");
  auto run = Torchx({"run", "utils.sh", "sh", "-c",
                     "echo \"$TORCHX_TRACKERS|$TORCHX_TRACKER_FSSPEC_CONFIG|$TORCHX_TRACKER_MLFLOW_CONFIG|$TORCHX_CONTEXT_NAME\""});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("sh/0 fsspec,mlflow|/tmp/runs||cli_run\n"));
  // TORCHX_TRACKERS replaces the file's list; TORCHX_TRACKER_<NAME>_CONFIG its config; a context name set is kept.
  auto env = Torchx({"run", "utils.sh", "sh", "-c", "echo \"$TORCHX_TRACKERS|$TORCHX_TRACKER_FSSPEC_CONFIG|$TORCHX_CONTEXT_NAME\""},
                    "TORCHX_TRACKERS=fsspec TORCHX_TRACKER_FSSPEC_CONFIG=/tmp/other TORCHX_CONTEXT_NAME=notebook");
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_THAT(env.err, HasSubstr("sh/0 fsspec|/tmp/other|notebook\n"));
}

}  // namespace
