// The slurm scheduler end to end: the real torchx and torchxd against a real
// Slurm (Debian's slurm-wlm + munge) that slurm_cluster.sh starts on
// localhost for the whole suite. Skipped, saying why, where it cannot start.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/shell.h"
#include "tests/cli/torchx_sandbox.h"

namespace torchxd::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

std::string g_skip;      // why the cluster is not there ("" = it is)
fs::path g_cluster;      // its state
std::string g_conf;      // its slurm.conf

std::string Cluster(const std::string& command) {
  return std::string(SLURM_CLUSTER) + " " + command + " " + Quote(g_cluster.string());
}

class SlurmE2eTest : public TorchxSandbox {
 protected:
  SlurmE2eTest() : TorchxSandbox("txs_") {}

  static void SetUpTestSuite() {
    g_cluster = fs::temp_directory_path() / ("txs_cluster_" + std::to_string(::getpid()));
    fs::remove_all(g_cluster);
    fs::path err = fs::temp_directory_path() / ("txs_cluster_" + std::to_string(::getpid()) + ".err");
    Output started = RunShell(Cluster("start"), err.string());
    fs::remove(err);
    if (started.exit_code != 0) {
      g_skip = "no Slurm here (" + started.err.substr(0, started.err.find_last_not_of('\n') + 1) + ")";
      return;
    }
    g_conf = started.out.substr(0, started.out.find('\n'));
  }
  static void TearDownTestSuite() {
    fs::path err = fs::temp_directory_path() / ("txs_cluster_stop_" + std::to_string(::getpid()) + ".err");
    if (g_skip.empty()) RunShell(Cluster("stop"), err.string());
    std::error_code ec;
    fs::remove(err, ec);
    fs::remove_all(g_cluster, ec);
  }
  void SetUp() override {
    if (!g_skip.empty()) GTEST_SKIP() << g_skip;
    TorchxSandbox::SetUp();
  }
  Output Torchx(const std::vector<std::string>& args, const std::string& extra_env = "") override {
    return TorchxSandbox::Torchx(args, "SLURM_CONF=" + Quote(g_conf) + " " + extra_env);
  }
  std::string Run(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"run", "-s", "slurm"};
    all.insert(all.end(), args.begin(), args.end());
    auto run = Torchx(all);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run.out.substr(0, run.out.find('\n'));
  }
  // Slurm's jobs take longer to start and end than the sandbox's default wait.
  static constexpr double kWait = 30;
  // A squeue first on PATH that runs `first` (sh), then the real one; returns its directory.
  std::string SqueueWrapper(const std::string& first) { return Wrapper("bin", "squeue", first + "\nexec /usr/bin/squeue \"$@\""); }
  // `name` in dir_/`dir`, a shell script of `body`; returns the directory.
  std::string Wrapper(const std::string& dir, const std::string& name, const std::string& body) {
    fs::create_directories(dir_ / dir);
    {
      std::ofstream w(dir_ / dir / name);
      w << "#!/bin/sh\n" << body << "\n";
    }
    fs::permissions(dir_ / dir / name, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec |
                                           fs::perms::group_read | fs::perms::others_read);
    return (dir_ / dir).string();
  }
  std::string JobOf(const std::string& handle) { return handle.substr(handle.rfind('/') + 1); }
  std::string SlurmState(const std::string& job) {
    auto q = RunShell("SLURM_CONF=" + Quote(g_conf) + " squeue -h --states=all -j " + job + " -o %T",
                      (dir_ / "sq.err").string());
    return q.out;
  }
  // A torchxd of the test's own flags and PATH, where torchx looks for it.
  void StartOwnDaemon(const std::string& flags, const std::string& path_prefix = "") {
    std::string path = path_prefix.empty() ? std::string(std::getenv("PATH")) : path_prefix + ":" + std::getenv("PATH");
    StartDaemonWith("SLURM_CONF=" + Quote(g_conf) + " PATH=" + Quote(path), flags);
  }
};

TEST_F(SlurmE2eTest, EchoSucceedsWithItsLineInTheLog) {
  std::string h = Run({"utils.echo", "--msg", "hi-slurm"});
  ASSERT_THAT(h, ::testing::StartsWith("slurm://torchx/"));
  std::string job = h.substr(h.rfind('/') + 1);
  ASSERT_TRUE(WaitForState(h, "SUCCEEDED", kWait)) << Torchx({"status", h}).out;
  auto log = Torchx({"log", h});
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_THAT(log.out, HasSubstr("echo/0 hi-slurm"));
  // TorchX's files, in the submit's directory.
  EXPECT_TRUE(fs::exists(dir_ / "work" / ("slurm-" + job + "-echo-0.out")));
  auto status = Torchx({"status", h});
  EXPECT_THAT(status.out, HasSubstr("exitcode=0"));
  auto events = Torchx({"events", h});
  EXPECT_THAT(events.out, HasSubstr("submitted: Slurm job " + job));
  EXPECT_THAT(events.out, HasSubstr("ended"));
  // The stored logs outlive the job's files.
  fs::remove(dir_ / "work" / ("slurm-" + job + "-echo-0.out"));
  EXPECT_THAT(Torchx({"log", h}).out, HasSubstr("hi-slurm"));
  auto list = Torchx({"list", "-s", "slurm"});
  EXPECT_THAT(list.out, HasSubstr(h));
}

TEST_F(SlurmE2eTest, AFailingReplicaFailsWithItsExitCode) {
  std::string h = Run({"utils.sh", "sh", "-c", "echo to-stderr >&2; exit 3"});
  ASSERT_TRUE(WaitForState(h, "FAILED", kWait)) << Torchx({"status", h}).out;
  auto status = Torchx({"status", h});
  EXPECT_THAT(status.out, HasSubstr("exitcode=3"));
  EXPECT_THAT(status.out, HasSubstr("exited with code 3"));
  EXPECT_TRUE(WaitUntil([&] { return Torchx({"log", "--streams", "stderr", h}).out.find("to-stderr") != std::string::npos; }, 10));
}

TEST_F(SlurmE2eTest, CancelStopsTheJob) {
  std::string h = Run({"utils.sh", "sh", "-c", "echo up; sleep 60"});
  // Cancelled once its step runs. Even so its launch may not be complete (the first job of a fresh
  // slurmd, a loaded machine): a job cancelled then stays COMPLETING until slurmstepd abandons the
  // step's I/O with srun, 60 s later.
  ASSERT_TRUE(WaitUntil([&] { return Torchx({"log", h}).out == "sh/0 up\n"; }, kWait)) << Torchx({"status", h}).out;
  ASSERT_TRUE(WaitForState(h, "RUNNING", kWait)) << Torchx({"status", h}).out;
  auto cancel = Torchx({"cancel", h});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  // CANCELLED once Slurm says its processes are gone (COMPLETING until then: still RUNNING here).
  EXPECT_TRUE(WaitForState(h, "CANCELLED", 90)) << Torchx({"status", h}).out;
  std::string job = h.substr(h.rfind('/') + 1);
  auto squeue = RunShell("SLURM_CONF=" + Quote(g_conf) + " squeue -h --states=all -j " + job + " -o %T",
                         (dir_ / "sq.err").string());
  EXPECT_THAT(squeue.out, HasSubstr("CANCELLED"));
}

TEST_F(SlurmE2eTest, AJobOnADownPartitionShowsSlurmsReason) {
  std::string h = Run({"-cfg", "partition=down", "utils.echo", "--msg", "never"});
  EXPECT_TRUE(WaitUntil([&] {
    json s = StatusJson(h);
    return s.is_object() && s.value("state", "") == "PENDING" && s.dump().find("PartitionDown") != std::string::npos;
  }, 20)) << Torchx({"status", h}).out;
  EXPECT_THAT(Torchx({"list", "-s", "slurm"}).out, HasSubstr("PartitionDown"));
  EXPECT_THAT(Torchx({"events", h}).out, HasSubstr("Slurm: PartitionDown"));
  EXPECT_EQ(Torchx({"cancel", h}).exit_code, 0);
  EXPECT_TRUE(WaitForState(h, "CANCELLED", 15));
  // It never ran: no exit code (Slurm's 0 is none), and the timeline says so.
  EXPECT_TRUE(WaitUntil([&] { return Torchx({"events", h}).out.find("cancelled before it started") != std::string::npos; }, 10))
      << Torchx({"events", h}).out;
  EXPECT_THAT(Torchx({"status", h}).out, ::testing::Not(HasSubstr("exitcode=0")));
  EXPECT_THAT(Torchx({"events", h}).out, HasSubstr("submitted: Slurm job " + JobOf(h) + ", 1 replica, logs in"));
}

TEST_F(SlurmE2eTest, TwoReplicaDdpAcrossTwoHetGroups) {
  if (!fs::exists(g_cluster / "nodes-resolve")) GTEST_SKIP() << "this machine has no two names for its nodes";
  if (RunShell("/usr/bin/python3 -c 'import torch.distributed'", (dir_ / "torch.err").string()).exit_code != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed";
  }
  std::string port = RunShell("/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind((\"\",0)); "
                              "print(s.getsockname()[1])'", (dir_ / "port.err").string()).out;
  port = port.substr(0, port.find('\n'));
  std::string h = Run({"dist.ddp", "-j", "2x1", "--tee", "1", "--env", "PET_REDIRECTS=1", "--rdzv_port", port,
                       "--script", std::string(TORCHXD_SOURCE_DIR) + "/examples/train.py"});
  ASSERT_TRUE(WaitForState(h, "SUCCEEDED", 180)) << Torchx({"status", h}).out << Torchx({"log", h}).out;
  auto log = Torchx({"log", h});
  EXPECT_THAT(log.out, HasSubstr("train/0"));
  EXPECT_THAT(log.out, HasSubstr("train/1"));
  EXPECT_THAT(log.out, HasSubstr("in_sync=True"));
}

TEST_F(SlurmE2eTest, AControllerRestartMidRunIsRetriedAndShown) {
  StartOwnDaemon("--slurm-poll 0.5");
  // The job ends once the controller is back: a step that ends while slurmctld is away
  // tells it only on its next retry, a minute later.
  fs::path back = dir_ / "controller-back";
  std::string h = Run({"utils.sh", "sh", "-c",
                       "echo before-the-stop; while [ ! -e " + Quote(back.string()) + " ]; do sleep 0.2; done; "
                       "echo after-the-restart"});
  ASSERT_TRUE(WaitForState(h, "RUNNING", kWait)) << Torchx({"status", h}).out;
  // Its srun step has started too (RUNNING alone is the batch script: an srun that finds
  // no controller cannot start its step, and the job fails).
  ASSERT_TRUE(WaitUntil([&] { return Torchx({"log", h}).out.find("before-the-stop") != std::string::npos; }, kWait))
      << Torchx({"status", h}).out;
  ASSERT_EQ(RunShell(Cluster("stop-ctld"), (dir_ / "ctld.err").string()).exit_code, 0);
  // squeue gives up on an absent controller after its own retries (about 10 to 20 s here).
  EXPECT_TRUE(WaitUntil([&] { return Torchx({"status", h}).out.find("controller has not answered") != std::string::npos; }, 60))
      << Torchx({"status", h}).out;
  EXPECT_EQ(StatusJson(h).value("state", ""), "RUNNING");  // the last seen, not a made-up end
  ASSERT_EQ(RunShell(Cluster("start-ctld"), (dir_ / "ctld2.err").string()).exit_code, 0);
  { std::ofstream touch(back); }
  EXPECT_TRUE(WaitForState(h, "SUCCEEDED", kWait)) << Torchx({"status", h}).out;
  EXPECT_THAT(Torchx({"log", h}).out, HasSubstr("after-the-restart"));
  EXPECT_THAT(Torchx({"events", h}).out, HasSubstr("Slurm answers again"));
}

TEST_F(SlurmE2eTest, OneSqueuePerPollPeriodWhateverTheStatusCalls) {
  // squeue on the daemon's PATH counts its runs.
  StartOwnDaemon("--slurm-poll 1", SqueueWrapper("echo run >> " + Quote((dir_ / "squeue.count").string())));
  std::string h = Run({"utils.sh", "sleep", "30"});
  ASSERT_TRUE(WaitForState(h, "RUNNING", kWait)) << Torchx({"status", h}).out;
  auto count = [&] {
    std::ifstream in(dir_ / "squeue.count");
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  int before = count();
  auto start = std::chrono::steady_clock::now();
  // At least 4 s and 10 calls: a loaded machine (or a sanitizer build's slower
  // torchx) takes longer for them, and the bound below follows the time taken.
  int calls = 0;
  while (calls < 10 || std::chrono::steady_clock::now() - start < std::chrono::seconds(4)) {
    ASSERT_EQ(Torchx({"status", h}).exit_code, 0);
    ++calls;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int polls = count() - before;
  EXPECT_LE(polls, static_cast<int>(seconds) + 2) << calls << " status calls in " << seconds << " s";
  EXPECT_GE(polls, 2);
  EXPECT_EQ(Torchx({"cancel", h}).exit_code, 0);
}

TEST_F(SlurmE2eTest, ListShowsTheUsersTorchxJobsSubmittedElsewhere) {
  // TorchX's own way: the dry run's script handed to sbatch by hand, in another directory.
  auto dry = Torchx({"run", "--dryrun", "-s", "slurm", "utils.echo", "--msg", "from-elsewhere"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  std::string script = dry.out.substr(dry.out.find("#!/bin/bash"));
  fs::create_directories(dir_ / "elsewhere");
  {
    std::ofstream w(dir_ / "elsewhere/job.sh");
    w << script;
  }
  std::string env = "cd " + Quote((dir_ / "elsewhere").string()) + " && SLURM_CONF=" + Quote(g_conf) + " ";
  auto sb = RunShell(env + "sbatch --parsable job.sh", (dir_ / "sb.err").string());
  ASSERT_EQ(sb.exit_code, 0) << sb.err;
  std::string job = sb.out.substr(0, sb.out.find('\n'));
  auto plain = RunShell(env + "sbatch --parsable --job-name=notorchx --wrap true", (dir_ / "sb2.err").string());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::string plain_job = plain.out.substr(0, plain.out.find('\n'));
  std::string h = "slurm://torchx/" + job;
  auto list = Torchx({"list", "-s", "slurm"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr(h));
  EXPECT_THAT(list.out, ::testing::Not(HasSubstr("slurm://torchx/" + plain_job + " ")));
  ASSERT_TRUE(WaitForState(h, "SUCCEEDED", kWait)) << Torchx({"status", h}).out;
  EXPECT_TRUE(WaitUntil([&] { return Torchx({"log", h}).out.find("echo/0 from-elsewhere") != std::string::npos; }, 10))
      << Torchx({"log", h}).out;
  // Deleted here, it is not found again while Slurm still lists it.
  EXPECT_EQ(Torchx({"delete", h}).exit_code, 0);
  EXPECT_THAT(Torchx({"list", "-s", "slurm"}).out, ::testing::Not(HasSubstr(h + " ")));
}

// A submission sbatch refused (exit 1 to the user) left a FAILED record in
// Slurm, which `list` then showed as the user's failed app.
TEST_F(SlurmE2eTest, ASubmissionSbatchRefusedIsNeverListed) {
  fs::create_directories(dir_ / "work");
  {
    std::ofstream w(dir_ / "work/huge.json");
    w << R"({"name": "huge", "roles": [{"name": "huge", "image": "/tmp", "entrypoint": "echo", "args": ["x"],)"
      << R"( "num_replicas": 2, "resource": {"cpu": 1, "gpu": 0, "memMB": 100000}}]})";
  }
  auto run = Torchx({"run", "-s", "slurm", "./huge.json"});
  ASSERT_NE(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.err, HasSubstr("sbatch exited with code 1"));
  auto all = RunShell("SLURM_CONF=" + Quote(g_conf) + " squeue -h --states=all -o '%j %T %r'", (dir_ / "sq.err").string());
  if (all.out.find("huge-0 FAILED BadConstraints") == std::string::npos) {
    GTEST_SKIP() << "this Slurm keeps no record of a refused submission: " << all.out;
  }
  auto list = Torchx({"list", "-s", "slurm"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, ::testing::Not(HasSubstr("huge"))) << list.out;
}

// srun writes a requeued job's files again from their start for its next
// attempt: the daemon read on from the old offset, losing the new attempt's
// first bytes (or all of it). Each attempt is read whole, as its own.
TEST_F(SlurmE2eTest, ARequeuedJobsNextAttemptIsReadWholeAsItsOwn) {
  StartOwnDaemon("--slurm-poll 0.5");
  fs::create_directories(dir_ / "work");
  {
    json app = {{"name", "again"},
                {"roles", {{{"name", "sh"}, {"image", "/tmp"}, {"entrypoint", "sh"}, {"max_retries", 1},
                            {"args", {"-c", "echo first-of-${SLURM_RESTART_COUNT:-0}; "
                                            "if [ ${SLURM_RESTART_COUNT:-0} -lt 1 ]; then exit 3; fi; "
                                            "echo then-the-second-attempt-is-done"}}}}}};
    std::ofstream(dir_ / "work/again.json") << app.dump();
  }
  std::string h = Run({"./again.json"});
  // Slurm holds a requeued job for two minutes (BeginTime): the test lets it go at once.
  ASSERT_TRUE(WaitUntil([&] { return Torchx({"status", h}).out.find("BeginTime") != std::string::npos; }, kWait))
      << Torchx({"status", h}).out;
  // Held, its first attempt's file is read to its end (Slurm holds it two minutes: time enough),
  // and its nodes are done with the attempt that ended (released sooner, the next attempt can
  // fail inside Slurm).
  ASSERT_TRUE(WaitUntil([&] { return Torchx({"log", "--attempt", "1", h}).out == "sh/0 first-of-0\n"; }, kWait))
      << Torchx({"log", "--attempt", "1", h}).out << Torchx({"events", h}).out;
  auto idle = [&] {
    auto nodes = RunShell("SLURM_CONF=" + Quote(g_conf) + " sinfo -h -N -p debug -o %T", (dir_ / "si.err").string());
    return nodes.exit_code == 0 && nodes.out == "idle\nidle\n";
  };
  ASSERT_TRUE(WaitUntil(idle, kWait));
  auto now = RunShell("SLURM_CONF=" + Quote(g_conf) + " scontrol update JobId=" + JobOf(h) + " StartTime=now",
                      (dir_ / "sc.err").string());
  ASSERT_EQ(now.exit_code, 0) << now.err;
  ASSERT_TRUE(WaitForState(h, "SUCCEEDED", kWait)) << Torchx({"status", h}).out << Torchx({"events", h}).out;
  EXPECT_TRUE(WaitUntil([&] { return Torchx({"log", "--attempt", "2", h}).out.find("then-the") != std::string::npos; }, 10))
      << Torchx({"log", "--attempt", "2", h}).out << Torchx({"log", "--attempt", "2", h}).err;
  EXPECT_EQ(Torchx({"log", "--attempt", "1", h}).out, "sh/0 first-of-0\n");
  EXPECT_EQ(Torchx({"log", "--attempt", "2", h}).out, "sh/0 first-of-1\nsh/0 then-the-second-attempt-is-done\n");
  EXPECT_THAT(Torchx({"events", h}).out, HasSubstr("sh/0 attempt 1 ended; Slurm requeued the job"));
}

TEST_F(SlurmE2eTest, EachUserKeepsCacheSizeAppsTheOldestFinishedGoFirst) {
  StartOwnDaemon("--slurm-poll 0.5 --cache-size 2");
  std::vector<std::string> handles;
  for (int i = 0; i < 3; ++i) {
    handles.push_back(Run({"utils.echo", "--msg", "n" + std::to_string(i)}));
    ASSERT_TRUE(WaitForState(handles.back(), "SUCCEEDED", kWait)) << Torchx({"status", handles.back()}).out;
  }
  EXPECT_TRUE(WaitUntil([&] { return Torchx({"status", handles[0]}).exit_code != 0; }, 10))
      << "the oldest finished app is kept: " << Torchx({"list"}).out;
  EXPECT_EQ(Torchx({"status", handles[2]}).exit_code, 0);
  EXPECT_THAT(Torchx({"log", handles[2]}).out, HasSubstr("n2"));
}

TEST_F(SlurmE2eTest, AJobSlurmForgotAsksSacctThenEndsUnknownSayingWhyOnce) {
  // squeue on the daemon's PATH that lists nothing once told to: slurmctld forgot the job.
  fs::path calls = dir_ / "squeue.calls";
  StartOwnDaemon("--slurm-poll 0.5", SqueueWrapper("echo run >> " + Quote(calls.string()) + "; [ -f " +
                                                   Quote((dir_ / "forget").string()) + " ] && exit 0"));
  std::string h = Run({"utils.sh", "sleep", "30"});
  ASSERT_TRUE(WaitForState(h, "RUNNING", kWait)) << Torchx({"status", h}).out;
  { std::ofstream touch(dir_ / "forget"); }
  ASSERT_TRUE(WaitForState(h, "UNKNOWN", 15)) << Torchx({"status", h}).out;
  // This cluster keeps no accounting: sacct cannot tell, and the msg says so.
  EXPECT_THAT(Torchx({"status", h}).out, HasSubstr("accounting is off"));
  // Ended for good: no more polls for it, and one "ended" event.
  auto count = [&] {
    std::ifstream in(calls);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  int polls = count();
  std::this_thread::sleep_for(std::chrono::seconds(3));  // six poll periods
  EXPECT_EQ(count(), polls);
  std::string events = Torchx({"events", h}).out;
  size_t ended = 0;
  for (size_t at = 0; (at = events.find("  ended  ", at)) != std::string::npos; ++at) ++ended;  // the type column
  EXPECT_EQ(ended, 1u) << events;
  RunShell("SLURM_CONF=" + Quote(g_conf) + " scancel " + JobOf(h), (dir_ / "sc.err").string());
}

// A caller's own `sbatch` first on their PATH (one printing another user's job
// id) is never run: the daemon runs Slurm's tools from its own PATH.
TEST_F(SlurmE2eTest, ACallersOwnSbatchIsNeverRun) {
  std::string first = Run({"utils.sh", "sleep", "30"});
  ASSERT_TRUE(WaitForState(first, "RUNNING", kWait)) << Torchx({"status", first}).out;
  fs::path ran = dir_ / "fake-sbatch-ran";
  std::string bin = Wrapper("callers-bin", "sbatch", "touch " + Quote(ran.string()) + "; echo " + JobOf(first));
  auto second = Torchx({"run", "-s", "slurm", "utils.echo", "--msg", "mine"}, "PATH=" + Quote(bin) + ":\"$PATH\"");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  std::string h = second.out.substr(0, second.out.find('\n'));
  EXPECT_NE(h, first);
  EXPECT_FALSE(fs::exists(ran));
  EXPECT_TRUE(WaitForState(h, "SUCCEEDED", kWait)) << Torchx({"status", h}).out;
  EXPECT_EQ(StatusJson(first).value("state", ""), "RUNNING");
  EXPECT_EQ(Torchx({"cancel", first}).exit_code, 0);
}

// An id sbatch printed is checked against Slurm before it becomes the app: a
// job that is not this submit's (named otherwise, or another user's) is never
// taken, and the app that holds it keeps it.
TEST_F(SlurmE2eTest, AnIdThatIsNotTheSubmitsJobIsRefusedAndItsAppKeepsIt) {
  fs::path made = dir_ / "made.job";
  fs::path victim_file = dir_ / "victim.job";
  // The daemon's own sbatch, made to lie: it submits, then prints the id in victim_file when there is one.
  std::string bin = Wrapper("daemon-bin", "sbatch",
                            "out=$(/usr/bin/sbatch \"$@\") || exit $?\necho \"$out\" >> " + Quote(made.string()) +
                                "\nif [ -s " + Quote(victim_file.string()) + " ]; then cat " +
                                Quote(victim_file.string()) + "; else echo \"$out\"; fi");
  StartOwnDaemon("--slurm-poll 0.5", bin);
  std::string victim = Run({"utils.sh", "sleep", "30"});
  ASSERT_TRUE(WaitForState(victim, "RUNNING", kWait)) << Torchx({"status", victim}).out;
  { std::ofstream(victim_file) << JobOf(victim) << "\n"; }
  auto taker = Torchx({"run", "-s", "slurm", "utils.echo", "--msg", "not-sleep"});
  EXPECT_NE(taker.exit_code, 0) << taker.out;
  EXPECT_THAT(taker.err, HasSubstr("sbatch printed job " + JobOf(victim) + ", which is not this app's"));
  EXPECT_THAT(taker.err, HasSubstr("named sh-0, this app's echo-0"));
  json st = StatusJson(victim);
  EXPECT_EQ(st.value("state", ""), "RUNNING") << st.dump();
  EXPECT_THAT(Torchx({"describe", victim}).out, HasSubstr("sleep"));
  EXPECT_THAT(Torchx({"events", victim}).out, ::testing::Not(HasSubstr("echo")));
  EXPECT_EQ(Torchx({"cancel", victim}).exit_code, 0);
  std::ifstream in(made);
  for (std::string job; std::getline(in, job);) {
    RunShell("SLURM_CONF=" + Quote(g_conf) + " scancel " + job, (dir_ / "sc.err").string());
  }
}

// A client whose SLURM_CONF is not the daemon's submits where the daemon may
// not look: a job the daemon's cluster does not hold is cancelled and the run
// refused, saying so, instead of the daemon following another job of that id.
TEST_F(SlurmE2eTest, ASubmitTheDaemonsClusterDoesNotHoldIsCancelledAndRefused) {
  // The client's conf is a copy (another path); the daemon's squeue does not list new jobs, as
  // another cluster's would not be.
  fs::copy_file(g_conf, dir_ / "other.conf");
  fs::path hide = dir_ / "hide";
  StartOwnDaemon("--slurm-poll 0.5", SqueueWrapper("[ -f " + Quote(hide.string()) +
                                                   " ] && { echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1; }"));
  { std::ofstream touch(hide); }
  auto run = Torchx({"run", "-s", "slurm", "utils.sh", "sleep", "30"}, "SLURM_CONF=" + Quote((dir_ / "other.conf").string()));
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.err, HasSubstr("names a cluster torchxd does not follow, so the job was cancelled"));
  EXPECT_THAT(run.err, HasSubstr((dir_ / "other.conf").string()));
  size_t at = run.err.find("sbatch gave job ");
  ASSERT_NE(at, std::string::npos) << run.err;
  std::string job = run.err.substr(at + 16, run.err.find(',', at) - at - 16);
  EXPECT_TRUE(WaitUntil([&] { return SlurmState(job).find("CANCELLED") != std::string::npos; }, kWait)) << SlurmState(job);
  EXPECT_NE(Torchx({"status", "slurm://torchx/" + job}).exit_code, 0) << "nothing was recorded";
}

TEST_F(SlurmE2eTest, LogTailFollowsTheRunningJobUntilItEnds) {
  std::string h = Run({"utils.sh", "sh", "-c", "echo first; sleep 3; echo second >&2; sleep 1"});
  auto tail = Torchx({"log", "-t", h});
  EXPECT_EQ(tail.exit_code, 0) << tail.err;
  EXPECT_THAT(tail.out, HasSubstr("sh/0 first\nsh/0 second\n"));
  EXPECT_EQ(StatusJson(h).value("state", ""), "SUCCEEDED");
  EXPECT_THAT(Torchx({"log", "--streams", "stderr", h}).out, ::testing::Eq("sh/0 second\n"));
}

}  // namespace
}  // namespace torchxd::testing
