#include "daemon/capacity.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include "gpus/nvml.h"

namespace torchxd::daemon {
namespace {

constexpr unsigned kNvlinkMaxLinks = 18;

int NumaNodeOf(const std::string& sysfs, const std::string& bus_id) {
  std::ifstream in(sysfs + "/" + bus_id + "/numa_node");
  int node = -1;
  if (!(in >> node) || node < 0) return -1;
  return node;
}

int64_t MemTotalMb(const std::string& meminfo) {
  std::ifstream in(meminfo);
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemTotal:") return kb / 1024;
  }
  return 0;
}

Result<int64_t> CapacityNumber(const std::string& key, const std::string& value, int64_t automatic) {
  if (value == "auto" && key != "gpu") return automatic;
  char* end = nullptr;
  long long n = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n < 0 || n > (int64_t{1} << 40)) {
    return Fail(Error::InvalidArgument("--capacity " + key + "=" + value + ": expected a whole number >= 0" +
                                       (key == "gpu" ? "" : " or auto")));
  }
  return static_cast<int64_t>(n);
}

}  // namespace

admission::GpuTopology DiscoverNvmlGpus(const CapacityOptions& options, std::string* why) {
  admission::GpuTopology topo;
  auto nvml = gpus::Nvml::Open(options.nvml_library);
  if (!nvml) {
    *why = nvml.error().message + ": no GPUs";
    return topo;
  }
  // A GPU in MIG mode is its MIG instances, each handed out on its own
  // (CUDA_VISIBLE_DEVICES=MIG-…); they share its PCI bus id and NUMA node.
  std::vector<gpus::Nvml::Slot> slots = (*nvml)->Slots();
  std::map<std::string, int> by_bus;  // whole GPUs only: NVLink joins those
  for (size_t i = 0; i < slots.size(); ++i) {
    const gpus::Nvml::Slot& slot = slots[i];
    admission::Gpu g;
    g.index = static_cast<int>(i);
    if (slot.mig >= 0) g.mig_parent = static_cast<int>(slot.gpu);
    if (slot.device == nullptr) {
      g.usable = false;
      g.unusable_reason = "NVML cannot open it (lost or unhealthy)";
      topo.gpus.push_back(g);
      continue;
    }
    if (auto uuid = (*nvml)->Uuid(slot.device)) g.uuid = *uuid;
    if (auto pci = (*nvml)->Pci(slot.parent)) {
      g.pci_bus_id = gpus::SysfsBusId(pci->bus_id);
      g.numa_node = NumaNodeOf(options.sysfs_pci, g.pci_bus_id);
      if (slot.mig < 0) by_bus[g.pci_bus_id] = g.index;
    }
    gpus::NvmlMemory mem{};
    if ((*nvml)->Memory(slot.device, &mem) == gpus::kNvmlSuccess) g.memory_mb = static_cast<int64_t>(mem.total >> 20);
    topo.gpus.push_back(g);
  }
  // NVLink: count each active link by the GPU at its far end (an NVSwitch end counts nothing).
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].device == nullptr || slots[i].mig >= 0) continue;
    for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
      if (!(*nvml)->NvlinkActive(slots[i].device, link)) continue;
      auto remote = (*nvml)->NvlinkRemote(slots[i].device, link);
      if (!remote) continue;
      auto peer = by_bus.find(gpus::SysfsBusId(remote->bus_id));
      if (peer != by_bus.end() && peer->second != static_cast<int>(i)) topo.gpus[i].nvlink[peer->second] += 1;
    }
  }
  topo.Index();
  return topo;
}

Result<admission::BoxCapacity> DiscoverCapacity(const CapacityOptions& options, std::vector<std::string>* notes) {
  admission::BoxCapacity box;
  if (!options.gpu_topology.empty()) {
    std::ifstream in(options.gpu_topology);
    if (!in) return Fail(Error::InvalidArgument("--gpu-topology " + options.gpu_topology + ": cannot be read"));
    std::stringstream text;
    text << in.rdbuf();
    auto topo = admission::ParseGpuTopology(text.str());
    if (!topo) return Fail(Error::InvalidArgument("--gpu-topology " + options.gpu_topology + ": " + topo.error().message));
    box.topology = std::move(*topo);
    notes->push_back("GPUs from " + options.gpu_topology + ": " + std::to_string(box.topology.size()));
  } else {
    std::string why;
    box.topology = DiscoverNvmlGpus(options, &why);
    notes->push_back(why.empty() ? "GPUs from NVML: " + std::to_string(box.topology.size()) : why);
  }
  int64_t online_cpus = std::max<long>(1, ::sysconf(_SC_NPROCESSORS_ONLN));
  int64_t mem_mb = MemTotalMb(options.meminfo);
  size_t start = 0;
  const std::string& cap = options.capacity;
  while (start < cap.size()) {
    size_t comma = cap.find(',', start);
    std::string item = cap.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? cap.size() : comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "gpu") {
      auto n = CapacityNumber(key, value, 0);
      if (!n) return Fail(n.error());
      if (box.topology.size() == 0) {
        // Nothing discovered: N GPUs without topology (a box NVML cannot see).
        for (int i = 0; i < *n; ++i) {
          admission::Gpu g;
          g.index = i;
          box.topology.gpus.push_back(std::move(g));
        }
        if (*n > 0) notes->push_back("GPUs declared by --capacity gpu=" + value + " (no topology)");
      } else {
        // A cap: GPUs that exist are never invented.
        int usable = 0;
        for (admission::Gpu& g : box.topology.gpus) {
          if (!g.usable) continue;
          if (++usable > *n) g.usable = false, g.unusable_reason = "beyond --capacity gpu=" + value;
        }
        if (usable < *n) {
          notes->push_back("--capacity gpu=" + value + " caps the GPUs found: " + std::to_string(usable) +
                           " usable, so " + std::to_string(usable) + " are handed out");
        }
      }
      box.topology.Index();
    } else if (key == "cpu") {
      auto n = CapacityNumber(key, value, online_cpus);
      if (!n) return Fail(n.error());
      box.cpu = *n;
    } else if (key == "memMB") {
      auto n = CapacityNumber(key, value, mem_mb);
      if (!n) return Fail(n.error());
      box.mem_mb = *n;
    } else {
      return Fail(Error::InvalidArgument("--capacity: unknown resource `" + key + "` (use gpu, cpu or memMB)"));
    }
  }
  if (!options.exclude_gpus.empty()) {
    if (auto excluded = admission::ExcludeGpus(box.topology, options.exclude_gpus); !excluded) return Fail(excluded.error());
  }
  return box;
}

}  // namespace torchxd::daemon
