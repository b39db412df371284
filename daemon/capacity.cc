#include "daemon/capacity.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace torchxd::daemon {
namespace {

// The few NVML declarations used (nvml.h is not packaged in Debian main).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvlinkMaxLinks = 18;
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct NvmlMemory {
  unsigned long long total, free, used;
};

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*link_remote)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;

  ~Nvml() {
    if (shutdown != nullptr) shutdown();
    if (lib != nullptr) ::dlclose(lib);
  }
  template <class F>
  bool Load(F& fn, const char* name) {
    fn = reinterpret_cast<F>(::dlsym(lib, name));
    return fn != nullptr;
  }
};

// NVML's "00000000:07:00.0" as sysfs names it: "0000:07:00.0".
std::string SysfsBusId(const char* nvml) {
  std::string id(nvml);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return id.size() > 12 ? id.substr(id.size() - 12) : id;
}

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

core::GpuTopology DiscoverNvmlGpus(const CapacityOptions& options, std::string* why) {
  core::GpuTopology topo;
  Nvml nvml;
  nvml.lib = ::dlopen(options.nvml_library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml.lib == nullptr) {
    *why = "no NVML (" + options.nvml_library + " cannot be loaded): no GPUs";
    return topo;
  }
  if (!nvml.Load(nvml.init, "nvmlInit_v2") || !nvml.Load(nvml.count, "nvmlDeviceGetCount_v2") ||
      !nvml.Load(nvml.by_index, "nvmlDeviceGetHandleByIndex_v2")) {
    *why = "NVML lacks nvmlInit_v2/nvmlDeviceGetCount_v2: no GPUs";
    return topo;
  }
  nvml.Load(nvml.uuid, "nvmlDeviceGetUUID");
  nvml.Load(nvml.pci, "nvmlDeviceGetPciInfo_v3");
  nvml.Load(nvml.memory, "nvmlDeviceGetMemoryInfo");
  nvml.Load(nvml.link_state, "nvmlDeviceGetNvLinkState");
  nvml.Load(nvml.link_remote, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (nvml.init() != kNvmlSuccess) {
    *why = "nvmlInit failed (no driver loaded?): no GPUs";
    return topo;
  }
  nvml.Load(nvml.shutdown, "nvmlShutdown");
  unsigned count = 0;
  if (nvml.count(&count) != kNvmlSuccess) count = 0;
  std::vector<nvmlDevice_t> devices(count, nullptr);
  std::map<std::string, int> by_bus;
  for (unsigned i = 0; i < count; ++i) {
    core::Gpu g;
    g.index = static_cast<int>(i);
    if (nvml.by_index(i, &devices[i]) != kNvmlSuccess) {
      g.usable = false;
      g.unusable_reason = "NVML cannot open it (lost or unhealthy)";
      topo.gpus.push_back(g);
      continue;
    }
    char uuid[96] = {0};
    if (nvml.uuid != nullptr && nvml.uuid(devices[i], uuid, sizeof(uuid)) == kNvmlSuccess) g.uuid = uuid;
    NvmlPciInfo pci{};
    if (nvml.pci != nullptr && nvml.pci(devices[i], &pci) == kNvmlSuccess) {
      g.pci_bus_id = SysfsBusId(pci.bus_id);
      g.numa_node = NumaNodeOf(options.sysfs_pci, g.pci_bus_id);
      by_bus[g.pci_bus_id] = g.index;
    }
    NvmlMemory mem{};
    if (nvml.memory != nullptr && nvml.memory(devices[i], &mem) == kNvmlSuccess) {
      g.memory_mb = static_cast<int64_t>(mem.total >> 20);
    }
    topo.gpus.push_back(g);
  }
  // NVLink: count each active link by the GPU at its far end (an NVSwitch end counts nothing).
  for (unsigned i = 0; i < count && nvml.link_state != nullptr && nvml.link_remote != nullptr; ++i) {
    if (devices[i] == nullptr) continue;
    for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
      int active = 0;
      if (nvml.link_state(devices[i], link, &active) != kNvmlSuccess || active == 0) continue;
      NvmlPciInfo remote{};
      if (nvml.link_remote(devices[i], link, &remote) != kNvmlSuccess) continue;
      auto peer = by_bus.find(SysfsBusId(remote.bus_id));
      if (peer != by_bus.end() && peer->second != static_cast<int>(i)) topo.gpus[i].nvlink[peer->second] += 1;
    }
  }
  topo.Index();
  return topo;
}

Result<core::BoxCapacity> DiscoverCapacity(const CapacityOptions& options, std::vector<std::string>* notes) {
  core::BoxCapacity box;
  if (!options.gpu_topology.empty()) {
    std::ifstream in(options.gpu_topology);
    if (!in) return Fail(Error::InvalidArgument("--gpu-topology " + options.gpu_topology + ": cannot be read"));
    std::stringstream text;
    text << in.rdbuf();
    auto topo = core::ParseGpuTopology(text.str());
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
          core::Gpu g;
          g.index = i;
          box.topology.gpus.push_back(std::move(g));
        }
        if (*n > 0) notes->push_back("GPUs declared by --capacity gpu=" + value + " (no topology)");
      } else {
        // A cap: GPUs that exist are never invented.
        int usable = 0;
        for (core::Gpu& g : box.topology.gpus) {
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
    if (auto excluded = core::ExcludeGpus(box.topology, options.exclude_gpus); !excluded) return Fail(excluded.error());
  }
  return box;
}

}  // namespace torchxd::daemon
