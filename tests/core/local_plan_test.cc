#include "core/local_plan.h"

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

AppDef TwoGpuApp() {
  Role role;
  role.name = "trainer";
  role.entrypoint = "python";
  role.args = {"--rank", "${replica_id}"};
  role.num_replicas = 2;
  role.resource.gpu = 1;
  return AppDef{"train", {role}, {}};
}

LocalPlanInput Input(std::string scheduler) {
  LocalPlanInput in;
  in.scheduler = std::move(scheduler);
  in.app_id = "train-x1";
  in.session_id = "sid";
  in.app_log_dir = "/logs/torchx/train-x1";
  in.roles = {RoleLocation{"/img", "/work"}};
  return in;
}

TEST(LocalPlanTest, ProcessesGetMacrosCwdAndGpusFromTheOnePlan) {
  LocalPlanInput in = Input("local_cwd");
  in.cfg["auto_set_cuda_visible_devices"] = true;
  in.gpu_count = 2;
  LocalPlan plan = PlanLocalApp(TwoGpuApp(), in);
  ASSERT_EQ(plan.requests.size(), 2u);
  EXPECT_EQ(plan.requests[1].args, (std::vector<std::string>{"--rank", "1"}));
  EXPECT_EQ(plan.requests[1].cwd, "/work");
  EXPECT_EQ(plan.requests[0].env.at("CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(plan.requests[1].env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(plan.requests[1].log_dir, "/logs/torchx/train-x1/trainer/1");
  EXPECT_TRUE(plan.warnings.empty());

  in.gpu_count = 1;  // too few: nothing set, and the user is told
  LocalPlan short_plan = PlanLocalApp(TwoGpuApp(), in);
  EXPECT_EQ(short_plan.requests[0].env.count("CUDA_VISIBLE_DEVICES"), 0u);
  ASSERT_EQ(short_plan.warnings.size(), 1u);
}

TEST(LocalPlanTest, DockerGetsContainersWithTheirCreateBodies) {
  LocalPlanInput in = Input("local_docker");
  in.roles.clear();
  in.cfg["env"] = std::map<std::string, std::string>{{"NCCL_DEBUG", "INFO"}};
  LocalPlan plan = PlanLocalApp(TwoGpuApp(), in);
  ASSERT_EQ(plan.requests.size(), 2u);
  EXPECT_FALSE(plan.requests[0].container_name.empty());
  EXPECT_TRUE(plan.requests[0].container.contains("Image"));
  bool has_env = false;
  for (const auto& e : plan.requests[0].container["Env"]) has_env = has_env || e == "NCCL_DEBUG=INFO";
  EXPECT_TRUE(has_env);
}

}  // namespace
}  // namespace torchxd::core
