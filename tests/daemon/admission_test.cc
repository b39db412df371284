// Admission end to end: a real torchxd with a fake GPU topology (F8: 8 GPUs,
// NVLink pairs {0,2}, {1,3}, {4,5}, {6,7}, NUMA 0 = GPUs 0-3), replicas as
// real processes that print the GPUs they were given.
#include <gmock/gmock.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "tests/cli/shell.h"
#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kF8 = R"({"gpus": [
  {"index": 0, "uuid": "GPU-0", "numa_node": 0, "nvlink": {"2": 12}},
  {"index": 1, "uuid": "GPU-1", "numa_node": 0, "nvlink": {"3": 12}},
  {"index": 2, "uuid": "GPU-2", "numa_node": 0}, {"index": 3, "uuid": "GPU-3", "numa_node": 0},
  {"index": 4, "uuid": "GPU-4", "numa_node": 1, "nvlink": {"5": 12}}, {"index": 5, "uuid": "GPU-5", "numa_node": 1},
  {"index": 6, "uuid": "GPU-6", "numa_node": 1, "nvlink": {"7": 12}}, {"index": 7, "uuid": "GPU-7", "numa_node": 1}]})";

class AdmissionE2eTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    topology_ = (dir_ / "f8.json").string();
    std::ofstream(topology_) << kF8;
  }
  void TearDown() override {
    DaemonFixture::TearDown();
    KillLeftoverShims();
  }
  void Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--gpu-topology", topology_});
    StartDaemon(extra);
  }
  // A role whose replicas print their GPU environment, then wait for `release` to exist.
  json GpuRole(const std::string& name, int gpus, int replicas = 1, const std::string& release = "release") {
    std::string script = "echo \"cvd=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER uuids=$TORCHX_GPU_UUIDS\"; "
                         "i=0; until [ -e " + (dir_ / release).string() + " ]; do i=$((i+1)); "
                         "[ $i -lt 600 ] || exit 1; sleep 0.1; done";
    return {{"name", name}, {"entrypoint", "sh"}, {"args", {"-c", script}}, {"num_replicas", replicas},
            {"resource", {{"cpu", 1}, {"gpu", gpus}, {"memMB", 1024}}}};
  }
  std::string Submit(const std::string& name, int gpus, int replicas = 1, const json& cfg = json::object()) {
    return Run(App(name, {GpuRole("w", gpus, replicas)}), cfg);
  }
  // The state once admission decided: an admitted app is PENDING ("starting:
  // ...") only until its first replica runs; a queued one says why it waits.
  std::string State(const std::string& h) {
    json st;
    WaitUntil([&] {
      st = Status(h);
      return st["state"] != "PENDING" || st.value("msg", "").rfind("starting:", 0) != 0;
    }, 10);
    return st.value("state", "");
  }
  // The first line a replica printed, once it did.
  std::string Seen(const std::string& h, int replica = 0) {
    std::string line;
    WaitUntil([&] {
      line = ReadLog(h, "w", replica);
      return line.find('\n') != std::string::npos;
    });
    return line.substr(0, line.find('\n'));
  }
  void Release() { std::ofstream(dir_ / "release") << ""; }

  std::string topology_;
};

TEST_F(AdmissionE2eTest, TwoWholeBoxJobsRunOneAfterTheOtherAndSeeTheirGpus) {
  Start();
  std::string a = Submit("a", 8);
  std::string b = Submit("b", 8);
  EXPECT_EQ(State(a), "RUNNING");
  EXPECT_EQ(Seen(a), "cvd=0,1,2,3,4,5,6,7 order=PCI_BUS_ID uuids=GPU-0,GPU-1,GPU-2,GPU-3,GPU-4,GPU-5,GPU-6,GPU-7");
  json sb = Status(b);
  EXPECT_EQ(sb["state"], "PENDING");
  EXPECT_THAT(sb["msg"].get<std::string>(), HasSubstr("next to start: waiting for 8 GPUs in queue default: 0 free"));
  EXPECT_TRUE(fs::is_empty(LogDirOf(b))) << "no process of b exists";
  Release();
  EXPECT_EQ(Wait(a)["state"], "SUCCEEDED");
  EXPECT_EQ(Wait(b)["state"], "SUCCEEDED") << "b started once a's processes were gone, then ran";
  EXPECT_EQ(Seen(b), "cvd=0,1,2,3,4,5,6,7 order=PCI_BUS_ID uuids=GPU-0,GPU-1,GPU-2,GPU-3,GPU-4,GPU-5,GPU-6,GPU-7");
}

TEST_F(AdmissionE2eTest, ABoxWithNoGpuRunsGpuRequestsWithAWarningAsTorchxDoes) {
  StartDaemon();  // no NVML, no topology, no --capacity: no GPU known
  auto submitted = Call("run", {{"app", App("spmd", {GpuRole("w", 2, 2)})},
                                {"cwd", dir_.string()},
                                {"env", {{"PATH", std::getenv("PATH")}}}});
  ASSERT_TRUE(submitted.has_value()) << submitted.error().message;
  ASSERT_TRUE((*submitted).contains("warnings")) << submitted->dump();
  EXPECT_THAT((*submitted)["warnings"].dump(), HasSubstr("the GPU request (2 per replica) is not enforced"));
  std::string h = (*submitted)["app_handle"];
  EXPECT_EQ(Seen(h, 0), "cvd= order= uuids=");  // nothing to hand out, nothing set
  Release();
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
}

TEST_F(AdmissionE2eTest, PlacementFollowsTheTopology) {
  Start();
  std::string one = Submit("one", 1);
  EXPECT_THAT(Seen(one), HasSubstr("cvd=0 "));
  std::string two = Submit("two", 1);
  EXPECT_THAT(Seen(two), HasSubstr("cvd=2 ")) << "GPU 0's NVLink partner, not an intact pair";
  std::string pair = Submit("pair", 2);
  EXPECT_THAT(Seen(pair), HasSubstr("cvd=1,3 ")) << "an NVLink pair";
  std::string gang = Submit("gang", 2, 2);
  EXPECT_THAT(Seen(gang, 0), HasSubstr("cvd=4,5 "));
  EXPECT_THAT(Seen(gang, 1), HasSubstr("cvd=6,7 "));
  std::string none = Run(App("cpu-only", {GpuRole("w", 0)}));
  EXPECT_THAT(Seen(none), HasSubstr("cvd= ")) << "a replica without GPUs sees none of the box's";
  Release();
}

TEST_F(AdmissionE2eTest, WhatCanNeverFitIsRefusedAtSubmit) {
  Start();
  auto r = Call("run", {{"app", App("huge", {GpuRole("w", 9)})}, {"cfg", json::object()}, {"scheduler", "local_cwd"},
                        {"cwd", dir_.string()}, {"env", json::object()}});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr("a replica needs 9 GPUs, more than this whole box has (8 GPUs)"));
  auto q = Call("run", {{"app", App("q", {GpuRole("w", 1)})}, {"cfg", {{"queue", "nope"}}}, {"scheduler", "local_cwd"},
                        {"cwd", dir_.string()}, {"env", json::object()}});
  ASSERT_FALSE(q.has_value());
  EXPECT_THAT(q.error().message, HasSubstr("queue `nope` does not exist on this box (queues: default)"));
}

TEST_F(AdmissionE2eTest, AQueuedAppCanBeWaitedForAndCancelled) {
  Start();
  std::string a = Submit("a", 8);
  std::string b = Submit("b", 4);
  std::string c = Submit("c", 4);
  json cancelled = CallOk("cancel", {{"app_handle", b}});
  EXPECT_EQ(cancelled["state"], "CANCELLED");
  EXPECT_THAT(Status(b)["msg"].get<std::string>(), HasSubstr("while waiting in queue default"));
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Release();
  });
  EXPECT_EQ(Wait(c)["state"], "SUCCEEDED") << "a wait on a queued app lasts until it ran";
  releaser.join();
  EXPECT_EQ(Wait(a)["state"], "SUCCEEDED");
}

TEST_F(AdmissionE2eTest, QueuesWeightsAndTheQueueCommand) {
  std::ofstream(dir_ / "torchxd.conf") << "[queue.big]\nweight = 3\nmax_gpus = 8\n\n[queue.small]\nmax_gpus_per_user = 2\n";
  Start({"--config", (dir_ / "torchxd.conf").string()});
  std::string blocker = Submit("blocker", 8);
  std::string s1 = Submit("s1", 2, 1, {{"queue", "small"}});
  std::string b1 = Submit("b1", 8, 1, {{"queue", "big"}, {"priority", 3}});
  json q = CallOk("queue", json::object());
  ASSERT_EQ(q["queues"].size(), 3u);
  EXPECT_EQ(q["queues"][0]["name"], "default");
  EXPECT_EQ(q["queues"][1]["name"], "big");
  EXPECT_EQ(q["queues"][1]["weight"], 3);
  EXPECT_EQ(q["queues"][1]["max_gpus"], 8);
  EXPECT_EQ(q["queues"][2]["max_gpus_per_user"], 2);
  EXPECT_EQ(q["queues"][0]["running"], json::array({blocker}));
  ASSERT_EQ(q["queues"][1]["pending"].size(), 1u);
  const json& p = q["queues"][1]["pending"][0];
  EXPECT_EQ(p["app_handle"], b1);
  EXPECT_EQ(p["position"], 1);
  EXPECT_EQ(p["priority"], 3);
  EXPECT_EQ(p["user"], ::getuid());
  EXPECT_EQ(p["user_name"], ::getpwuid(::getuid())->pw_name);
  EXPECT_EQ(p["request"]["gpu"], 8);
  EXPECT_FALSE(p["reason"].get<std::string>().empty());
  EXPECT_EQ(q["capacity"]["gpu"], 8);
  EXPECT_EQ(q["gpus"].size(), 8u);
  EXPECT_EQ(q["gpus"][0]["held_by"], blocker);
  EXPECT_EQ(q["queues"][1]["pending_count"], 1);
  json none = CallOk("queue", {{"limit", 0}});
  EXPECT_TRUE(none["queues"][1]["pending"].empty()) << "limit: pending apps listed per queue";
  EXPECT_EQ(none["queues"][1]["pending_count"], 1);
  EXPECT_FALSE(Call("queue", {{"limit", -1}}).has_value());
  json only = CallOk("queue", {{"name", "small"}});
  ASSERT_EQ(only["queues"].size(), 1u);
  EXPECT_EQ(only["queues"][0]["pending"][0]["app_handle"], s1);
  auto missing = Call("queue", {{"name", "nope"}});
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().message, HasSubstr("queue `nope` does not exist on this box (queues: default, big, small)"));
  // The command line prints the same.
  Output queue = RunShell("TORCHXD_SOCKET=" + socket_ + " TORCHX_NO_AUTOSTART=1 " + TORCHX_BIN + " queue",
                          (dir_ / "queue.err").string());
  EXPECT_EQ(queue.exit_code, 0) << queue.err;
  const std::string& text = queue.out;
  EXPECT_THAT(text, HasSubstr("big      3       8"));
  EXPECT_THAT(text, HasSubstr(b1));
  EXPECT_THAT(text, HasSubstr("GPUs: 8 (8 in use, "));
  EXPECT_THAT(text, HasSubstr("GPU  HELD BY"));  // the per-GPU map
  EXPECT_THAT(text, HasSubstr("\n7    local_cwd://"));
  // --json: the reply as the protocol gives it (read without a DOM, indented as dump(2) would).
  Output as_json = RunShell("TORCHXD_SOCKET=" + socket_ + " TORCHX_NO_AUTOSTART=1 " + TORCHX_BIN + " queue --json",
                            (dir_ / "queue-json.err").string());
  EXPECT_EQ(as_json.exit_code, 0) << as_json.err;
  json reply = CallOk("queue", json::object());
  for (auto& q : reply["queues"]) {  // a waiting app's reason counts time; the rest is the same
    for (auto& p : q["pending"]) p.erase("reason");
  }
  json printed = json::parse(as_json.out);
  for (auto& q : printed["queues"]) {
    for (auto& p : q["pending"]) {
      EXPECT_FALSE(p.value("reason", "").empty());
      p.erase("reason");
    }
  }
  EXPECT_EQ(printed, reply);
  EXPECT_EQ(as_json.out, json::parse(as_json.out).dump(2) + "\n");
  Release();
}

TEST_F(AdmissionE2eTest, ARestartKeepsTheQueueItsOrderAndTheGpusHeld) {
  Start({"--live-restore"});
  std::string a = Submit("a", 6);
  std::string h = Submit("h", 4);
  std::string b = Submit("b", 2, 1, {{"priority", -1}});
  std::string c = Submit("c", 4);
  EXPECT_EQ(State(b), "RUNNING") << "backfilled on the 2 GPUs outside h's reservation";
  json before = CallOk("queue", json::object());
  ASSERT_EQ(before["queues"][0]["pending"].size(), 2u);
  StopDaemon(SIGKILL);
  Start({"--live-restore"});
  json after = CallOk("queue", json::object());
  EXPECT_EQ(after["queues"][0]["pending"], before["queues"][0]["pending"]);
  EXPECT_EQ(after["head"], h);
  EXPECT_EQ(after["gpus"], before["gpus"]) << "adopted replicas keep their GPUs, the head its reservation";
  Release();
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(Wait(c)["state"], "SUCCEEDED");
}

TEST_F(AdmissionE2eTest, AnElasticRoleStartsWithMinReplicasAndGrowsAsGpusFree) {
  Start({"--live-restore"});
  std::string blocker = Submit("blocker", 4);
  json elastic_role = GpuRole("w", 2, 4, "release-elastic");
  elastic_role["min_replicas"] = 2;
  std::string e = Run(App("elastic", {elastic_role}));
  EXPECT_EQ(State(e), "RUNNING") << "2 of 4 replicas fit beside the blocker: min_replicas starts them";
  EXPECT_THAT(Seen(e, 0), HasSubstr("cvd=4,5 "));
  EXPECT_THAT(Seen(e, 1), HasSubstr("cvd=6,7 "));
  json st = Status(e);
  EXPECT_EQ(st["roles"][0]["replicas"][2]["state_name"], "PENDING");
  EXPECT_EQ(st["roles"][0]["replicas"][3]["state_name"], "PENDING");
  // The held replicas stay held across a daemon crash.
  StopDaemon(SIGKILL);
  Start({"--live-restore"});
  EXPECT_EQ(State(blocker), "RUNNING") << "adopted, it holds GPUs 0-3 still";
  json after = Status(e);
  EXPECT_EQ(after["roles"][0]["replicas"][3]["state_name"], "PENDING") << after.dump();
  fs::path never = fs::path(LogDirOf(e)) / "w/3";
  EXPECT_TRUE(!fs::exists(never) || fs::is_empty(never)) << "replica 3 never ran";
  Release();  // the blocker ends; its GPUs grow the elastic role
  EXPECT_EQ(Wait(blocker)["state"], "SUCCEEDED");
  EXPECT_THAT(Seen(e, 2), HasSubstr("cvd=0,2 "));
  EXPECT_THAT(Seen(e, 3), HasSubstr("cvd=1,3 "));
  std::ofstream(dir_ / "release-elastic") << "";
  EXPECT_EQ(Wait(e)["state"], "SUCCEEDED");
}

TEST_F(AdmissionE2eTest, HeldReplicasThatNeverStartDoNotFailTheApp) {
  Start();
  std::string blocker = Submit("blocker", 4);
  std::ofstream(dir_ / "release-elastic") << "";  // elastic replicas end at once
  json role = GpuRole("w", 4, 3, "release-elastic");
  role["min_replicas"] = 1;
  std::string e = Run(App("elastic", {role}));
  json done = Wait(e);
  EXPECT_EQ(done["state"], "SUCCEEDED") << "replica 0 succeeded; 1 and 2 never got GPUs while the blocker ran";
  const json& replicas = done["roles"][0]["replicas"];
  EXPECT_EQ(replicas[0]["state_name"], "SUCCEEDED");
  EXPECT_EQ(replicas[1]["state_name"], "CANCELLED");
  EXPECT_THAT(replicas[2].dump(), HasSubstr("never started"));
  EXPECT_EQ(State(blocker), "RUNNING");
  Release();
  EXPECT_EQ(Wait(blocker)["state"], "SUCCEEDED");
}

// The GPUs a line `cvd=A,B ...` names.
std::set<int> GpusOf(const std::string& line) {
  std::set<int> gpus;
  size_t at = line.find("cvd=");
  if (at == std::string::npos) return gpus;
  std::stringstream list(line.substr(at + 4, line.find(' ', at) - at - 4));
  for (std::string g; std::getline(list, g, ',');) gpus.insert(std::stoi(g));
  return gpus;
}

// Scaling a 4-replica app down to 1 left the stopped replicas' GPUs held
// until the app ended, and another app waited behind GPUs nothing used.
TEST_F(AdmissionE2eTest, AScaledDownReplicaGivesBackItsGpusAndAScaleUpGetsFreeOnesThroughAdmission) {
  Start({"--live-restore"});
  json role = GpuRole("w", 2, 4, "release-elastic");
  role["min_replicas"] = 1;
  std::string e = Run(App("elastic", {role}));
  EXPECT_EQ(State(e), "RUNNING");
  for (int i = 0; i < 4; ++i) ASSERT_EQ(GpusOf(Seen(e, i)).size(), 2u) << "the box's 8 GPUs, 2 each";
  std::set<int> kept = GpusOf(Seen(e, 0));
  std::string other = Submit("other", 6);
  EXPECT_EQ(State(other), "PENDING");
  auto down = Call("scale", {{"app_handle", e}, {"scale", {{"w", 1}}}});
  ASSERT_TRUE(down) << down.error().message;
  EXPECT_TRUE(WaitUntil([&] { return Status(other)["state"] == "RUNNING"; }, 10))
      << "the 6 GPUs of replicas 1-3 are still held: " << Status(other).dump();
  std::set<int> others = GpusOf(Seen(other));
  EXPECT_EQ(others.size(), 6u);
  for (int g : kept) EXPECT_EQ(others.count(g), 0u) << "GPU " << g << " is replica 0's";

  // Back to 4 while `other` holds 6 GPUs: replicas 1-3 wait for GPUs, also after a daemon restart.
  auto up = Call("scale", {{"app_handle", e}, {"scale", {{"w", 4}}}});
  ASSERT_TRUE(up) << up.error().message;
  auto none_restarted = [&] {
    for (int n = 0; n < 15; ++n) {
      json st = Status(e);
      for (int i = 1; i < 4; ++i) {
        const json& r = st["roles"][0]["replicas"][i];
        if (r["attempt"] != 1 || r["state_name"] == "RUNNING") return ::testing::AssertionFailure() << st.dump();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(none_restarted()) << "a replica ran again without GPUs of its own";
  StopDaemon(SIGKILL);
  Start({"--live-restore"});
  EXPECT_EQ(Status(other)["state"], "RUNNING");
  EXPECT_TRUE(none_restarted()) << "a restarted daemon ran a replica without GPUs of its own";

  Release();  // `other` ends: replicas 1-3 grow into its GPUs
  EXPECT_EQ(Wait(other)["state"], "SUCCEEDED");
  std::set<int> all = kept;
  for (int i = 1; i < 4; ++i) {
    std::string log;
    ASSERT_TRUE(WaitUntil([&] {
      log = ReadLog(e, "w", i);
      return std::count(log.begin(), log.end(), '\n') == 2;
    })) << "replica " << i << ": " << log << Status(e).dump();
    std::string second = log.substr(log.find('\n') + 1);
    std::set<int> gpus = GpusOf(second);
    EXPECT_EQ(gpus.size(), 2u) << second;
    for (int g : gpus) EXPECT_TRUE(all.insert(g).second) << "GPU " << g << " given twice: " << second;
  }
  EXPECT_EQ(Status(e)["roles"][0]["replicas"][1]["attempt"], 2);
  std::ofstream(dir_ / "release-elastic") << "";
  EXPECT_EQ(Wait(e)["state"], "SUCCEEDED");
}

TEST_F(AdmissionE2eTest, MaxDurationStopsAnAppAndLetsItStartEarlyOnReservedGpus) {
  Start({"--live-restore"});
  for (const char* bad : {"90", "1x", "0s", "2m1h"}) {
    auto r = Call("run", {{"app", App("bad", {GpuRole("w", 1)})}, {"cfg", {{"max_duration", bad}}},
                          {"scheduler", "local_cwd"}, {"cwd", dir_.string()}, {"env", json::object()}});
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(r.error().message, HasSubstr(std::string("max_duration: `") + bad + "` is not a duration"));
  }
  // a holds 6 GPUs and is stopped within 10 minutes at the latest; h needs
  // all 8 and reserves them, so only an app that ends before a's limit may
  // start on the 2 free ones.
  std::string a = Submit("a", 6, 1, {{"max_duration", "10m"}});
  std::string h = Submit("h", 8);
  EXPECT_THAT(Status(h)["msg"].get<std::string>(), HasSubstr("at the latest (max_duration of what it waits on)"));
  std::string nolimit = Submit("nolimit", 2);
  EXPECT_EQ(State(nolimit), "PENDING");
  EXPECT_THAT(Status(nolimit)["msg"].get<std::string>(), HasSubstr("or less it could start before it"));
  std::string quick = Submit("quick", 2, 1, {{"max_duration", "2s"}});
  EXPECT_EQ(State(quick), "RUNNING") << Status(quick).dump();
  // Its limit counts from its start, also across a daemon restart.
  StopDaemon(SIGKILL);
  Start({"--live-restore"});
  json stopped = Wait(quick);
  EXPECT_EQ(stopped["state"], "FAILED") << "the replica waited for the release file: only the limit ended it";
  EXPECT_THAT(stopped["msg"].get<std::string>(), HasSubstr("reached its max_duration of 2s and was stopped"));
  EXPECT_THAT(Replica(stopped, "w", 0).dump(), HasSubstr("stopped: reached its max_duration"));
  EXPECT_EQ(State(a), "RUNNING") << "a's limit is minutes away";
  EXPECT_EQ(State(nolimit), "PENDING");
  Release();
  EXPECT_EQ(Wait(a)["state"], "SUCCEEDED");
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(Wait(nolimit)["state"], "SUCCEEDED");
}

TEST_F(AdmissionE2eTest, WithoutAdmissionEveryAppStartsAtOnce) {
  Start({"--no-admission"});
  std::string a = Submit("a", 8);
  std::string b = Submit("b", 8);
  EXPECT_EQ(State(a), "RUNNING");
  EXPECT_EQ(State(b), "RUNNING");
  auto q = Call("queue", json::object());
  ASSERT_FALSE(q.has_value());
  EXPECT_THAT(q.error().message, HasSubstr("--no-admission"));
  Release();
}

TEST_F(AdmissionE2eTest, ABadTopologyFileStopsTheDaemonWithTheReason) {
  std::ofstream(topology_) << R"({"gpus": [{"index": 0}, {"index": 0}]})";
  std::string cmd = std::string(TORCHXD_BIN) + " --socket " + socket_ + " --state-dir " + state_dir_ +
                    " --gpu-topology " + topology_ + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) text.append(buf, n);
  int status = ::pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 2) << text;
  EXPECT_THAT(text, HasSubstr("gpus[1].index: GPU 0 is listed twice"));
}

}  // namespace
}  // namespace torchxd::testing
