#include "k8sbridge/volcano_job.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/app_json.h"

namespace torchxd::k8sbridge {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

// TorchX's test_submit_dryrun fixture (torchx.md §4.2).
core::AppDef TorchxFixture() {
  core::Role role;
  role.name = "trainer_foo";
  role.image = "pytorch/torchx:latest";
  role.entrypoint = "main";
  role.args = {"--output-path", "${img_root}", "--app-id", "${app_id}", "--rank0-env", "${rank0_env}"};
  role.env = {{"FOO", "bar"}, {"FOO_FIELD_PATH", "[FIELD_PATH]bar"}};
  role.resource.cpu = 2;
  role.resource.mem_mb = 3000;
  role.resource.gpu = 4;
  role.port_map = {{"foo", 1234}};
  role.max_retries = 3;
  role.mounts = {core::BindMount{"/src", "/dst", true}};
  return core::AppDef{"test", {role}, {}};
}

KubernetesOptions Queue() {
  KubernetesOptions o;
  o.queue = "testqueue";
  return o;
}

// TorchX's scheduler fixture, plus the TORCHX_JOB_ID its Runner adds to every role
// (with the namespace, so the value is a handle `torchx status` takes).
TEST(VolcanoJobTest, MatchesTorchxDryrunFixture) {
  auto job = AppDefToVolcanoJob(TorchxFixture(), "app-name-42", Queue());
  ASSERT_TRUE(job.has_value()) << job.error().message;
  json want = json::parse(R"({
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
    "metadata": {"name": "app-name-42",
                 "labels": {"app.kubernetes.io/managed-by": "torchx.pytorch.org", "torchx.pytorch.org/app-name": "test"}},
    "spec": {
      "maxRetry": 3,
      "plugins": {"env": [], "svc": ["--publish-not-ready-addresses"]},
      "queue": "testqueue",
      "schedulerName": "volcano",
      "tasks": [{
        "name": "trainerfoo-0", "replicas": 1, "maxRetry": 3,
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}, {"event": "PodFailed", "action": "RestartJob"}],
        "template": {
          "metadata": {
            "annotations": {"sidecar.istio.io/inject": "false"},
            "labels": {"app.kubernetes.io/instance": "app-name-42", "app.kubernetes.io/managed-by": "torchx.pytorch.org",
                       "app.kubernetes.io/name": "test", "torchx.pytorch.org/app-name": "test",
                       "torchx.pytorch.org/replica-id": "0", "torchx.pytorch.org/role-index": "0",
                       "torchx.pytorch.org/role-name": "trainer_foo", "torchx.pytorch.org/version": "0.8.0dev0"}},
          "spec": {
            "containers": [{
              "name": "trainerfoo-0", "image": "pytorch/torchx:latest",
              "command": ["main", "--output-path", "", "--app-id", "app-name-42", "--rank0-env", "TORCHX_RANK0_HOST"],
              "env": [{"name": "FOO", "value": "bar"},
                      {"name": "FOO_FIELD_PATH", "valueFrom": {"fieldRef": {"fieldPath": "bar"}}},
                      {"name": "TORCHX_JOB_ID", "value": "kubernetes://torchx/default:app-name-42"},
                      {"name": "TORCHX_RANK0_HOST", "value": "localhost"},
                      {"name": "TORCHX_IMAGE", "value": "pytorch/torchx:latest"}],
              "ports": [{"containerPort": 1234, "name": "foo"}],
              "resources": {"limits": {"cpu": "2000m", "memory": "3000M", "nvidia.com/gpu": "4"},
                            "requests": {"cpu": "1900m", "memory": "1976M", "nvidia.com/gpu": "4"}},
              "securityContext": {},
              "volumeMounts": [{"mountPath": "/dev/shm", "name": "dshm"},
                               {"mountPath": "/dst", "name": "mount-0", "readOnly": true}]}],
            "nodeSelector": {},
            "restartPolicy": "Never",
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}},
                        {"name": "mount-0", "hostPath": {"path": "/src"}}]}}}]}})");
  EXPECT_EQ(job->body, want) << job->body.dump(2);
  EXPECT_EQ(job->name, "app-name-42");
}

TEST(VolcanoJobTest, RetryPoliciesMapPerPolicy) {
  core::AppDef app = TorchxFixture();
  app.roles[0].retry_policy = core::RetryPolicy::kReplica;
  auto replica = AppDefToVolcanoJob(app, "a-1", Queue());
  EXPECT_EQ(replica->body["spec"]["tasks"][0]["policies"][1]["action"], "RestartTask");
  EXPECT_TRUE(replica->warnings.empty());
  app.roles[0].retry_policy = core::RetryPolicy::kRole;
  auto role = AppDefToVolcanoJob(app, "a-1", Queue());
  EXPECT_EQ(role->body["spec"]["tasks"][0]["policies"][1]["action"], "RestartJob");
  ASSERT_EQ(role->warnings.size(), 1u);
  EXPECT_THAT(role->warnings[0], HasSubstr("retry_policy ROLE restarts the whole job"));
  app.roles[0].max_retries = 0;
  auto none = AppDefToVolcanoJob(app, "a-1", Queue());
  EXPECT_FALSE(none->body["spec"]["tasks"][0].contains("policies"));
  EXPECT_FALSE(none->body["spec"]["tasks"][0].contains("maxRetry"));
}

TEST(VolcanoJobTest, ReplicasGetTheirOwnTasksMacrosAndRankZeroHost) {
  core::AppDef app = TorchxFixture();
  app.roles[0].num_replicas = 3;
  app.roles[0].min_replicas = 2;
  app.roles[0].args = {"--rank", "${replica_id}", "--host", "$${rank0_env}"};
  auto job = AppDefToVolcanoJob(app, "app-name-42", Queue());
  const json& tasks = job->body["spec"]["tasks"];
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[2]["name"], "trainerfoo-2");
  EXPECT_EQ(tasks[0]["minAvailable"], 1);
  EXPECT_EQ(tasks[1]["minAvailable"], 1);
  EXPECT_EQ(tasks[2]["minAvailable"], 0);
  EXPECT_EQ(job->body["spec"]["minAvailable"], 2) << "the job's gang: the tasks' minAvailable summed";
  const json& c1 = tasks[1]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c1["command"], json({"main", "--rank", "1", "--host", "${rank0_env}"}));
  EXPECT_EQ(c1["env"].size(), 4u);  // no TORCHX_RANK0_HOST off rank 0
  app.roles[0].args = {"${rank0_env}"};
  auto again = AppDefToVolcanoJob(app, "app-name-42", Queue());
  EXPECT_EQ(again->body["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["command"][1], "VC_TRAINERFOO_0_HOSTS");
  EXPECT_EQ(tasks[1]["template"]["metadata"]["labels"]["torchx.pytorch.org/replica-id"], "1");

  // rdzv_host: every replica rendezvous at the given address instead of the service DNS name.
  KubernetesOptions o = Queue();
  o.rdzv_host = "192.168.100.10";
  auto rdma = AppDefToVolcanoJob(app, "app-name-42", o);
  for (int i : {0, 2}) {
    const json& c = rdma->body["spec"]["tasks"][i]["template"]["spec"]["containers"][0];
    EXPECT_EQ(c["command"][1], "TORCHX_RANK0_HOST");
    EXPECT_EQ(c["env"].back(), json({{"name", "TORCHX_IMAGE"}, {"value", "pytorch/torchx:latest"}}));
    EXPECT_EQ(c["env"][c["env"].size() - 2], json({{"name", "TORCHX_RANK0_HOST"}, {"value", "192.168.100.10"}}));
  }
}

TEST(VolcanoJobTest, DevicesCapabilitiesAndOptions) {
  core::AppDef app = TorchxFixture();
  app.roles[0].resource.devices = {{"rdma/rdma_shared_device_a", 1}};
  app.roles[0].resource.capabilities = {{"node.kubernetes.io/instance-type", "p4d.24xlarge"},
                                        {"security.capabilities.add", {"IPC_LOCK"}},
                                        {"kubernetes.pod.annotations", {{"k8s.v1.cni.cncf.io/networks", "rdma-net"}}}};
  app.roles[0].mounts.push_back(core::DeviceMount{"/dev/infiniband", "/dev/infiniband", "rwm"});
  KubernetesOptions o = Queue();
  o.node_selector = {{"pool", "gpu"}};
  o.tolerations = {"nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute"};
  o.service_account = "trainer";
  o.priority_class = "high";
  o.scheduler_name = "default-scheduler";
  auto job = AppDefToVolcanoJob(app, "a-1", o);
  ASSERT_TRUE(job.has_value()) << job.error().message;
  const json& pod = job->body["spec"]["tasks"][0]["template"];
  const json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["resources"]["limits"]["rdma/rdma_shared_device_a"], "1");
  EXPECT_EQ(c["resources"]["requests"]["rdma/rdma_shared_device_a"], "1");  // TorchX sets limits only
  // A host device makes the container privileged, as TorchX's does (the device is unusable otherwise).
  EXPECT_EQ(c["securityContext"], json({{"capabilities", {{"add", {"IPC_LOCK"}}}}, {"privileged", true}}));
  EXPECT_EQ(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"], "rdma-net");
  EXPECT_EQ(pod["spec"]["nodeSelector"], json({{"node.kubernetes.io/instance-type", "p4d.24xlarge"}, {"pool", "gpu"}}));
  EXPECT_EQ(pod["spec"]["tolerations"][0], json({{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}));
  EXPECT_EQ(pod["spec"]["tolerations"][1]["value"], "ml");
  EXPECT_EQ(pod["spec"]["serviceAccountName"], "trainer");
  EXPECT_EQ(job->body["spec"]["priorityClassName"], "high");
  EXPECT_EQ(job->body["spec"]["schedulerName"], "default-scheduler");
  o.tolerations = {"nope"};
  EXPECT_FALSE(AppDefToVolcanoJob(app, "a-1", o).has_value());
}

TEST(VolcanoJobTest, EfaDeviceCountOverridesTheRolesAsTorchxDoes) {
  core::AppDef app = TorchxFixture();
  app.roles[0].resource.devices = {{"vpc.amazonaws.com/efa", 4}, {"rdma/hca", 1}};
  auto efa = [&](std::optional<int64_t> count) {
    core::Cfg cfg = {{"queue", core::CfgValue{std::string("q")}}};
    if (count) cfg["efa_device_count"] = core::CfgValue{*count};
    auto job = AppDefToVolcanoJob(app, "a-1", KubernetesOptionsFromCfg(cfg));
    EXPECT_TRUE(job.has_value());
    return job->body["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"];
  };
  EXPECT_EQ(efa(std::nullopt)["limits"]["vpc.amazonaws.com/efa"], "4") << "unset: the role's";
  json none = efa(0);
  EXPECT_FALSE(none["limits"].contains("vpc.amazonaws.com/efa"));
  EXPECT_FALSE(none["requests"].contains("vpc.amazonaws.com/efa"));
  EXPECT_EQ(none["limits"]["rdma/hca"], "1") << "other devices stay";
  json two = efa(2);
  EXPECT_EQ(two["limits"]["vpc.amazonaws.com/efa"], "2");
  EXPECT_EQ(two["requests"]["vpc.amazonaws.com/efa"], "2");
}

TEST(VolcanoJobTest, RejectsWhatTheApiServerWould) {
  core::AppDef app = TorchxFixture();
  app.roles[0].name = std::string(60, 'r');
  auto long_name = AppDefToVolcanoJob(app, "app-name-42", Queue());
  ASSERT_FALSE(long_name.has_value());
  EXPECT_THAT(long_name.error().message, HasSubstr("exceeds 63 character limit. Shorten app.name or role names"));
  core::AppDef twins = TorchxFixture();
  twins.roles.push_back(twins.roles[0]);
  twins.roles[1].name = "trainerfoo";  // normalizes like trainer_foo
  auto dup = AppDefToVolcanoJob(twins, "a-1", Queue());
  ASSERT_FALSE(dup.has_value());
  EXPECT_THAT(dup.error().message, HasSubstr("replicas trainer_foo/0 and trainerfoo/0 both become Volcano task `trainerfoo-0`"));
  KubernetesOptions no_queue;
  EXPECT_THAT(AppDefToVolcanoJob(TorchxFixture(), "a-1", no_queue).error().message, HasSubstr("Required run option: queue"));
}

TEST(VolcanoJobTest, LabelValuesAreCleanedLikeTorchx) {
  EXPECT_EQ(CleanLabelValue("foo+bar", "x"), "foo.bar");
  EXPECT_EQ(CleanLabelValue("a/b", "x"), "a.b");
  EXPECT_EQ(CleanLabelValue("--x--", "y"), "x");
  EXPECT_EQ(CleanLabelValue(std::string(80, 'a'), "y").size(), 63u);
  EXPECT_EQ(CleanLabelValue("++", "fallback"), "fallback");
}

// master <- worker (elastic, 2 of 3) <- eval: dependsOn names every task of the
// roles waited for; the gang counts only tasks that wait for nothing, since the
// others are created once those run.
core::AppDef DagApp() {
  core::AppDef app = TorchxFixture();
  app.roles[0].name = "master";
  core::Role worker = app.roles[0];
  worker.name = "worker";
  worker.num_replicas = 3;
  worker.min_replicas = 2;
  worker.metadata = {{"torchxd/depends_on", {"master"}}};
  core::Role eval = app.roles[0];
  eval.name = "eval";
  eval.metadata = {{"torchxd/depends_on", {"worker", "master"}}, {"torchxd/depends_on_state", "RUNNING"}};
  app.roles[0].num_replicas = 2;
  app.roles.push_back(worker);
  app.roles.push_back(eval);
  return app;
}

TEST(VolcanoJobTest, DependenciesBecomeDependsOnAndTheGangLeavesOutWaitingTasks) {
  auto job = AppDefToVolcanoJob(DagApp(), "dag-1", Queue());
  ASSERT_TRUE(job) << job.error().message;
  const json& tasks = job->body["spec"]["tasks"];
  ASSERT_EQ(tasks.size(), 6u);
  EXPECT_FALSE(tasks[0].contains("dependsOn"));
  EXPECT_FALSE(tasks[1].contains("dependsOn"));
  for (int i : {2, 3, 4}) {
    EXPECT_EQ(tasks[i]["dependsOn"], json({{"name", {"master-0", "master-1"}}, {"iteration", "all"}}));
  }
  EXPECT_EQ(tasks[5]["dependsOn"],
            json({{"name", {"worker-0", "worker-1", "worker-2", "master-0", "master-1"}}, {"iteration", "all"}}));
  EXPECT_EQ(tasks[2]["minAvailable"], 1);
  EXPECT_EQ(tasks[4]["minAvailable"], 0);
  EXPECT_EQ(job->body["spec"]["minAvailable"], 2) << "only master's two tasks form the gang";

  core::AppDef succeeded = DagApp();
  succeeded.roles[2].metadata["torchxd/depends_on_state"] = "SUCCEEDED";
  auto refused = AppDefToVolcanoJob(succeeded, "dag-1", Queue());
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message, HasSubstr("roles[2].metadata.torchxd/depends_on_state: SUCCEEDED cannot be "
                                                 "expressed on Volcano"));
  core::AppDef cycle = DagApp();
  cycle.roles[0].metadata = {{"torchxd/depends_on", {"eval"}}};
  auto cyclic = AppDefToVolcanoJob(cycle, "dag-1", Queue());
  ASSERT_FALSE(cyclic);
  EXPECT_THAT(cyclic.error().message, HasSubstr("cycle (master -> eval -> worker -> master)"));
}

// Generated Jobs against the real Volcano CRD (../shared/k8s-schemas).
TEST(VolcanoJobSchemaTest, GeneratedJobsValidateAgainstTheVolcanoCrd) {
  fs::path shared = fs::path(TORCHXD_SOURCE_DIR) / ".." / "shared" / "k8s-schemas";
  if (!fs::exists(shared / "volcano/batch.volcano.sh_jobs.yaml")) {
    GTEST_SKIP() << "../shared/k8s-schemas is absent (a user's clone has no ../shared)";
  }
  if (std::system("/usr/bin/python3 -c 'import jsonschema, yaml' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-jsonschema / python3-yaml are not installed for /usr/bin/python3";
  }
  fs::path dir = fs::temp_directory_path() / ("vj_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  core::AppDef rich = TorchxFixture();
  rich.roles[0].num_replicas = 2;
  rich.roles[0].min_replicas = 1;
  rich.roles[0].retry_policy = core::RetryPolicy::kReplica;
  rich.roles[0].resource.devices = {{"rdma/rdma_shared_device_a", 1}};
  rich.roles[0].mounts.push_back(core::VolumeMount{"ckpt", "/ckpt", false});
  rich.roles[0].mounts.push_back(core::DeviceMount{"/dev/fuse", "/dev/fuse", "rw"});
  core::Role ps = TorchxFixture().roles[0];
  ps.name = "ps";
  rich.roles.push_back(ps);
  KubernetesOptions o = Queue();
  o.tolerations = {"nvidia.com/gpu:NoSchedule"};
  o.service_account = "sa";
  std::vector<std::string> files;
  for (const auto& [name, app] : std::vector<std::pair<std::string, core::AppDef>>{
           {"fixture", TorchxFixture()}, {"rich", rich}, {"dag", DagApp()}}) {
    auto job = AppDefToVolcanoJob(app, "app-name-42", o);
    ASSERT_TRUE(job.has_value());
    files.push_back((dir / (name + ".json")).string());
    std::ofstream(files.back()) << job->body.dump();
  }
  // The validator itself must tell good from bad: the apiserver's golden verdicts.
  fs::path golden = shared / "golden-apiserver-v1.24";
  std::string cmd = "/usr/bin/python3 " + std::string(VALIDATE_CRD) + " " + (shared / "volcano/batch.volcano.sh_jobs.yaml").string();
  for (const auto& f : files) cmd += " " + f;
  for (const char* g : {"req-good.json", "req-unknown-field.json", "req-task-name-pattern.json", "req-quantity.json"}) {
    cmd += " " + (golden / g).string();
  }
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  ::pclose(p);
  fs::remove_all(dir);
  EXPECT_THAT(out, HasSubstr("VALID " + files[0] + "\n"));
  EXPECT_THAT(out, HasSubstr("VALID " + files[1] + "\n"));
  EXPECT_THAT(out, HasSubstr("VALID " + files[2] + "\n"));
  EXPECT_THAT(out, HasSubstr("VALID " + (golden / "req-good.json").string()));
  EXPECT_THAT(out, HasSubstr("INVALID " + (golden / "req-unknown-field.json").string()));
  EXPECT_THAT(out, HasSubstr("INVALID " + (golden / "req-task-name-pattern.json").string()));
  EXPECT_THAT(out, HasSubstr("INVALID " + (golden / "req-quantity.json").string()));
}

}  // namespace
}  // namespace torchxd::k8sbridge
