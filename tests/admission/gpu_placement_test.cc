// Topology and placement on fake boxes: F8 (8 GPUs, NVLink pairs {0,2},
// {1,3}, {4,5}, {6,7}; NUMA 0 = GPUs 0-3, NUMA 1 = GPUs 4-7), two NVLink
// quads, and 4 GPUs without NVLink.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "admission/gpu_placement.h"
#include "admission/gpu_set.h"
#include "admission/gpu_topology.h"

namespace torchxd::admission {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char* kF8 = R"({"gpus": [
  {"index": 0, "numa_node": 0, "nvlink": {"2": 12}}, {"index": 1, "numa_node": 0, "nvlink": {"3": 12}},
  {"index": 2, "numa_node": 0}, {"index": 3, "numa_node": 0},
  {"index": 4, "numa_node": 1, "nvlink": {"5": 12}}, {"index": 5, "numa_node": 1},
  {"index": 6, "numa_node": 1, "nvlink": {"7": 12}}, {"index": 7, "numa_node": 1}]})";

GpuTopology F8() { return *ParseGpuTopology(kF8); }

std::vector<bool> AllFree(const GpuTopology& t) { return std::vector<bool>(t.size(), true); }

TEST(GpuTopologyTest, ParsesTheDocumentedFormat) {
  auto t = ParseGpuTopology(R"({"gpus": [{"index": 1, "uuid": "GPU-b", "pci_bus_id": "0000:08:00.0", "numa_node": 1,
    "memory_mb": 81920, "nvlink": {"0": 12}}, {"index": 0}]})");
  ASSERT_TRUE(t.has_value()) << t.error().message;
  ASSERT_EQ(t->size(), 2);
  EXPECT_EQ(t->gpus[1].uuid, "GPU-b");
  EXPECT_EQ(t->gpus[1].memory_mb, 81920);
  EXPECT_EQ(t->Links(0, 1), 12) << "one side is enough";
  EXPECT_EQ(t->PairScore(0, 1), 1200);
  EXPECT_EQ(t->gpus[0].numa_node, -1);
}

TEST(GpuTopologyTest, BadFilesNameWhatIsWrong) {
  auto err = [](const char* text) {
    auto t = ParseGpuTopology(text);
    return t ? std::string("accepted") : t.error().message;
  };
  EXPECT_THAT(err(R"({"gpus": [{"uuid": "x"}]})"), HasSubstr("gpus[0].index: required"));
  EXPECT_THAT(err(R"({"gpus": [{"index": 0}, {"index": 0}]})"), HasSubstr("listed twice"));
  EXPECT_THAT(err(R"({"gpus": [{"index": 3}]})"), HasSubstr("gpus[0].index: 3 is not in 0..0"));
  EXPECT_THAT(err(R"({"gpus": [{"index": 0, "nvlink": {"7": 2}}]})"), HasSubstr("gpus[0].nvlink.7"));
  EXPECT_THAT(err(R"({"gpus": [{"index": 0, "numa": 0}]})"), HasSubstr("numa"));
  EXPECT_THAT(err(R"({"gpu": []})"), HasSubstr("gpu"));
  EXPECT_THAT(err("[1]"), HasSubstr("expected a JSON object"));
  EXPECT_THAT(err(R"({"gpus": [{"index": 0, "memory_mb": -4}]})"), HasSubstr("memory_mb"));
}

TEST(GpuTopologyTest, MigInstancesAreDevicesNamedByUuid) {
  auto t = ParseGpuTopology(R"({"gpus": [{"index": 0, "uuid": "GPU-a"},
    {"index": 1, "uuid": "MIG-b1", "mig_parent": 1, "pci_bus_id": "0000:08:00.0"},
    {"index": 2, "uuid": "MIG-b2", "mig_parent": 1, "pci_bus_id": "0000:08:00.0"}]})");
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_EQ(t->gpus[0].mig_parent, -1);
  EXPECT_EQ(t->gpus[2].mig_parent, 1);
  // A whole GPU by its index (bus order); a MIG instance only by its UUID.
  core::ReplicaRequest whole, part;
  ApplyGpuSet(whole, {0}, *t);
  EXPECT_EQ(whole.env["CUDA_VISIBLE_DEVICES"], "0");
  ApplyGpuSet(part, {2}, *t);
  EXPECT_EQ(part.env["CUDA_VISIBLE_DEVICES"], "MIG-b2");
  // Excluding the GPU's bus id excludes each of its instances.
  ASSERT_TRUE(ExcludeGpus(*t, "0000:08:00.0").has_value());
  EXPECT_EQ(t->UsableCount(), 1);
  auto bad = ParseGpuTopology(R"({"gpus": [{"index": 0, "mig_parent": -1}]})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("gpus[0].mig_parent"));
}

TEST(GpuTopologyTest, ExcludedGpusAreUnusable) {
  GpuTopology t = F8();
  t.gpus[3].uuid = "GPU-three";
  ASSERT_TRUE(ExcludeGpus(t, "5,GPU-three").has_value());
  EXPECT_FALSE(t.gpus[5].usable);
  EXPECT_FALSE(t.gpus[3].usable);
  EXPECT_EQ(t.UsableCount(), 6);
  auto bad = ExcludeGpus(t, "9");
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("`9` is not a GPU of this box"));
}

TEST(GpuPlacementTest, TwoGpusGetAnNvlinkPair) {
  GpuTopology t = F8();
  EXPECT_THAT(*PickGpus(t, AllFree(t), 2), ElementsAre(0, 2));
}

TEST(GpuPlacementTest, SingletonsGoToBrokenPairsFirst) {
  GpuTopology t = F8();
  std::vector<bool> free = AllFree(t);
  free[0] = false;  // a 1-GPU app holds GPU 0: its partner 2 is the one to take
  EXPECT_THAT(*PickGpus(t, free, 1), ElementsAre(2));
  free[2] = false;
  // Then three 2-GPU apps get the three intact pairs.
  std::vector<std::vector<int>> got;
  for (int i = 0; i < 3; ++i) {
    auto set = *PickGpus(t, free, 2);
    for (int g : set) free[g] = false;
    got.push_back(set);
  }
  EXPECT_THAT(got, ElementsAre(ElementsAre(1, 3), ElementsAre(4, 5), ElementsAre(6, 7)));
}

TEST(GpuPlacementTest, FourGpusStayOnOneNumaNodeAndTwoPairsOfAGangToo) {
  GpuTopology t = F8();
  EXPECT_THAT(*PickGpus(t, AllFree(t), 4), ElementsAre(0, 1, 2, 3));
  std::vector<bool> free = AllFree(t);
  free[1] = false;  // NUMA 0 has 3 free: the quad goes to NUMA 1
  EXPECT_THAT(*PickGpus(t, free, 4), ElementsAre(4, 5, 6, 7));
  auto gang = PlaceGang(t, AllFree(t), {2, 2});
  ASSERT_TRUE(gang.has_value());
  EXPECT_THAT(*gang, ElementsAre(ElementsAre(0, 2), ElementsAre(1, 3)));
}

TEST(GpuPlacementTest, TwoNvlinkQuads) {
  std::string text = R"({"gpus": [)";
  for (int i = 0; i < 8; ++i) {
    std::string links;
    int base = i < 4 ? 0 : 4;
    for (int p = base; p < base + 4; ++p) {
      if (p != i) links += std::string(links.empty() ? "" : ", ") + "\"" + std::to_string(p) + "\": 4";
    }
    text += std::string(i ? ", " : "") + R"({"index": )" + std::to_string(i) + R"(, "nvlink": {)" + links + "}}";
  }
  text += "]}";
  GpuTopology t = *ParseGpuTopology(text);
  std::vector<bool> free = AllFree(t);
  free[0] = false;
  // 3 GPUs: the rest of the broken quad, not three of the intact one.
  EXPECT_THAT(*PickGpus(t, free, 3), ElementsAre(1, 2, 3));
  EXPECT_THAT(*PickGpus(t, AllFree(t), 8), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST(GpuPlacementTest, WithoutNvlinkTheLowestIndicesWin) {
  GpuTopology t = *ParseGpuTopology(R"({"gpus": [{"index": 0}, {"index": 1}, {"index": 2}, {"index": 3}]})");
  EXPECT_THAT(*PickGpus(t, AllFree(t), 2), ElementsAre(0, 1));
  std::vector<bool> free = AllFree(t);
  free[1] = false;
  EXPECT_THAT(*PickGpus(t, free, 2), ElementsAre(0, 2));
  EXPECT_FALSE(PickGpus(t, free, 4).has_value());
}

TEST(GpuPlacementTest, PreferredGpusComeFirst) {
  GpuTopology t = F8();
  std::vector<bool> prefer(8, false);
  prefer[6] = prefer[7] = true;
  EXPECT_THAT(*PickGpus(t, AllFree(t), 2, {}, prefer), ElementsAre(6, 7));
}

TEST(GpuPlacementTest, LargeBoxesUseTheGreedySearch) {
  std::string text = R"({"gpus": [)";
  for (int i = 0; i < 32; ++i) {
    int partner = i ^ 1;
    text += std::string(i ? ", " : "") + R"({"index": )" + std::to_string(i) + R"(, "numa_node": )" +
            std::to_string(i / 16) + R"(, "nvlink": {")" + std::to_string(partner) + R"(": 8}})";
  }
  text += "]}";
  GpuTopology t = *ParseGpuTopology(text);
  auto set = PickGpus(t, AllFree(t), 8);  // C(32,8) is far past the exhaustive limit
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(set->size(), 8u);
  for (int g : *set) EXPECT_LT(g, 16) << "one NUMA node";
  for (int g : *set) EXPECT_NE(std::find(set->begin(), set->end(), g ^ 1), set->end()) << "whole pairs";
}

}  // namespace
}  // namespace torchxd::admission
