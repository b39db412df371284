#include "core/named_resources.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

TEST(NamedResourcesTest, BuiltinTablesMatchTorchx) {
  auto nr = NamedResources::Builtin();
  struct Case {
    const char* name;
    int cpu, gpu, mem;
  };
  const Case cases[] = {
      {"gpu.small", 8, 1, 32768},     {"gpu.xlarge", 64, 8, 262144}, {"cpu.nano", 1, 0, 512},
      {"cpu.micro", 1, 0, 1024},      {"cpu.xlarge", 8, 0, 32768},
      {"aws_t3.medium", 2, 0, 4 * 983}, {"aws_p4d.24xlarge", 96, 8, 1152 * 983},
      {"aws_m5.large", 2, 0, 8 * 983},  {"aws_m5.metal", 96, 0, 384 * 983}, {"aws_m5d.12xlarge", 48, 0, 192 * 983},
      {"aws_p6-b200.48xlarge", 192, 8, 2048 * 983}, {"aws_p6-b300.48xlarge", 192, 8, 4096 * 983},
      {"aws_p6e-gb200.36xlarge", 144, 4, 960 * 983},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = nr.Get(c.name);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->cpu, c.cpu);
    EXPECT_EQ(r->gpu, c.gpu);
    EXPECT_EQ(r->mem_mb, c.mem);
  }
  auto p4d = nr.Get("aws_p4d.24xlarge");
  EXPECT_EQ(p4d->capabilities["node.kubernetes.io/instance-type"], "p4d.24xlarge");
  EXPECT_EQ(p4d->devices.at("vpc.amazonaws.com/efa"), 4);
  auto trn = nr.Get("aws_trn1.32xlarge");
  EXPECT_EQ(trn->devices.at("aws.amazon.com/neurondevice"), 16);
  EXPECT_TRUE(nr.Get("NULL")->IsNull());
  EXPECT_EQ(nr.Get("aws_p6-b300.48xlarge")->devices.at("vpc.amazonaws.com/efa"), 16);
  EXPECT_EQ(nr.Get("aws_m5d.metal")->capabilities["node.kubernetes.io/instance-type"], "m5d.metal");
  EXPECT_EQ(nr.Names().size(), 73u);  // TorchX's generic and AWS tables, NULL and MISSING included
}

TEST(NamedResourcesTest, UnknownNameSuggestsTheClosest) {
  auto r = NamedResources::Builtin().Get("gpu.smal");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "No named resource found for `gpu.smal`. Did you mean `gpu.small`?");
}

TEST(NamedResourcesTest, UserFileAddsResourcesWithDevicesAndCapabilities) {
  namespace fs = std::filesystem;
  fs::path file = fs::temp_directory_path() / ("nr_test_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << R"({"rdma.large": {"cpu": 32, "gpu": 4, "memMB": 262144,
      "capabilities": {"security.capabilities.add": ["IPC_LOCK"]},
      "devices": {"rdma/rdma_shared_device_a": 1}}})";
  auto nr = NamedResources::Load(MapEnv({{"TORCHX_NAMED_RESOURCES", file.string()}}));
  ASSERT_TRUE(nr.has_value()) << nr.error().message;
  auto r = nr->Get("rdma.large");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->gpu, 4);
  EXPECT_EQ(r->devices.at("rdma/rdma_shared_device_a"), 1);
  EXPECT_EQ(r->capabilities["security.capabilities.add"][0], "IPC_LOCK");
  EXPECT_TRUE(nr->Get("gpu.small").has_value());  // builtins stay

  std::ofstream(file) << R"({"bad": {"cpu": "four"}})";
  auto bad = NamedResources::Load(MapEnv({{"TORCHX_NAMED_RESOURCES", file.string()}}));
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("bad.cpu: must be an integer"), std::string::npos)
      << bad.error().message;
  fs::remove(file);

  auto missing = NamedResources::Load(MapEnv({{"TORCHX_NAMED_RESOURCES", file.string()}}));
  EXPECT_FALSE(missing.has_value());
  // The default location may be absent.
  EXPECT_TRUE(NamedResources::Load(MapEnv({{"HOME", "/nonexistent"}})).has_value());
}

}  // namespace
}  // namespace torchxd::core
