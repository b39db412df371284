// local_docker's container mapping, as TorchX's docker scheduler does it.
#include "core/docker_container.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

using nlohmann::json;

AppDef TwoRoles() {
  Role trainer;
  trainer.name = "trainer";
  trainer.image = "pytorch/torchx:latest";
  trainer.entrypoint = "python";
  trainer.args = {"-m", "train", "--rank", "${replica_id}", "--master", "$${rank0_env}", "--id", "${app_id}"};
  trainer.env = {{"ROLE_ONLY", "r"}, {"SHARED", "from-role"}};
  trainer.num_replicas = 2;
  trainer.resource.cpu = 2;
  trainer.resource.gpu = 1;
  trainer.resource.mem_mb = 1024;
  trainer.resource.devices = {{"vpc.amazonaws.com/efa", 2}, {"example.com/fpga", 1}};
  trainer.mounts = {BindMount{"/data", "/mnt/data", true}, VolumeMount{"cache", "/cache", false},
                    DeviceMount{"/dev/fuse", "/dev/fuse", "rw"}};
  Role ps;
  ps.name = "ps";
  ps.image = "ps:1";
  ps.entrypoint = "serve";
  return AppDef{"app", {trainer, ps}, {}};
}

TEST(DockerContainerTest, NamesAreTorchxs) {
  EXPECT_EQ(ContainerName("train-abc", "trainer", 1), "train-abc-trainer-1");
  std::string long_id(40, 'x');
  EXPECT_EQ(ContainerName(long_id, std::string(40, 'r'), 0), std::string(30, 'x') + "-" + std::string(30, 'r') + "-0");
  EXPECT_EQ(ContainerName("--a", "b", 0), "a-b-0");  // leading non-alphanumerics dropped
}

TEST(DockerContainerTest, MapsEachReplicaLikeTorchx) {
  DockerAppContext ctx;
  ctx.app_id = "app-x1";
  ctx.app_log_dir = "/logs/torchx/app-x1";
  ctx.copy_env = {"FOO_*"};
  ctx.env = {{"SHARED", "from-cfg"}, {"CFG_ONLY", "c"}};
  ctx.client_env = {{"FOO_A", "1"}, {"BAR", "no"}, {"SHARED", "from-client"}};
  std::vector<std::string> warnings;
  auto reqs = BuildContainerRequests(TwoRoles(), ctx, &warnings);
  ASSERT_EQ(reqs.size(), 3u);
  const json& c = reqs[1].container;
  EXPECT_EQ(reqs[1].container_name, "app-x1-trainer-1");
  EXPECT_EQ(reqs[1].log_dir, "/logs/torchx/app-x1/trainer/1");
  EXPECT_EQ(c["Image"], "pytorch/torchx:latest");
  EXPECT_EQ(c["Hostname"], "app-x1-trainer-1");
  EXPECT_EQ(c["Cmd"], json({"python", "-m", "train", "--rank", "1", "--master", "${rank0_env}", "--id", "app-x1"}));
  EXPECT_EQ(reqs[1].env.at("TORCHX_RANK0_HOST"), "app-x1-trainer-0");
  EXPECT_EQ(reqs[1].env.at("TORCHX_IMAGE"), "pytorch/torchx:latest");
  EXPECT_EQ(reqs[1].env.at("TORCHX_JOB_ID"), "local_docker://torchx/app-x1");
  EXPECT_EQ(reqs[1].env.at("FOO_A"), "1");          // copy_env glob
  EXPECT_EQ(reqs[1].env.count("BAR"), 0u);          // not copied
  EXPECT_EQ(reqs[1].env.at("SHARED"), "from-role"); // role env over cfg env over copy_env
  EXPECT_EQ(reqs[1].env.at("CFG_ONLY"), "c");
  EXPECT_THAT(c["Env"].get<std::vector<std::string>>(), ::testing::Contains("TORCHX_RANK0_HOST=app-x1-trainer-0"));
  EXPECT_EQ(c["Labels"]["torchx.pytorch.org/app-id"], "app-x1");
  EXPECT_EQ(c["Labels"]["torchx.pytorch.org/role-name"], "trainer");
  EXPECT_EQ(c["Labels"]["torchx.pytorch.org/replica-id"], "1");
  const json& h = c["HostConfig"];
  EXPECT_EQ(h["NetworkMode"], "torchx");
  EXPECT_EQ(c["NetworkingConfig"]["EndpointsConfig"]["torchx"]["Aliases"], json({"app-x1-trainer-1"}));
  EXPECT_EQ(h["Memory"], 1024ll << 20);
  EXPECT_EQ(h["ShmSize"], 1024ll << 20);
  EXPECT_EQ(h["NanoCpus"], 2000000000ll);
  EXPECT_EQ(h["DeviceRequests"][0]["Count"], 1);
  EXPECT_EQ(h["DeviceRequests"][0]["Capabilities"], json::array({json::array({"compute", "utility"})}));
  EXPECT_EQ(h["Mounts"][0], json({{"Type", "bind"}, {"Source", "/data"}, {"Target", "/mnt/data"}, {"ReadOnly", true}}));
  EXPECT_EQ(h["Mounts"][1]["Type"], "volume");
  ASSERT_EQ(h["Devices"].size(), 3u);  // /dev/fuse + 2 EFA
  EXPECT_EQ(h["Devices"][2]["PathOnHost"], "/dev/infiniband/uverbs1");
  EXPECT_EQ(h["Privileged"], false);
  EXPECT_THAT(warnings, ::testing::ElementsAre(::testing::HasSubstr("example.com/fpga")));
  // No resource: no limits at all.
  const json& ps = reqs[2].container["HostConfig"];
  EXPECT_FALSE(ps.contains("Memory"));
  EXPECT_FALSE(ps.contains("NanoCpus"));
  EXPECT_FALSE(ps.contains("DeviceRequests"));
}

}  // namespace
}  // namespace torchxd::core
