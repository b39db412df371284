// What the box offers admission: NVML discovery (the real GPUs where there
// are some), a topology file, --capacity and --exclude-gpus.
#include "daemon/capacity.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torchxd::daemon {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class CapacityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("capacity_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
    options_.nvml_library = (dir_ / "no-libnvidia-ml.so.1").string();  // a box without NVML
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string File(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  admission::BoxCapacity Discover() {
    auto box = DiscoverCapacity(options_, &notes_);
    EXPECT_TRUE(box.has_value()) << box.error().message;
    return box ? *box : admission::BoxCapacity{};
  }
  std::string Refused() {
    auto box = DiscoverCapacity(options_, &notes_);
    return box ? "accepted" : box.error().message;
  }
  std::string Notes() const {
    std::string all;
    for (const auto& n : notes_) all += n + "\n";
    return all;
  }

  fs::path dir_;
  CapacityOptions options_;
  std::vector<std::string> notes_;
};

TEST_F(CapacityTest, TheRealGpusAreReadThroughNvmlWhereThereAreSome) {
  CapacityOptions real;  // the system's libnvidia-ml.so.1
  std::string why;
  admission::GpuTopology topo = DiscoverNvmlGpus(real, &why);
  if (!why.empty()) GTEST_SKIP() << "no NVIDIA GPU on this machine (" << why << "): the real topology is not read";
  ASSERT_GT(topo.size(), 0);
  size_t in_proc = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/driver/nvidia/gpus", ec); !ec && it != fs::directory_iterator(); ++it) {
    ++in_proc;
  }
  if (!ec) {
    EXPECT_EQ(static_cast<size_t>(topo.size()), in_proc) << "NVML and the driver count the same GPUs";
  }
  for (int i = 0; i < topo.size(); ++i) {
    const admission::Gpu& g = topo.gpus[static_cast<size_t>(i)];
    SCOPED_TRACE(i);
    EXPECT_EQ(g.index, i);
    EXPECT_THAT(g.uuid, ::testing::StartsWith("GPU-"));
    EXPECT_EQ(g.pci_bus_id.size(), 12u) << g.pci_bus_id;
    EXPECT_GT(g.memory_mb, 0);
    EXPECT_TRUE(fs::exists("/sys/bus/pci/devices/" + g.pci_bus_id)) << "the bus id names the device as sysfs does";
  }
}

TEST_F(CapacityTest, WithoutNvmlTheBoxHasNoGpusAndThatIsNoError) {
  admission::BoxCapacity box = Discover();
  EXPECT_EQ(box.topology.size(), 0);
  EXPECT_EQ(box.cpu, 0) << "CPUs are accounted only when --capacity asks";
  EXPECT_EQ(box.mem_mb, 0);
  EXPECT_THAT(Notes(), HasSubstr("no NVML"));
}

TEST_F(CapacityTest, CapacityDeclaresGpusNvmlCannotSeeAndCpuAndMemory) {
  options_.capacity = "gpu=4,cpu=auto,memMB=auto";
  options_.meminfo = File("meminfo", "MemTotal:       2048000 kB\nMemFree:  1000 kB\n");
  admission::BoxCapacity box = Discover();
  ASSERT_EQ(box.topology.size(), 4);
  EXPECT_EQ(box.topology.gpus[3].index, 3);
  EXPECT_EQ(box.topology.UsableCount(), 4);
  EXPECT_EQ(box.cpu, ::sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(box.mem_mb, 2000);
  options_.capacity = "cpu=16,memMB=64000";
  box = Discover();
  EXPECT_EQ(box.cpu, 16);
  EXPECT_EQ(box.mem_mb, 64000);
}

TEST_F(CapacityTest, CapacityCapsTheGpusFoundAndNeverInventsMore) {
  options_.gpu_topology = File("t.json", R"({"gpus": [{"index": 0}, {"index": 1}, {"index": 2}, {"index": 3}]})");
  options_.capacity = "gpu=2";
  admission::BoxCapacity box = Discover();
  EXPECT_EQ(box.topology.UsableCount(), 2);
  EXPECT_FALSE(box.topology.gpus[3].usable);
  EXPECT_EQ(box.topology.gpus[3].unusable_reason, "beyond --capacity gpu=2");
  options_.capacity = "gpu=6";
  box = Discover();
  EXPECT_EQ(box.topology.size(), 4) << "a cap above what the box has adds nothing";
  EXPECT_EQ(box.topology.UsableCount(), 4);
  EXPECT_THAT(Notes(), HasSubstr("--capacity gpu=6 caps the GPUs found: 4 usable"));
}

TEST_F(CapacityTest, ExcludedGpusAreNeverUsable) {
  options_.gpu_topology = File("t.json", R"({"gpus": [{"index": 0, "uuid": "GPU-a"}, {"index": 1, "uuid": "GPU-b"}]})");
  options_.exclude_gpus = "GPU-b";
  admission::BoxCapacity box = Discover();
  EXPECT_TRUE(box.topology.gpus[0].usable);
  EXPECT_FALSE(box.topology.gpus[1].usable);
}

TEST_F(CapacityTest, BadSettingsAreRefusedNamingThem) {
  options_.capacity = "memMB=lots";
  EXPECT_THAT(Refused(), HasSubstr("--capacity memMB=lots: expected a whole number >= 0 or auto"));
  options_.capacity = "gpu=auto";
  EXPECT_THAT(Refused(), HasSubstr("--capacity gpu=auto: expected a whole number >= 0"));
  options_.capacity = "disk=1";
  EXPECT_THAT(Refused(), HasSubstr("unknown resource `disk`"));
  options_.capacity = "";
  options_.gpu_topology = (dir_ / "missing.json").string();
  EXPECT_THAT(Refused(), HasSubstr("cannot be read"));
}

}  // namespace
}  // namespace torchxd::daemon
