// Reading Volcano Jobs, Pods and kubelet log lines back into TorchX's terms.
#include "k8sbridge/job_state.h"

#include <gtest/gtest.h>

#include "core/app_status.h"
#include "core/components.h"
#include "k8sbridge/kube_api.h"
#include "k8sbridge/pod_log_follower.h"

namespace torchxd::k8sbridge {
namespace {

using core::AppState;
using nlohmann::json;

TEST(JobStateTest, JobPhasesMapAsTorchx) {
  struct Case {
    const char* phase;
    AppState want;
  };
  for (const auto& c : std::vector<Case>{{"Pending", AppState::kPending},
                                         {"Aborting", AppState::kRunning},
                                         {"Aborted", AppState::kCancelled},
                                         {"Running", AppState::kRunning},
                                         {"Restarting", AppState::kRunning},
                                         {"Completed", AppState::kSucceeded},
                                         {"Completing", AppState::kRunning},
                                         {"Terminating", AppState::kRunning},
                                         {"Terminated", AppState::kFailed},
                                         {"Failed", AppState::kFailed},
                                         {"", AppState::kSubmitted},
                                         {"Exploded", AppState::kUnknown}}) {
    SCOPED_TRACE(c.phase);
    EXPECT_EQ(JobPhaseToAppState(c.phase), c.want);
  }
  EXPECT_EQ(PodPhaseToReplicaState("Bound"), AppState::kPending);
  EXPECT_EQ(PodPhaseToReplicaState("Releasing"), AppState::kRunning);
}

TEST(JobStateTest, ReadsAFailedPod) {
  json pod = json::parse(R"({"metadata": {"name": "j-trainer-1-0", "namespace": "ns", "uid": "u1",
      "labels": {"volcano.sh/job-name": "j", "volcano.sh/task-spec": "trainer-1"}},
    "status": {"phase": "Failed", "podIP": "10.244.1.5", "startTime": "2026-01-02T03:04:05Z",
      "containerStatuses": [{"state": {"terminated": {"exitCode": 3, "reason": "Error",
        "finishedAt": "2026-01-02T03:04:09Z"}}}]}})");
  PodView v = ReadPod(pod);
  EXPECT_EQ(v.job_name, "j");
  EXPECT_EQ(v.task, "trainer-1");
  EXPECT_EQ(v.state, AppState::kFailed);
  EXPECT_EQ(v.hostname, "10-244-1-5.ns.pod.cluster.local");
  EXPECT_EQ(v.exit_code, 3);
  EXPECT_EQ(*v.end_ms - *v.start_ms, 4000);
  EXPECT_EQ(v.error_message, "Error");
  EXPECT_TRUE(v.started);
}

TEST(JobStateTest, TheMainContainerIsFoundByNameNotPosition) {
  // The kubelet lists containers by name: an "aaa-proxy" sidecar comes first.
  json pod = json::parse(R"({"metadata": {"name": "j-trainer-0-0", "uid": "u1",
      "labels": {"volcano.sh/job-name": "j", "volcano.sh/task-spec": "trainer-0"}},
    "status": {"phase": "Failed", "containerStatuses": [
      {"name": "aaa-proxy", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
      {"name": "trainer-0", "state": {"terminated": {"exitCode": 7, "reason": "Error", "message": "bad input"}}}]}})");
  PodView v = ReadPod(pod);
  EXPECT_EQ(v.exit_code, 7);
  EXPECT_EQ(v.error_message, "Error: bad input");
  json sidecar_only = pod;
  sidecar_only["status"]["containerStatuses"].erase(1);
  EXPECT_EQ(ReadPod(sidecar_only).exit_code, std::nullopt) << "a sidecar's exit is not the replica's";
}

TEST(JobStateTest, TheLogToReadIsTheTasksContainerEvenBehindASidecar) {
  json pod = json::parse(R"({"metadata": {"name": "j-sh-0-0", "uid": "u1",
      "labels": {"volcano.sh/job-name": "j", "volcano.sh/task-spec": "sh-0"}},
    "spec": {"containers": [{"name": "log-agent"}, {"name": "sh-0"}]},
    "status": {"phase": "Running", "containerStatuses": [
      {"name": "log-agent", "state": {"running": {}}}, {"name": "sh-0", "state": {"running": {}}}]}})");
  EXPECT_EQ(ReadPod(pod).container, "sh-0");
  // A Job not laid out by torchx: its template's first container.
  pod["spec"]["containers"] = json::parse(R"([{"name": "main"}, {"name": "log-agent"}])");
  pod["status"]["containerStatuses"][1]["name"] = "main";
  EXPECT_EQ(ReadPod(pod).container, "main");
  EXPECT_TRUE(ReadPod(pod).started);
}

TEST(JobStateTest, APodLevelReasonComesFirst) {
  json pod = json::parse(R"({"metadata": {"name": "j-trainer-0-0", "uid": "u1",
      "labels": {"volcano.sh/job-name": "j", "volcano.sh/task-spec": "trainer-0"}},
    "status": {"phase": "Failed", "reason": "Evicted",
      "message": "The node was low on resource: memory. Container trainer-0 was using 30Gi.",
      "containerStatuses": [{"name": "trainer-0",
        "state": {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown"}}}]}})");
  PodView v = ReadPod(pod);
  EXPECT_EQ(v.state, AppState::kFailed);
  EXPECT_EQ(v.error_message,
            "Evicted: The node was low on resource: memory. Container trainer-0 was using 30Gi. "
            "(container: ContainerStatusUnknown)");
}

TEST(JobStateTest, APendingPodSaysWhyItWaits) {
  json pod = json::parse(R"({"metadata": {"name": "j-trainer-0-0", "uid": "u1",
      "labels": {"volcano.sh/job-name": "j", "volcano.sh/task-spec": "trainer-0"}},
    "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
      "reason": "Unschedulable", "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]}})");
  PodView v = ReadPod(pod);
  EXPECT_EQ(v.wait_kind, "unschedulable");
  EXPECT_EQ(v.wait, "Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.");
  EXPECT_TRUE(v.node.empty());
  // Bound to a node, its container backs off: that is the wait now.
  pod["spec"] = {{"nodeName", "n3"}, {"containers", {{{"name", "trainer-0"}}}}};
  pod["status"]["conditions"][0]["status"] = "True";
  pod["status"]["containerStatuses"] = json::parse(
      R"([{"name": "trainer-0", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}}])");
  v = ReadPod(pod);
  EXPECT_EQ(v.node, "n3");
  EXPECT_EQ(v.wait_kind, "backoff");
  EXPECT_EQ(v.wait, "CrashLoopBackOff: back-off 40s");
  pod["status"]["containerStatuses"][0]["state"] = {{"waiting", {{"reason", "ContainerCreating"}}}};
  EXPECT_EQ(ReadPod(pod).wait_kind, "waiting");
  // Running: nothing to wait for.
  pod["status"]["phase"] = "Running";
  pod["status"]["containerStatuses"][0]["state"] = {{"running", json::object()}};
  EXPECT_TRUE(ReadPod(pod).wait.empty());
  // A running pod whose container waits to start again says so (it was read only while Pending).
  pod["status"]["containerStatuses"][0]["state"] = {{"waiting", {{"reason", "CrashLoopBackOff"}, {"message", "back-off 5m0s"}}}};
  v = ReadPod(pod);
  EXPECT_EQ(v.state, core::ReplicaState::kRunning);
  EXPECT_EQ(v.wait_kind, "backoff");
  EXPECT_EQ(v.wait, "CrashLoopBackOff: back-off 5m0s");
  pod["status"]["containerStatuses"][0]["state"] = {{"waiting", {{"reason", "ContainerCreating"}}}};
  EXPECT_TRUE(ReadPod(pod).wait.empty()) << "a running pod's other waits are not news";
  // Deleted gracefully (kubectl delete pod): still running, and said so.
  pod["status"]["containerStatuses"][0]["state"] = {{"running", json::object()}};
  pod["metadata"]["deletionTimestamp"] = "2026-12-07T18:00:00Z";
  v = ReadPod(pod);
  EXPECT_EQ(v.state, core::ReplicaState::kRunning);
  EXPECT_EQ(v.wait_kind, "terminating");
  EXPECT_EQ(v.wait, "being deleted (since 2026-12-07T18:00:00Z): its containers have their grace period to end");
  pod["status"]["phase"] = "Failed";
  EXPECT_TRUE(ReadPod(pod).wait.empty()) << "ended: nothing to wait for";
}

TEST(JobStateTest, TaskNamesFollowTheTranslation) {
  core::AppDef app;
  app.name = "x";
  core::Role a;
  a.name = "Train_er";
  a.num_replicas = 2;
  app.roles = {a};
  auto names = TaskNames(app);
  ASSERT_EQ(names.count("trainer-1"), 1u);
  EXPECT_EQ(names["trainer-1"], std::make_pair(std::string("Train_er"), 1));
}

TEST(JobStateTest, AbortCommandTargetsTheJobByUid) {
  json c = AbortJobCommand("job-a", "uid-1");
  EXPECT_EQ(c["action"], "AbortJob");
  EXPECT_EQ(c["target"]["uid"], "uid-1");
  EXPECT_EQ(c["metadata"]["generateName"], "job-a-abortjob-");
  EXPECT_EQ(c["metadata"]["ownerReferences"][0]["name"], "job-a");
}

TEST(KubeletLogTest, TimestampsParseToNanoseconds) {
  EXPECT_EQ(*core::ParseRfc3339Nanos("1970-01-01T00:00:01.5Z"), 1500000000);
  EXPECT_EQ(*core::ParseRfc3339Nanos("2021-08-09T20:57:01.479780331Z") % 1000000000, 479780331);
  EXPECT_FALSE(core::ParseRfc3339Nanos("yesterday").has_value());
  auto [ns, text] = SplitTimestamp("1970-01-01T00:00:02Z hello world");
  EXPECT_EQ(*ns, 2000000000);
  EXPECT_EQ(text, "hello world");
  auto [none, raw] = SplitTimestamp("no stamp here");
  EXPECT_FALSE(none.has_value());
  EXPECT_EQ(raw, "no stamp here");
}

TEST(KubeApiTest, StatusErrorsCarryReasonAndFields) {
  Error e = StatusError(422, R"({"kind":"Status","reason":"Invalid","message":"bad name",
      "details":{"causes":[{"field":"spec.tasks.name"},{"field":"spec.queue"}]}})", "POST /x");
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message, "kube-apiserver POST /x: 422 Invalid: bad name (fields: spec.tasks.name, spec.queue)");
  EXPECT_EQ(StatusError(409, "{}", "POST /x").code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(StatusError(503, "busy", "GET /y").message, "kube-apiserver GET /y: 503: busy");
}

TEST(KubeApiTest, LineBufferCarriesPartialLines) {
  LineBuffer b;
  std::vector<std::string> lines;
  auto add = [&](std::string_view l) { lines.emplace_back(l); };
  b.Feed("{\"a\":1}\n{\"b\"", add);
  b.Feed(":2}\n\n", add);
  EXPECT_EQ(lines, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", ""}));
  b.Feed("tail", add);
  EXPECT_EQ(b.TakeRest(), "tail");
}

}  // namespace
}  // namespace torchxd::k8sbridge

namespace torchxd::k8sbridge {
namespace {

TEST(JobStateTest, AFoundJobsRolesComeFromTorchxsLabelsElseEachTaskIsARole) {
  json job = json::parse(R"({"metadata": {"name": "j", "creationTimestamp": "2026-01-02T03:04:05Z",
      "labels": {"torchx.pytorch.org/app-name": "theirs"}},
    "spec": {"tasks": [
      {"name": "worker-1", "replicas": 1, "template": {"metadata": {"labels": {
        "torchx.pytorch.org/role-name": "worker", "torchx.pytorch.org/role-index": "1",
        "torchx.pytorch.org/replica-id": "1"}}, "spec": {"containers": [{"name": "worker-1", "image": "w"}]}}},
      {"name": "master-0", "replicas": 1, "template": {"metadata": {"labels": {
        "torchx.pytorch.org/role-name": "master", "torchx.pytorch.org/role-index": "0",
        "torchx.pytorch.org/replica-id": "0"}}, "spec": {"containers": [{"name": "master-0", "image": "m"}]}}},
      {"name": "worker-0", "replicas": 1, "template": {"metadata": {"labels": {
        "torchx.pytorch.org/role-name": "worker", "torchx.pytorch.org/role-index": "1"}},
        "spec": {"containers": [{"name": "worker-0", "image": "w"}]}}},
      {"name": "ps", "replicas": 3, "template": {"spec": {"containers": [{"name": "main", "image": "p"}]}}},
      {"name": "huge", "replicas": 1000000000, "template": {"spec": {"containers": [{"name": "main"}]}}}]}})");
  JobApp read = ReadJobApp(job);
  EXPECT_EQ(read.app.name, "theirs");
  ASSERT_EQ(read.app.roles.size(), 4u);
  EXPECT_EQ(read.app.roles[0].name, "master");
  EXPECT_EQ(read.app.roles[0].num_replicas, 1);
  EXPECT_EQ(read.app.roles[1].name, "worker");
  EXPECT_EQ(read.app.roles[1].num_replicas, 2) << "a task without a replica-id takes the lowest free one";
  EXPECT_EQ(read.app.roles[2].name, "ps");
  EXPECT_EQ(read.app.roles[2].num_replicas, 3);
  EXPECT_EQ(read.app.roles[2].image, "p");
  EXPECT_EQ(read.app.roles[3].num_replicas, kMaxForeignReplicas) << "bounded, whatever the Job says";
  EXPECT_EQ(read.tasks.at("worker-0"), std::make_pair(std::string("worker"), 0));
  EXPECT_EQ(read.tasks.at("worker-1"), std::make_pair(std::string("worker"), 1));
  EXPECT_EQ(read.tasks.at(TaskReplicaKey("ps", 2)), std::make_pair(std::string("ps"), 2));
  EXPECT_EQ(read.tasks.count("ps"), 0u);
}

}  // namespace
}  // namespace torchxd::k8sbridge
