// The kubernetes scheduler end to end: the real torchx and torchxd against
// the fake kube-apiserver (fake_apiserver.py), which plays Volcano's
// controller and the kubelet on the tests' command.
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

TEST_F(KubernetesE2eTest, RunGoesPendingRunningSucceededWithLogsAndListsBesideLocalApps) {
  std::string h = Submit(2);
  ASSERT_THAT(h, HasSubstr("kubernetes://torchx/team:echo-"));
  std::string job = JobName(h);
  EXPECT_EQ(StatusJson(h)["state"], "SUBMITTED");

  // Validated server-side first (the queue, a pod per role, the Job: dryRun=All),
  // then created, with the bearer token (else 401).
  json state = api_.State();
  std::vector<std::string> posts;
  for (const auto& r : state["requests"]) {
    if (r["method"] == "POST") posts.push_back(r["path"].get<std::string>() + "?" + r["query"].dump());
  }
  EXPECT_EQ(state["requests"][0]["path"], "/apis/scheduling.volcano.sh/v1beta1/queues/default");
  ASSERT_EQ(posts.size(), 3u);
  EXPECT_THAT(posts[0], HasSubstr("/api/v1/namespaces/team/pods?{\"dryRun\":\"All\"}")) << "one pod: one role";
  EXPECT_THAT(posts[1], HasSubstr("/jobs?{\"dryRun\":\"All\"}"));
  EXPECT_THAT(posts[2], Not(HasSubstr("dryRun")));
  ASSERT_EQ(state["jobs"].size(), 1u);
  EXPECT_EQ(state["jobs"][0]["metadata"]["labels"]["app.kubernetes.io/managed-by"], "torchx.pytorch.org");
  if (!schemas_.empty()) {
    EXPECT_EQ(state["pruned"], json::array()) << "the bridge sent fields the CRD does not know";
  }

  JobPhase(job, "Pending");
  EXPECT_TRUE(WaitForState(h, "PENDING"));
  JobPhase(job, "Running");  // the fake creates the pods
  EXPECT_TRUE(WaitForState(h, "RUNNING"));
  PodLog(job + "-echo-0-0", {"hello from 0", "second line"});
  PodLog(job + "-echo-1-0", {"hello from 1"});
  EXPECT_TRUE(WaitForLog(h, "echo/1 hello from 1"));
  PodPhase(job + "-echo-0-0", "Succeeded");
  PodPhase(job + "-echo-1-0", "Succeeded");
  JobPhase(job, "Completed");
  EXPECT_TRUE(WaitForState(h, "SUCCEEDED"));

  json s = StatusJson(h);
  EXPECT_EQ(s["roles"][0]["replicas"][0]["state_name"], "SUCCEEDED");
  EXPECT_EQ(s["roles"][0]["replicas"][0]["hostname"].get<std::string>().find("10-244-0-"), 0u);
  auto log = Torchx({"log", h + "/echo/0"});
  EXPECT_EQ(log.out, "echo/0 hello from 0\necho/0 second line\n");
  auto stamped = Torchx({"log", "--timestamps", h + "/echo/1"});
  EXPECT_THAT(stamped.out, ::testing::MatchesRegex("echo/1 20[0-9-]+T[0-9:.]+Z hello from 1\n"));
  auto streams = Torchx({"log", "--streams", "stderr", h});
  EXPECT_EQ(streams.exit_code, 2);
  EXPECT_THAT(streams.err, HasSubstr("one log stream"));

  auto local = Torchx({"run", "--wait", "utils.echo", "--msg", "local"});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto list = Torchx({"list"});
  EXPECT_THAT(list.out, HasSubstr(h));
  EXPECT_THAT(list.out, HasSubstr("local_cwd://torchx/echo-"));
}

TEST_F(KubernetesE2eTest, WithoutANamespaceOptionTheKubeconfigContextsNamespaceIsUsed) {
  auto run = Torchx({"run", "-s", "kubernetes", "-cfg", "queue=default", "utils.echo"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("kubernetes://torchx/team:echo-"));  // the fixture's context says team
  EXPECT_EQ(api_.State()["jobs"][0]["metadata"]["namespace"], "team");
}

TEST_F(KubernetesE2eTest, AFailingTaskFailsTheAppWithItsExitCode) {
  std::string h = Submit(2);
  std::string job = JobName(h);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  PodLog(job + "-echo-1-0", {"Traceback: boom"});
  PodPhase(job + "-echo-1-0", "Failed", 3);
  JobPhase(job, "Failed");
  ASSERT_TRUE(WaitForState(h, "FAILED"));
  json s = StatusJson(h);
  EXPECT_EQ(s["roles"][0]["replicas"][1]["state_name"], "FAILED");
  EXPECT_EQ(s["roles"][0]["replicas"][1]["exit_code"], 3);
  EXPECT_EQ(Torchx({"log", h + "/echo/1"}).out, "echo/1 Traceback: boom\n");
}

TEST_F(KubernetesE2eTest, FollowedLogsSurviveAPodRestartAndEndWithTheApp) {
  std::string h = Submit(1);
  std::string job = JobName(h);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  auto follower = std::async(std::launch::async, [&] { return Torchx({"log", "--tail", h}); });
  PodLog(job + "-echo-0-0", {"attempt one"});
  ASSERT_TRUE(WaitForLog(h, "attempt one"));
  // Volcano restarts the task: the old pod (and, on a cluster, its log) is deleted.
  ASSERT_EQ(api_.Post("/fake/pods/team/" + job + "-echo-0-0/restart"), 200);
  PodLog(job + "-echo-0-0", {"attempt two"});
  ASSERT_TRUE(WaitForLog(h, "attempt two"));
  PodPhase(job + "-echo-0-0", "Succeeded");
  JobPhase(job, "Completed");
  ASSERT_EQ(follower.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "follow did not end";
  Output followed = follower.get();
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  EXPECT_EQ(followed.out, "echo/0 attempt one\necho/0 attempt two\n");
  EXPECT_EQ(StatusJson(h)["num_restarts"], 1);
  EXPECT_EQ(StatusJson(h)["roles"][0]["replicas"][0]["attempt"], 2);
}

TEST_F(KubernetesE2eTest, CancelAbortsThroughAVolcanoCommand) {
  std::string h = Submit(2);
  std::string job = JobName(h);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  auto cancel = Torchx({"cancel", h});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.out, h + " CANCELLED\n");
  json state = api_.State();
  ASSERT_EQ(state["commands"].size(), 1u);
  const json& cmd = state["commands"][0];
  EXPECT_EQ(cmd["action"], "AbortJob");
  EXPECT_EQ(cmd["target"]["name"], job);
  EXPECT_EQ(cmd["target"]["uid"], state["jobs"][0]["metadata"]["uid"]);
  EXPECT_EQ(state["jobs"][0]["status"]["state"]["phase"], "Aborted");  // the Job itself is kept
  EXPECT_EQ(Torchx({"cancel", h}).out, h + " already CANCELLED\n");

  auto del = Torchx({"delete", h});
  EXPECT_EQ(del.exit_code, 0) << del.err;
  EXPECT_EQ(api_.State()["jobs"].size(), 0u);
  EXPECT_EQ(Torchx({"status", h}).exit_code, 1);
}

TEST_F(KubernetesE2eTest, ARejectedSpecIsAClearErrorAndNothingIsStored) {
  ASSERT_EQ(api_.Post("/fake/reject-next", {{"code", 422},
                                            {"reason", "Invalid"},
                                            {"field", "spec.queue"},
                                            {"message", "queue \"default\" is closed"}}),
            200);
  auto run = Torchx({"run", "-s", "kubernetes", "-cfg", "queue=default,namespace=team", "utils.echo"});
  EXPECT_EQ(run.exit_code, 2);  // bad input, as a component's bad argument
  EXPECT_THAT(run.err, HasSubstr("Invalid job spec"));
  EXPECT_THAT(run.err, HasSubstr("422 Invalid"));
  EXPECT_THAT(run.err, HasSubstr("spec.queue"));
  EXPECT_THAT(run.err, HasSubstr("queue \"default\" is closed"));
  EXPECT_EQ(api_.State()["jobs"].size(), 0u);
  EXPECT_THAT(Torchx({"list"}).out, Not(HasSubstr("kubernetes://")));
}

TEST_F(KubernetesE2eTest, WatchesResumeAfterDropsAndBothKindsOfExpiry) {
  std::string h = Submit(1);
  std::string job = JobName(h);
  ASSERT_EQ(api_.Post("/fake/watches/drop"), 200);  // connection lost: resume from the resourceVersion
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  ASSERT_EQ(api_.Post("/fake/watches/expire", {{"how", "event"}}), 200);  // ERROR event with a 410 Status
  PodPhase(job + "-echo-0-0", "Succeeded");
  ASSERT_EQ(api_.Post("/fake/watches/expire", {{"how", "http"}}), 200);  // plain HTTP 410
  JobPhase(job, "Completed");
  EXPECT_TRUE(WaitForState(h, "SUCCEEDED", 15));
  // The pods' watch catches up too (it may be backing off after the drop).
  EXPECT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][0]["state_name"] == "SUCCEEDED"; }));
}

TEST_F(KubernetesE2eTest, AnUnreachableApiServerShowsInTheStatusUntilItIsBack) {
  std::string h = Submit(1);
  std::string job = JobName(h);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  // The bridge says so from its first failed re-watch (~1 s in) until a list
  // succeeds; its lists back off 1.6 s, then 3.2 s: 4 s keeps the message up
  // ~5 s, room for a poll that runs `torchx status` on a busy machine (2.5 s
  // left it up ~1.6 s).
  ASSERT_EQ(api_.Post("/fake/outage", {{"seconds", 4}}), 200);
  EXPECT_TRUE(WaitUntil([&] {
    return StatusJson(h).value("msg", "").find("cannot watch the cluster") != std::string::npos;
  }));
  EXPECT_EQ(StatusJson(h)["state"], "RUNNING");  // the last known state, flagged as possibly stale
  JobPhase(job, "Completed");  // while the bridge cannot see it
  EXPECT_TRUE(WaitForState(h, "SUCCEEDED", 40));  // relisted once the server is back
  // A log read that failed in the outage says so until the next read, which
  // may still be backing off when the relist comes: then the note goes.
  std::string msg;
  EXPECT_TRUE(WaitUntil([&] { return (msg = StatusJson(h).value("msg", "x")).empty(); }, 30)) << msg;
}

TEST_F(KubernetesE2eTest, ARestartedDaemonRelistsAndResumesLogsWhereTheStoreEnds) {
  std::string h, job;
  ASSERT_NO_FATAL_FAILURE(StopDaemonBetweenTwoLines(&h, &job));
  PodPhase(job + "-echo-0-0", "Succeeded");
  JobPhase(job, "Completed");
  EXPECT_TRUE(WaitForState(h, "SUCCEEDED"));  // autostarts the daemon, which relists
  EXPECT_TRUE(WaitForLog(h, "while torchxd was down"));
  EXPECT_EQ(Torchx({"log", h}).out, "echo/0 before\necho/0 while torchxd was down\n");
}

TEST_F(KubernetesE2eTest, AOneOffLogReadFetchesWhatTheStoreStillLacks) {
  std::string h, job;
  ASSERT_NO_FATAL_FAILURE(StopDaemonBetweenTwoLines(&h, &job));
  // The restarted daemon's follow is slow to deliver: the read must not depend on it.
  ASSERT_EQ(api_.Post("/fake/logs/hold-follows", {{"seconds", 8}}), 200);
  auto log = Torchx({"log", h});  // autostarts the daemon
  EXPECT_EQ(log.out, "echo/0 before\necho/0 while torchxd was down\n") << log.err;
}

TEST_F(KubernetesE2eTest, FinishedKubernetesLogsCountInTheDaemonWideBudget) {
  ASSERT_NO_FATAL_FAILURE(StartOwnDaemon("--log-max-total 40K"));
  std::string h = Submit(1);
  std::string job = JobName(h);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  std::vector<std::string> lines;
  for (int i = 0; i < 400; ++i) lines.push_back("kubernetes line " + std::to_string(i) + " xxxxxxxx");
  PodLog(job + "-echo-0-0", lines);
  ASSERT_TRUE(WaitForLog(h, "kubernetes line 399"));
  PodPhase(job + "-echo-0-0", "Succeeded");
  JobPhase(job, "Completed");
  ASSERT_TRUE(WaitForState(h, "SUCCEEDED"));
  EXPECT_EQ(Torchx({"log", h}).exit_code, 0);  // about 13 KB: within the budget
  // A local app writing 34 KB (stdout and combined): over 40K together, so the oldest finished app, the
  // kubernetes one, gives up its logs.
  auto local = Torchx({"run", "--wait", "utils.sh", "--", "sh", "-c",
                       "i=0; while [ $i -lt 580 ]; do echo local line $i xxxxxxxxxxxxxx; i=$((i+1)); done"});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_TRUE(WaitUntil([&] { return Torchx({"log", h}).err.find("were evicted") != std::string::npos; }))
      << std::ifstream(dir_ / "own-daemon.log").rdbuf();
  EXPECT_EQ(StatusJson(h)["state"], "SUCCEEDED");  // the record stays
  EXPECT_EQ(Torchx({"log", local.out.substr(0, local.out.find('\n'))}).exit_code, 0);  // the newer logs stay
}

// master <- worker (elastic 1..2): dependsOn and the gang on Volcano, then `torchx scale`.
TEST_F(KubernetesE2eTest, DependenciesWaitOnTheClusterAndAnElasticRoleScales) {
  json app = {{"name", "dag"},
              {"roles",
               {{{"name", "master"}, {"image", "busybox"}, {"entrypoint", "sleep"}, {"args", {"600"}}},
                {{"name", "worker"}, {"image", "busybox"}, {"entrypoint", "sleep"}, {"args", {"600"}},
                 {"num_replicas", 2}, {"min_replicas", 1},
                 {"metadata", {{"torchxd/depends_on", {"master"}}}}}}}};
  std::ofstream(dir_ / "dag.json") << app.dump();
  auto run = Torchx({"run", "-s", "kubernetes", "-cfg", "queue=default,namespace=team", (dir_ / "dag.json").string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string h = run.out.substr(0, run.out.find('\n'));
  std::string job = JobName(h);
  json sent = api_.State()["jobs"][0];
  EXPECT_EQ(sent["spec"]["minAvailable"], 1) << "the gang is the tasks that wait for nothing";
  EXPECT_EQ(sent["spec"]["tasks"][1]["dependsOn"], json({{"name", {"master-0"}}, {"iteration", "all"}}));
  EXPECT_EQ(api_.State()["pruned"], json::array()) << "dependsOn is a field the CRD knows";

  // The worker's pods exist only once the master's runs.
  ASSERT_EQ(api_.Post("/fake/jobs/team/" + job + "/phase", {{"phase", "Running"}, {"pods", "Pending"}}), 200);
  auto pod_names = [&] {
    std::set<std::string> names;
    json state = api_.State();
    for (const auto& p : state["pods"]) names.insert(p["metadata"]["name"].get<std::string>());
    return names;
  };
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][0]["state_name"] == "PENDING"; }));
  EXPECT_EQ(pod_names(), std::set<std::string>({job + "-master-0-0"}));
  PodPhase(job + "-master-0-0", "Running");
  EXPECT_EQ(pod_names(), std::set<std::string>({job + "-master-0-0", job + "-worker-0-0", job + "-worker-1-0"}));
  PodPhase(job + "-worker-0-0", "Running");
  PodPhase(job + "-worker-1-0", "Running");
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][1]["replicas"][1]["state_name"] == "RUNNING"; }));

  // Scale: the task beyond the count gets 0 replicas, its pod goes, its replica is out of scale.
  auto bad = Torchx({"scale", h, "worker=3"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("worker=3: role worker runs between 1 and 2 replicas"));
  // The pod Volcano deletes is seen before the PATCH's answer: it still ends "scaled down".
  ASSERT_EQ(api_.Post("/fake/patch-answer-delay", {{"seconds", 0.5}}), 200);
  auto down = Torchx({"scale", h, "worker=1"});
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(down.out, h + " scaled: master=1 worker=1\n");
  EXPECT_EQ(api_.State()["jobs"][0]["spec"]["tasks"][2]["replicas"], 0);
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][1]["replicas"][1]["state_name"] == "CANCELLED"; }));
  EXPECT_EQ(StatusJson(h)["roles"][1]["replicas"][1]["error_message"], "scaled down: role worker runs 1 of 2 replicas");
  EXPECT_EQ(StatusJson(h)["state"], "RUNNING");
  int patches = 0;
  json state = api_.State();
  for (const auto& r : state["requests"]) patches += r["method"] == "PATCH" ? 1 : 0;
  EXPECT_EQ(patches, 1);

  // Back to 2, also after a daemon restart: a new pod, a new attempt.
  ASSERT_EQ(Torchx({"daemon", "stop"}).exit_code, 0);
  ASSERT_EQ(Torchx({"scale", h, "worker=2"}).exit_code, 0);
  EXPECT_EQ(api_.State()["jobs"][0]["spec"]["tasks"][2]["replicas"], 1);
  PodPhase(job + "-worker-1-0", "Running");
  ASSERT_TRUE(WaitUntil([&] {
    json r = StatusJson(h)["roles"][1]["replicas"][1];
    return r["state_name"] == "RUNNING" && r["attempt"] == 2;
  }));
  EXPECT_EQ(StatusJson(h)["roles"][1]["replicas"][0]["attempt"], 1);
}

TEST_F(KubernetesE2eTest, WhatTheClusterCouldNeverRunIsRefusedAtSubmit) {
  auto run = [&](const std::string& cfg, const std::vector<std::string>& component = {"utils.echo"}) {
    std::vector<std::string> args = {"run", "-s", "kubernetes", "-cfg", "namespace=team," + cfg};
    args.insert(args.end(), component.begin(), component.end());
    return Torchx(args);
  };
  auto missing = run("queue=no-such-queue");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("queue `no-such-queue` does not exist on the cluster"));
  ASSERT_EQ(api_.Post("/fake/queues/closed", {{"state", "Closed"}}), 200);
  auto closed = run("queue=closed");
  EXPECT_EQ(closed.exit_code, 2);
  EXPECT_THAT(closed.err, HasSubstr("queue `closed` is Closed: Volcano takes jobs only into Open queues"));
  auto robot = run("queue=default,service_account=robot");
  EXPECT_EQ(robot.exit_code, 2);
  EXPECT_THAT(robot.err, HasSubstr("service_account: `robot` does not exist in namespace team"));
  // The Pod API's own rules (the Job's dry run does not apply them), here and in a dry run.
  auto env = run("queue=default", {"utils.sh", "--env", "1BAD=x", "true"});
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_THAT(env.err, HasSubstr("env[0].name: Invalid value: \"1BAD\": a valid environment variable name"));
  auto dry = Torchx({"run", "--dryrun", "-s", "kubernetes", "-cfg", "queue=default", "utils.sh", "--env", "1BAD=x", "true"});
  EXPECT_EQ(dry.exit_code, 2);
  EXPECT_THAT(dry.err, HasSubstr("1BAD"));
  // What only the cluster knows (an admission policy): the pod dry run says it.
  ASSERT_EQ(api_.Post("/fake/reject-next-pod",
                      {{"code", 403},
                       {"reason", "Forbidden"},
                       {"message", "pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": privileged"}}),
            200);
  auto policy = run("queue=default");
  EXPECT_EQ(policy.exit_code, 2);
  EXPECT_THAT(policy.err, HasSubstr("the cluster refuses pod echo-"));
  EXPECT_THAT(policy.err, HasSubstr("violates PodSecurity"));
  EXPECT_EQ(api_.State()["jobs"].size(), 0u) << "nothing refused was created";

  // Accepted: the service account exists; a caller who may not create pods is told the check was local.
  ASSERT_EQ(api_.Post("/fake/serviceaccounts/team/robot"), 200);
  ASSERT_EQ(api_.Post("/fake/forbid", {{"resource", "pods"}}), 200);
  auto ok = run("queue=default,service_account=robot");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.err, HasSubstr("checked by torchxd's own rules only"));
  EXPECT_EQ(api_.State()["jobs"].size(), 1u);
}

TEST_F(KubernetesE2eTest, ListShowsEveryTorchxJobOfTheNamespaceAndTheirsCanBeUsedToo) {
  std::string mine = Submit(1);
  auto elsewhere = Torchx({"run", "-s", "kubernetes", "-cfg", "queue=default,namespace=other", "utils.echo"});
  ASSERT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
  // A torchx Job somebody else submitted (another machine's torchx).
  json theirs = json::parse(R"json({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
    "metadata": {"name": "theirs-x1", "labels": {"app.kubernetes.io/managed-by": "torchx.pytorch.org",
                                                   "torchx.pytorch.org/app-name": "theirs"}},
    "spec": {"queue": "default", "tasks": [{"name": "trainer-0", "replicas": 1, "template": {
      "metadata": {"labels": {"app.kubernetes.io/managed-by": "torchx.pytorch.org",
                              "torchx.pytorch.org/role-name": "trainer", "torchx.pytorch.org/role-index": "0",
                              "torchx.pytorch.org/replica-id": "0"}},
      "spec": {"restartPolicy": "Never", "containers": [{"name": "trainer-0", "image": "pytorch/pytorch:2",
               "command": ["python", "-c", "print(1)"], "resources": {"limits": {"cpu": "2000m", "memory": "4096M"}}}]}}}]}})json");
  ASSERT_EQ(api_.Post("/fake/jobs/team", theirs), 201);
  std::string handle = "kubernetes://torchx/team:theirs-x1";

  // The namespace is watched already (mine is in it): theirs is listed once its watch event came.
  ASSERT_TRUE(WaitUntil([&] {
    return Torchx({"list", "-s", "kubernetes", "-cfg", "namespace=team"}).out.find(handle) != std::string::npos;
  })) << Torchx({"list", "-s", "kubernetes", "-cfg", "namespace=team"}).out;
  for (const auto& args : std::vector<std::vector<std::string>>{{"list", "-s", "kubernetes", "-cfg", "namespace=team"},
                                                                 {"list", "-s", "kubernetes"}}) {  // the context's
    auto list = Torchx(args);
    EXPECT_EQ(list.exit_code, 0) << list.err;
    EXPECT_THAT(list.out, HasSubstr(mine));
    EXPECT_THAT(list.out, HasSubstr(handle));
    EXPECT_THAT(list.out, Not(HasSubstr("kubernetes://torchx/other:")));
  }
  auto other = Torchx({"list", "-s", "kubernetes", "-cfg", "namespace=other"});
  EXPECT_THAT(other.out, HasSubstr("kubernetes://torchx/other:echo-"));
  EXPECT_THAT(other.out, Not(HasSubstr(handle)));
  EXPECT_EQ(Torchx({"list", "-cfg", "namespace=team"}).exit_code, 2) << "-cfg needs -s";

  // Theirs is an app like ours: described, its state followed, its log read when asked, cancelled.
  std::string text = Torchx({"describe", handle}).out;
  EXPECT_THAT(text, HasSubstr("trainer"));
  EXPECT_THAT(text, HasSubstr("pytorch/pytorch:2"));
  JobPhase("theirs-x1", "Running");
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(handle)["roles"][0]["replicas"][0]["state_name"] == "RUNNING"; }));
  PodLog("theirs-x1-trainer-0-0", {"their line"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(LogReads("theirs-x1-trainer-0-0").empty()) << "nobody asked for their log yet";
  auto their_log = Torchx({"log", handle});
  EXPECT_EQ(their_log.out, "trainer/0 their line\n") << their_log.err;
  auto cancel = Torchx({"cancel", handle});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  json state = api_.State();
  ASSERT_EQ(state["commands"].size(), 1u);
  EXPECT_EQ(state["commands"][0]["target"]["name"], "theirs-x1");
}

TEST_F(KubernetesE2eTest, NoClusterConfigurationIsAClearError) {
  kubeconfig_ = (dir_ / "missing-kubeconfig").string();
  auto run = Torchx({"run", "-s", "kubernetes", "-cfg", "queue=default", "utils.echo"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("no Kubernetes configuration"));
  EXPECT_THAT(run.err, HasSubstr("KUBECONFIG"));
}

// TLS is verified by default: the cluster's CA from the kubeconfig is trusted,
// nothing else is, unless the kubeconfig says insecure-skip-tls-verify.
TEST_F(KubernetesE2eTest, TlsIsVerifiedAgainstTheKubeconfigsCertificateAuthority) {
  if (RunShell("command -v openssl >/dev/null", (dir_ / "which.err").string()).exit_code != 0) {
    GTEST_SKIP() << "openssl is not installed: no certificate to test TLS with";
  }
  std::string cert = (dir_ / "cert.pem").string(), key = (dir_ / "key.pem").string();
  auto made = RunShell("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext "
                       "subjectAltName=IP:127.0.0.1 -keyout " + Quote(key) + " -out " + Quote(cert) + " 2>/dev/null",
                       (dir_ / "openssl.err").string());
  ASSERT_EQ(made.exit_code, 0);
  FakeApiServer tls;
  ASSERT_TRUE(tls.Start(dir_ / "work", "", kToken, cert, key));
  std::string b64 = RunShell("base64 -w0 " + Quote(cert), (dir_ / "b64.err").string()).out;
  ASSERT_FALSE(b64.empty());

  auto run = [&](const std::string& cluster_extra) {
    kubeconfig_ = tls.WriteKubeconfig(dir_ / ("kc" + std::to_string(calls_)), "team", kToken, cluster_extra);
    Torchx({"daemon", "stop"});  // the daemon reads its kubeconfig once
    return Torchx({"run", "-s", "kubernetes", "-cfg", "queue=default,namespace=team", "utils.echo"});
  };
  auto untrusted = run("");
  EXPECT_EQ(untrusted.exit_code, 1);
  EXPECT_THAT(untrusted.err, HasSubstr("certificate"));
  auto trusted = run("    certificate-authority-data: " + b64 + "\n");
  EXPECT_EQ(trusted.exit_code, 0) << trusted.err;
  EXPECT_THAT(trusted.out, HasSubstr("kubernetes://torchx/team:echo-"));
  auto insecure = run("    insecure-skip-tls-verify: true\n");
  EXPECT_EQ(insecure.exit_code, 0) << insecure.err;
  EXPECT_EQ(tls.State()["jobs"].size(), 2u);
}

// The fake must answer like the recorded v1.24 apiserver: the same verdict
// for each golden request.
// The page's event stream on ui.sock, held open: the connection, or -1.
int OpenEventStream(const fs::path& socket) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  std::string get = "GET /api/events HTTP/1.1\r\nHost: localhost\r\n\r\n";
  if (::write(fd, get.data(), get.size()) != static_cast<ssize_t>(get.size())) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof(buf));  // the answer's head: the stream is open
  if (n <= 0 || std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 200", 0) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd` within `seconds` (reading what it still sends).
bool ClosedWithin(int fd, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  timeval tv{0, 100000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return true;
  }
  return false;
}

TEST_F(KubernetesE2eTest, AStopEndsEveryAttachedStreamAtOnceAndFollowersResumeOnTheNextDaemon) {
  std::string h = Submit(1);
  std::string job = JobName(h);
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitForState(h, "RUNNING"));
  PodLog(job + "-echo-0-0", {"before"});
  ASSERT_TRUE(WaitForLog(h, "before"));
  pid_t follower = Background({"log", "--tail", h}, dir_ / "follow.out", dir_ / "follow.err");
  pid_t waiter = Background({"run", "--wait", "-s", "kubernetes", "-cfg", "queue=default,namespace=team", "utils.echo"},
                            dir_ / "wait.out", dir_ / "wait.err");
  int page = OpenEventStream(dir_ / "xdg/torchxd/ui.sock");
  ASSERT_GE(page, 0) << "the page's event stream did not open";
  ASSERT_TRUE(WaitUntil([&] { return Read(dir_ / "follow.out") == "echo/0 before\n"; })) << Read(dir_ / "follow.err");
  ASSERT_TRUE(WaitUntil([&] { return !Read(dir_ / "wait.out").empty(); })) << Read(dir_ / "wait.err");
  std::string waited = Read(dir_ / "wait.out").substr(0, Read(dir_ / "wait.out").find('\n'));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its `wait` is in flight

  pid_t daemon = DaemonPid();
  ASSERT_GT(daemon, 0);
  ASSERT_EQ(::kill(daemon, SIGTERM), 0);
  // Nothing attached holds it (about 0.6 s: the Jobs run on without it).
  EXPECT_TRUE(WaitUntil([&] { return ::kill(daemon, 0) != 0; }, 5)) << "torchxd still runs 5 s after SIGTERM";
  EXPECT_TRUE(ClosedWithin(page, 1)) << "the page's event stream was not ended";
  ::close(page);
  EXPECT_TRUE(WaitUntil([&] { return Read(dir_ / "follow.err").find("torchxd stopped (Terminated)") != std::string::npos; }, 5))
      << Read(dir_ / "follow.err");
  EXPECT_TRUE(WaitUntil([&] { return Read(dir_ / "wait.err").find("torchxd stopped (Terminated)") != std::string::npos; }, 5))
      << Read(dir_ / "wait.err");

  // The next daemon (the clients start it): both resume, nothing is repeated.
  ASSERT_TRUE(WaitForState(h, "RUNNING", 20));
  PodLog(job + "-echo-0-0", {"after"});
  PodPhase(job + "-echo-0-0", "Succeeded");
  JobPhase(job, "Completed");
  JobPhase(JobName(waited), "Completed");
  EXPECT_EQ(torchxd::testing::ReapWithin(follower, 20), 0) << Read(dir_ / "follow.err");
  EXPECT_EQ(Read(dir_ / "follow.out"), "echo/0 before\necho/0 after\n");
  EXPECT_THAT(Read(dir_ / "follow.err"), HasSubstr("reconnected to torchxd"));
  EXPECT_EQ(torchxd::testing::ReapWithin(waiter, 20), 0) << Read(dir_ / "wait.err");
}

TEST_F(KubernetesE2eTest, AMissingNamespaceIsRefusedNamingTheOption) {
  auto run = Torchx({"run", "-s", "kubernetes", "-cfg", "queue=default,namespace=nons", "utils.echo"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("namespace: \"nons\" does not exist on the cluster"));
  EXPECT_THAT(run.err, Not(HasSubstr("404")));
  // Without the checks the Job's own create says the same.
  auto unchecked = Torchx({"run", "-s", "kubernetes", "-cfg", "queue=default,namespace=nons,validate_spec=False", "utils.echo"});
  EXPECT_EQ(unchecked.exit_code, 2) << unchecked.err;
  EXPECT_THAT(unchecked.err, HasSubstr("namespace: \"nons\" does not exist on the cluster"));
  EXPECT_EQ(Torchx({"list", "-s", "kubernetes"}).out.find("nons"), std::string::npos);
}

TEST_F(KubernetesE2eTest, AReplicaScaledAwayBeforeItHadAPodEndsScaledDown) {
  json app = {{"name", "el"},
              {"roles",
               {{{"name", "worker"}, {"image", "busybox"}, {"entrypoint", "sleep"}, {"args", {"600"}},
                 {"num_replicas", 3}, {"min_replicas", 1}}}}};
  std::ofstream(dir_ / "el.json") << app.dump();
  auto run = Torchx({"run", "-s", "kubernetes", "-cfg", "queue=default,namespace=team", (dir_ / "el.json").string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string h = Handle(run);
  std::string job = JobName(h);
  // Scaled to 1 before Volcano made any pod.
  auto down = Torchx({"scale", h, "worker=1"});
  ASSERT_EQ(down.exit_code, 0) << down.err;
  json st = StatusJson(h);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(st["roles"][0]["replicas"][r]["state_name"], "CANCELLED") << st.dump();
    EXPECT_EQ(st["roles"][0]["replicas"][r]["error_message"], "scaled down: role worker runs 1 of 3 replicas");
  }
  // The scale and each replica it ended are on the timeline.
  std::string events = Torchx({"events", h}).out;
  EXPECT_THAT(events, HasSubstr("role worker scaled to 1 replica\n"));
  EXPECT_THAT(events, HasSubstr("worker/2 cancelled: scaled down: role worker runs 1 of 3 replicas"));
  JobPhase(job, "Running");
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(h)["roles"][0]["replicas"][0]["state_name"] == "RUNNING"; }));
  PodPhase(job + "-worker-0-0", "Succeeded");
  JobPhase(job, "Completed");
  ASSERT_TRUE(WaitForState(h, "SUCCEEDED"));
  st = StatusJson(h);
  EXPECT_EQ(st["roles"][0]["replicas"][0]["state_name"], "SUCCEEDED");
  for (int r = 1; r < 3; ++r) EXPECT_EQ(st["roles"][0]["replicas"][r]["state_name"], "CANCELLED") << st.dump();
}

TEST_F(KubernetesE2eTest, FoundJobsStayInTheCacheBoundsAndKeepTheirOwnLayout) {
  StartOwnDaemon("--cache-size 3");
  std::string mine = Submit(1);
  JobPhase(JobName(mine), "Completed");
  ASSERT_TRUE(WaitForState(mine, "SUCCEEDED"));
  // Six torchx-labelled Jobs someone else submitted, five finished; not in torchx's layout (a task of 3 pods).
  for (int i = 0; i < 6; ++i) {
    json theirs = {{"apiVersion", "batch.volcano.sh/v1alpha1"}, {"kind", "Job"},
                   {"metadata", {{"name", "old-" + std::to_string(i)},
                                 {"labels", {{"app.kubernetes.io/managed-by", "torchx.pytorch.org"}}}}},
                   {"spec", {{"queue", "default"},
                             {"tasks", {{{"name", "trainer"}, {"replicas", 3},
                                         {"template", {{"metadata", {{"labels", {{"app.kubernetes.io/managed-by",
                                                                                  "torchx.pytorch.org"}}}}},
                                                       {"spec", {{"restartPolicy", "Never"},
                                                                 {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}}}}}}}},
                   {"status", {{"state", {{"phase", "Completed"}}}}}};
    if (i == 5) theirs.erase("status");
    ASSERT_EQ(api_.Post("/fake/jobs/team", theirs), 201);
  }
  JobPhase("old-5", "Running");
  // Mine stays; of theirs the running one and the newest finished fit in 3.
  ASSERT_TRUE(WaitUntil([&] { return Torchx({"list", "-s", "kubernetes"}).out.find("team:old-5") != std::string::npos; }));
  EXPECT_THAT(Torchx({"list", "-s", "kubernetes"}).out, HasSubstr(mine));
  ASSERT_TRUE(WaitUntil([&] {
    std::string out = Torchx({"list", "-s", "kubernetes"}).out;
    int theirs = 0;
    for (int i = 0; i < 5; ++i) theirs += out.find("team:old-" + std::to_string(i) + " ") != std::string::npos;
    return theirs == 1;
  })) << Torchx({"list", "-s", "kubernetes"}).out;
  // A relist does not bring the evicted back.
  size_t before = RequestCount();
  ASSERT_EQ(api_.Post("/fake/watches/expire", {{"how", "http"}}), 200);
  ASSERT_TRUE(WaitUntil([&] { return RelistedJobsSince(before); })) << "no relist after the watch expired";
  std::string out = Torchx({"list", "-s", "kubernetes"}).out;
  int theirs = 0;
  for (int i = 0; i < 5; ++i) theirs += out.find("team:old-" + std::to_string(i) + " ") != std::string::npos;
  EXPECT_EQ(theirs, 1) << out;
  // The running one: one role `trainer` of 3 replicas, each its own pod.
  std::string handle = "kubernetes://torchx/team:old-5";
  json st = StatusJson(handle);
  ASSERT_EQ(st["roles"].size(), 1u) << st.dump();
  EXPECT_EQ(st["roles"][0]["role"], "trainer");
  ASSERT_EQ(st["roles"][0]["replicas"].size(), 3u) << st.dump();
  EXPECT_THAT(Torchx({"list", "-s", "kubernetes"}).out, HasSubstr(mine));
  ASSERT_TRUE(WaitUntil([&] { return StatusJson(handle)["roles"][0]["replicas"][2]["state_name"] == "RUNNING"; }))
      << StatusJson(handle).dump();
  PodLog("old-5-trainer-2", {"third pod"});
  EXPECT_EQ(Torchx({"log", handle + "/trainer/2"}).out, "trainer/2 third pod\n");
}

TEST(FakeApiServerTest, GivesTheGoldenVerdicts) {
  std::string schemas = torchxd::testing::SharedSchemas();
  if (schemas.empty()) GTEST_SKIP() << "../shared/k8s-schemas is absent: the golden verdicts cannot be checked";
  fs::path dir = fs::temp_directory_path() / ("txg_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  FakeApiServer api;
  // The golden answers are those of an apiserver with Volcano's CRDs and no Volcano webhook.
  ASSERT_TRUE(api.Start(dir, schemas, "", "", "", /*webhook=*/false));
  fs::path golden = fs::path(schemas) / "golden-apiserver-v1.24";
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(golden)) {
    std::string file = entry.path().filename().string();
    if (file.rfind("req-", 0) != 0) continue;
    SCOPED_TRACE(file);
    std::ifstream req_in(entry.path()), resp_in(golden / ("resp-" + file.substr(4)));
    json req = json::parse(req_in), want = json::parse(resp_in);
    std::string out;
    long code = api.Request("POST", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs?dryRun=All",
                            req.dump(), &out);
    json got = json::parse(out);
    if (want.value("kind", "") == "Status") {
      EXPECT_EQ(code, want["code"].get<long>());
      EXPECT_EQ(got["reason"], want["reason"]);
      EXPECT_EQ(got["details"]["causes"][0]["field"], want["details"]["causes"][0]["field"]);
    } else {
      EXPECT_EQ(code, 201);
      EXPECT_EQ(got["spec"].contains("retryLimit"), want["spec"].contains("retryLimit"));  // pruned
    }
    ++cases;
  }
  EXPECT_EQ(cases, 12);
  // With Volcano's webhook, what the CRD lets through but Volcano refuses is refused (400).
  FakeApiServer with_webhook;
  fs::create_directories(dir / "w");
  ASSERT_TRUE(with_webhook.Start(dir / "w", schemas, ""));
  for (const char* file : {"req-dup-task-names.json", "req-minavail-gt-replicas.json"}) {
    std::ifstream in(golden / file);
    std::string out;
    EXPECT_EQ(with_webhook.Request("POST", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs?dryRun=All",
                                   json::parse(in).dump(), &out),
              400)
        << file;
    EXPECT_THAT(json::parse(out, nullptr, false).value("message", ""),
                HasSubstr("admission webhook \"validatejob.volcano.sh\" denied the request")) << file;
  }
  fs::remove_all(dir);
}

// TorchX's own `schedule` puts its labels on the pod templates alone (the Job's
// metadata is just its name): such a Job was absent from `list` and `status`
// said it did not exist. It is TorchX's, and found; a Volcano Job of no torchx
// label anywhere is not.
TEST_F(KubernetesE2eTest, AJobTorchxItselfSubmittedIsFoundAndAnotherVolcanoJobIsNot) {
  json template_labels = {{"app.kubernetes.io/managed-by", "torchx.pytorch.org"},
                          {"app.kubernetes.io/name", "trainer"}};
  auto job = [&](const std::string& name, bool torchx) {
    json tmpl = {{"spec", {{"restartPolicy", "Never"}, {"containers", {{{"name", "trainer-0"}, {"image", "busybox"}}}}}}};
    if (torchx) tmpl["metadata"] = {{"labels", template_labels}};
    json task = {{"name", "trainer-0"}, {"replicas", 1}, {"template", tmpl}};
    json out = json::object();
    out["apiVersion"] = "batch.volcano.sh/v1alpha1";
    out["kind"] = "Job";
    out["metadata"] = {{"name", name}};
    out["spec"] = {{"queue", "default"}, {"tasks", json::array({task})}};
    out["status"] = {{"state", {{"phase", "Running"}}}};
    return out;
  };
  ASSERT_EQ(api_.Post("/fake/jobs/team", job("fromtorchx", true)), 201);
  ASSERT_EQ(api_.Post("/fake/jobs/team", job("notorchx", false)), 201);
  ASSERT_TRUE(WaitUntil([&] {
    return Torchx({"list", "-s", "kubernetes"}).out.find("team:fromtorchx") != std::string::npos;
  })) << Torchx({"list", "-s", "kubernetes"}).out;
  EXPECT_THAT(Torchx({"list", "-s", "kubernetes"}).out, ::testing::Not(HasSubstr("notorchx")));
  json st = StatusJson("kubernetes://torchx/team:fromtorchx");
  ASSERT_TRUE(st.is_object()) << Torchx({"status", "kubernetes://torchx/team:fromtorchx"}).err;
  EXPECT_EQ(st["state"], "RUNNING") << st.dump();
}

}  // namespace
