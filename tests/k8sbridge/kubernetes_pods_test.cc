// The kubernetes scheduler end to end, its pods: what their logs, deletion,
// sidecars and waits make of a replica, and what the app's timeline says.
#include "tests/k8sbridge/kubernetes_e2e_fixture.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using torchxd::testing::FakeApiServer;
using torchxd::testing::KubernetesE2eTest;
using torchxd::testing::kToken;
using torchxd::testing::Output;
using torchxd::testing::Quote;
using torchxd::testing::RunShell;

TEST_F(KubernetesE2eTest, PodLogsAreNeverReadBeforeTheyStartAndBackOffWhileTheyCannotBeRead) {
  ASSERT_NO_FATAL_FAILURE(StartOwnDaemon("--pod-log-backoff 0.3"));
  std::string h = Submit(2);
  std::string job = JobName(h);
  std::string pod0 = job + "-echo-0-0", pod1 = job + "-echo-1-0";
  ASSERT_EQ(api_.Post("/fake/jobs/team/" + job + "/phase", {{"phase", "Running"}, {"pods", "Pending"}}), 200);
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][1]["state_name"] == "PENDING"; }));
  auto early = Torchx({"log", h});
  EXPECT_EQ(early.exit_code, 0) << early.err;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(LogReads(pod0).empty()) << "a pod whose container never ran has no log to ask for";
  EXPECT_TRUE(LogReads(pod1).empty());

  // Both containers run, but their kubelet does not answer.
  LogFails(pod0, 500, "Get https://node-1:10250/containerLogs: dial tcp: i/o timeout");
  LogFails(pod1, 500, "Get https://node-1:10250/containerLogs: dial tcp: i/o timeout");
  PodStarts(pod0, "echo-0");
  PodStarts(pod1, "echo-1");
  auto follower = std::async(std::launch::async, [&] { return Torchx({"log", "--tail", h + "/echo/0"}); });
  // Both pods' first reads failed: the status names one and counts the other.
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h).value("msg", "").find("(and 1 more pods)") != std::string::npos; }));
  EXPECT_THAT(StatusJson(h)["msg"].get<std::string>(), HasSubstr("i/o timeout"));
  auto once = Torchx({"log", h});
  EXPECT_EQ(once.exit_code, 1) << "a log that cannot be read is an error, not silence";
  EXPECT_THAT(once.err, HasSubstr("echo/0: the log of pod " + pod0 + " cannot be read"));
  EXPECT_THAT(once.err, HasSubstr("echo/1: the log of pod " + pod1 + " cannot be read"));
  std::this_thread::sleep_for(std::chrono::milliseconds(5500));
  // 0.3 s, doubling per failure up to 3 s: reads at 0, 0.3, 0.9, 2.1, 4.5 s, not one a second.
  std::vector<double> reads = LogReads(pod0);
  ASSERT_GE(reads.size(), 2u);
  EXPECT_LE(reads.size(), 7u);
  double longest = 0;
  for (size_t i = 1; i < reads.size(); ++i) longest = std::max(longest, reads[i] - reads[i - 1]);
  EXPECT_GE(longest, 2.0) << "the waits between reads grow";

  // The kubelet answers again: lines arrive, the problem is gone from the status.
  LogFails(pod0, 0);
  PodLog(pod0, {"back again"});
  ASSERT_TRUE(WaitUntil([&] { return Torchx({"log", h + "/echo/0"}).out == "echo/0 back again\n"; }, 20));
  EXPECT_THAT(StatusJson(h)["msg"].get<std::string>(), Not(HasSubstr(pod0 + " cannot")));
  EXPECT_THAT(StatusJson(h)["msg"].get<std::string>(), HasSubstr(pod1 + " cannot be read"));

  // Pod 0 ends and its log was read to the end: it is not asked for again.
  PodPhase(pod0, "Succeeded");
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][0]["state_name"] == "SUCCEEDED"; }));
  // Pod 1 ends without its log ever being read: given up after a few tries.
  PodPhase(pod1, "Failed", 1);
  JobPhase(job, "Failed");
  ASSERT_TRUE(WaitForState(h, "FAILED"));
  EXPECT_TRUE(WaitUntil([&] { return StatusJson(h).value("msg", "").find("given up") != std::string::npos; }, 30));
  // By now pod 0's last read (its stream may end before the watch says it
  // finished: one more read then reaches the end) is seconds behind.
  size_t after_end = LogReads(pod0).size();
  size_t given_up = LogReads(pod1).size();
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  EXPECT_EQ(LogReads(pod0).size(), after_end);
  EXPECT_EQ(LogReads(pod1).size(), given_up) << "no read after the log was given up";
  auto after = Torchx({"log", h});
  EXPECT_EQ(after.exit_code, 1);
  EXPECT_THAT(after.out, HasSubstr("echo/0 back again"));
  EXPECT_THAT(after.err, HasSubstr("given up"));

  ASSERT_EQ(follower.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "follow did not end";
  Output followed = follower.get();
  EXPECT_THAT(followed.err, HasSubstr("warning: echo/0: the log of pod " + pod0 + " cannot be read"));
  EXPECT_THAT(followed.err, HasSubstr("(still following)"));
  EXPECT_EQ(followed.out, "echo/0 back again\n") << "a follower keeps following through the problem";
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
}

TEST_F(KubernetesE2eTest, DeletedPodsEndTheirReplicasAlsoWhenOnlyARelistShowsIt) {
  std::string h = Submit(3);
  std::string job = JobName(h);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][2]["state_name"] == "RUNNING"; }));
  ASSERT_EQ(api_.Post("/fake/pods/team/" + job + "-echo-0-0/delete"), 200);
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][0]["state_name"] == "FAILED"; }));
  EXPECT_THAT(StatusJson(h)["roles"][0]["replicas"][0].dump(), HasSubstr("was deleted before it finished"));
  // Every state change of a replica is on the timeline.
  EXPECT_TRUE(WaitUntil([&] {
    return Torchx({"events", h}).out.find("echo/0 failed: pod " + job + "-echo-0-0 was deleted before it finished") !=
           std::string::npos;
  })) << Torchx({"events", h}).out;
  // Deleted while no daemon watched: the next one's list lacks it.
  ASSERT_EQ(Torchx({"daemon", "stop"}).exit_code, 0);
  ASSERT_EQ(api_.Post("/fake/pods/team/" + job + "-echo-1-0/delete"), 200);
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][1]["state_name"] == "FAILED"; }));
  EXPECT_EQ(StatusJson(h)["roles"][0]["replicas"][2]["state_name"], "RUNNING");
  // A cancel: Volcano deletes the running pods; their replicas end CANCELLED, none stays RUNNING.
  ASSERT_EQ(Torchx({"cancel", h}).exit_code, 0);
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][2]["state_name"] == "CANCELLED"; }));
}

TEST_F(KubernetesE2eTest, SidecarsAndPodLevelReasonsDoNotHideTheReplicasOutcome) {
  std::string h = Submit(1);
  std::string job = JobName(h);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  // The kubelet lists containers by name: the sidecar first. The node evicted the pod.
  PodStatus(job + "-echo-0-0",
            {{"phase", "Failed"},
             {"reason", "Evicted"},
             {"message", "The node was low on resource: memory."},
             {"containerStatuses",
              {{{"name", "aaa-sidecar"}, {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}},
               {{"name", "echo-0"}, {"state", {{"terminated", {{"exitCode", 137}, {"reason", "Error"}}}}}}}}});
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][0]["state_name"] == "FAILED"; }));
  json replica = StatusJson(h)["roles"][0]["replicas"][0];
  EXPECT_EQ(replica["exit_code"], 137) << replica.dump();
  EXPECT_THAT(replica.dump(), HasSubstr("Evicted: The node was low on resource: memory."));
}

TEST_F(KubernetesE2eTest, ASidecarPodsLogIsItsTasksContainersAndARefusedLogIsNeverAnEmptyOne) {
  std::string h = Submit(1);
  std::string job = JobName(h);
  ASSERT_EQ(api_.Post("/fake/jobs/team/" + job + "/sidecar", {{"name", "log-agent"}}), 200);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  std::string pod = job + "-echo-0-0";
  PodLog(pod, {"from the task's container"});
  ASSERT_TRUE(WaitForLog(h, "from the task's container")) << Torchx({"log", h}).err;
  json sent = api_.State();  // kept: the loop walks a part of it
  for (const auto& r : sent["requests"]) {
    if (r["path"] == "/api/v1/namespaces/team/pods/" + pod + "/log") {
      EXPECT_EQ(r["query"].value("container", ""), "echo-0");
    }
  }
  PodPhase(pod, "Succeeded");
  JobPhase(job, "Completed");
  ASSERT_TRUE(WaitForState(h, "SUCCEEDED"));
  auto log = Torchx({"log", h});
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_EQ(log.out, "echo/0 from the task's container\n");

  // A finished pod whose log the apiserver refuses (a 4xx other than 404): said, not an empty log.
  // Its first read comes once it finished.
  std::string h2 = Submit(1);
  std::string job2 = JobName(h2);
  ASSERT_EQ(api_.Post("/fake/jobs/team/" + job2 + "/phase", {{"phase", "Running"}, {"pods", "Pending"}}), 200);
  ASSERT_TRUE(WaitForState(h2, "RUNNING"));
  LogFails(job2 + "-echo-0-0", 400, "container echo-0 is not valid for pod " + job2 + "-echo-0-0");
  PodStatus(job2 + "-echo-0-0",
            {{"phase", "Succeeded"},
             {"containerStatuses", {{{"name", "echo-0"}, {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}}}}});
  JobPhase(job2, "Completed");
  ASSERT_TRUE(WaitForState(h2, "SUCCEEDED"));
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h2).value("msg", "").find("cannot be read") != std::string::npos; }))
      << StatusJson(h2).dump();
  auto refused = Torchx({"log", h2});
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_THAT(refused.err, HasSubstr("is not valid for pod"));
}

TEST_F(KubernetesE2eTest, ADeletedJobsReplicasStayEndedThroughItsPodsGracefulDeletionAndARestart) {
  std::string h = Submit(2);
  std::string job = JobName(h);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][1]["state_name"] == "RUNNING"; }));
  // kubectl delete vcjob: the Job goes at once, its pods stay a while (graceful deletion).
  ASSERT_EQ(api_.Post("/fake/gc-delay", {{"seconds", 30}}), 200);
  ASSERT_EQ(api_.Post("/fake/jobs/team/" + job + "/delete"), 200);
  ASSERT_TRUE(WaitForState(h, "FAILED"));
  auto ended = [&] {
    json st = StatusJson(h);
    for (int r = 0; r < 2; ++r) {
      if (st["roles"][0]["replicas"][r]["state_name"] != "FAILED") return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitUntil(ended)) << StatusJson(h).dump();
  // The timeline ends as the app did: each replica, then the app.
  std::string events = Torchx({"events", h}).out;
  EXPECT_THAT(events, HasSubstr("echo/1 failed: its Job was deleted"));
  EXPECT_THAT(events, HasSubstr("ended       FAILED: the Volcano Job team/" + job + " was deleted from the cluster"));
  // Later updates of the pods (the kubelet still reports them running) add nothing that revives them.
  PodStatus(job + "-echo-0-0", {{"phase", "Running"}});
  PodLog(job + "-echo-1-0", {"late line"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(ended()) << StatusJson(h).dump();
  EXPECT_THAT(StatusJson(h).value("msg", ""), HasSubstr("was deleted from the cluster"));
  // A restart while the pods still exist: the relist finds them running, the replicas stay ended.
  ASSERT_EQ(Torchx({"daemon", "stop"}).exit_code, 0);
  EXPECT_EQ(StatusJson(h)["state"], "FAILED");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(ended()) << StatusJson(h).dump();
  // The containers end (exit 143) and the pods go: that only adds the exit code.
  ASSERT_EQ(api_.Post("/fake/pods/team/" + job + "-echo-1-0/phase", {{"phase", "Failed"}, {"exitCode", 143}}), 200);
  // (exit_code is null until there is one: value() would throw on it)
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][1]["exit_code"] == 143; }));
  EXPECT_TRUE(ended()) << StatusJson(h).dump();
  EXPECT_THAT(StatusJson(h)["roles"][0]["replicas"][1].dump(), HasSubstr("its Job was deleted"));
}

TEST_F(KubernetesE2eTest, APendingPodSaysWhyItWaitsInStatusListAndTheAppsTimeline) {
  std::string h = Submit(1);
  std::string job = JobName(h);
  std::string pod = job + "-echo-0-0";
  ASSERT_EQ(api_.Post("/fake/jobs/team/" + job + "/phase", {{"phase", "Running"}, {"pods", "Pending"}}), 200);
  // Seen before the next change: a watch that starts after both (the daemon
  // lists first) rightly sees only the last, and the timeline below has each.
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  JobPhase(job, "Pending");  // the gang is not scheduled: Volcano holds the Job
  ASSERT_TRUE(WaitForState(h, "PENDING"));
  const std::string unschedulable = "Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.";
  PodStatus(pod, {{"containerStatuses", json::array()},
                  {"conditions", {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"},
                                   {"message", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}}}}});
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["msg"].get<std::string>().find(unschedulable) != std::string::npos; }))
      << StatusJson(h).dump();
  EXPECT_EQ(StatusJson(h)["msg"], "echo/0: " + unschedulable);
  EXPECT_THAT(Torchx({"status", h}).out, HasSubstr("echo[0]:PENDING (" + unschedulable + ")"));
  EXPECT_THAT(Torchx({"list"}, "COLUMNS=300").out, HasSubstr("echo/0: " + unschedulable));
  // Scheduled; the image pull backs off: said in the replica's line while it lasts.
  PodStatus(pod, {{"nodeName", "gpu-node-3"},
                  {"conditions", {{{"type", "PodScheduled"}, {"status", "True"}}}},
                  {"containerStatuses",
                   {{{"name", "echo-0"},
                     {"state", {{"waiting", {{"reason", "ImagePullBackOff"},
                                             {"message", "Back-off pulling image \"busybox\""}}}}}}}}});
  ASSERT_TRUE(WaitUntil([&] { return Torchx({"status", h}).out.find("ImagePullBackOff") != std::string::npos; }));
  EXPECT_THAT(Torchx({"status", h}).out, HasSubstr("echo[0]:PENDING (ImagePullBackOff: Back-off pulling image \"busybox\")"));
  PodStarts(pod, "echo-0");
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  EXPECT_THAT(Torchx({"status", h}).out, Not(HasSubstr("ImagePullBackOff"))) << "a running replica has nothing to wait for";
  PodPhase(pod, "Succeeded");
  JobPhase(job, "Completed");
  ASSERT_TRUE(WaitForState(h, "SUCCEEDED"));
  // The timeline: each step once, in order.
  auto events = Torchx({"events", "--json", h});
  ASSERT_EQ(events.exit_code, 0) << events.err;
  std::vector<std::string> steps;
  std::string text;
  std::istringstream lines(events.out);
  for (std::string line; std::getline(lines, line);) {
    json e = json::parse(line);
    steps.push_back(e["type"].get<std::string>() + (e.contains("replica") ? " " + e["replica"].get<std::string>() : ""));
    text += e["text"].get<std::string>() + "\n";
  }
  // The Job's and the pods' watches are two streams: each in its own order.
  std::vector<std::string> pod_steps, job_steps;
  for (const auto& s : steps) (s.find(" echo/0") != std::string::npos ? pod_steps : job_steps).push_back(s);
  EXPECT_EQ(pod_steps, (std::vector<std::string>{"waiting echo/0", "unschedulable echo/0", "scheduled echo/0",
                                                 "backoff echo/0", "started echo/0", "exited echo/0"}))
      << events.out;
  EXPECT_EQ(job_steps, (std::vector<std::string>{"submitted", "job", "job", "job", "ended"})) << events.out;
  EXPECT_THAT(text, HasSubstr("pod " + pod + ": " + unschedulable));
  EXPECT_THAT(text, HasSubstr("pod " + pod + " scheduled on node gpu-node-3"));
  EXPECT_THAT(text, HasSubstr("pod " + pod + ": ImagePullBackOff: Back-off pulling image \"busybox\""));
  EXPECT_THAT(text, HasSubstr("succeeded (attempt 1, pod " + pod + ")"));
}

}  // namespace
