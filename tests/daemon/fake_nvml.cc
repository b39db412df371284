// A fake libnvidia-ml for tests: NVML's C entry points that torchxd uses,
// answering from a JSON file a test writes and rewrites (its path in
// TORCHXD_FAKE_NVML; re-read whenever it changes):
//   {"gpus": [{"uuid": "GPU-…", "pci_bus_id": "00000000:07:00.0",
//              "memory_total_mb": 81920, "memory_used_mb": 1024, "memory_reserved_mb": 0,
//              "util_gpu": 50, "util_mem": 20, "temperature_c": 40,
//              "power_mw": 100000, "power_limit_mw": 400000, "sm_clock_mhz": 1410,
//              "ecc_uncorrected": 0, "ecc_corrected": 0, "lost": false,
//              "processes": [{"pid": 123, "used_mb": 1000}],
//              "graphics_processes": [],
//              "mig": [{"uuid": "MIG-…", "memory_total_mb": 9728, "memory_used_mb": 0,
//                       "processes": []}]}],
//    "xids": [{"gpu": 0, "xid": 79}]}
// A GPU with "mig" is in MIG mode, with those instances; it answers the
// readings a MIG instance does not have (temperature, power, ECC).
// XID events are delivered once each, in order, as entries are appended.
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

constexpr int kSuccess = 0, kUninitialized = 1, kInvalid = 2, kNotSupported = 3, kInsufficient = 7,
              kTimeout = 10, kGpuLost = 15;

struct State {
  std::mutex mu;
  json doc = json::object();
  struct timespec mtime {};
  off_t size = -1;
  size_t xids_delivered = 0;
  bool initialised = false;
  int set_token = 0;
};

// One per load of the library: each dlopen after a dlclose starts afresh.
State& S() {
  static State state;
  return state;
}

// Re-reads the file when it changed; holds S().mu.
void Refresh(State& s) {
  const char* path = std::getenv("TORCHXD_FAKE_NVML");
  if (path == nullptr) return;
  struct stat st {};
  if (::stat(path, &st) != 0) return;
  if (st.st_size == s.size && st.st_mtim.tv_sec == s.mtime.tv_sec && st.st_mtim.tv_nsec == s.mtime.tv_nsec) return;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return;  // half-written: keep the last good one
  s.doc = std::move(doc);
  s.size = st.st_size;
  s.mtime = st.st_mtim;
}

// A GPU's handle is its index + 1 (never null); its MIG instance k's is
// that | (k + 1) << 16.
const json* Gpu(State& s, void* device, const json** whole = nullptr) {
  auto handle = reinterpret_cast<uintptr_t>(device);
  uintptr_t index = handle & 0xFFFF, mig = handle >> 16;
  if (index == 0 || !s.doc.contains("gpus")) return nullptr;
  const json& gpus = s.doc["gpus"];
  if (index - 1 >= gpus.size()) return nullptr;
  const json& g = gpus[index - 1];
  if (whole != nullptr) *whole = &g;
  if (mig == 0) return &g;
  if (!g.contains("mig") || mig - 1 >= g["mig"].size()) return nullptr;
  return &g["mig"][mig - 1];
}

template <class Fn>
int WithGpu(void* device, Fn fn) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialised) return kUninitialized;
  Refresh(s);
  const json* whole = nullptr;
  const json* g = Gpu(s, device, &whole);
  if (g == nullptr) return kInvalid;
  if (whole->value("lost", false)) return kGpuLost;
  return fn(*g);
}

int Unsigned(void* device, const char* key, unsigned* out) {
  return WithGpu(device, [&](const json& g) {
    if (!g.contains(key)) return kNotSupported;
    *out = g[key].get<unsigned>();
    return kSuccess;
  });
}

struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct Memory {
  unsigned long long total, free, used;
};
struct MemoryV2 {
  unsigned version;
  unsigned long long total, reserved, free, used;
};
struct Utilization {
  unsigned gpu, memory;
};
struct ProcessInfo {
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id, compute_instance_id;
};
struct EventData {
  void* device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned gpu_instance_id, compute_instance_id;
};

int Processes(void* device, const char* key, unsigned* count, ProcessInfo* infos) {
  return WithGpu(device, [&](const json& g) {
    json list = g.value(key, json::array());
    if (list.size() > *count) {
      *count = static_cast<unsigned>(list.size());
      return kInsufficient;
    }
    *count = static_cast<unsigned>(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      infos[i] = ProcessInfo{list[i].value("pid", 0u),
                             list[i].contains("used_mb") ? list[i]["used_mb"].get<unsigned long long>() << 20 : ~0ULL,
                             0xFFFFFFFFu, 0xFFFFFFFFu};
    }
    return kSuccess;
  });
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.initialised = true;
  Refresh(s);
  return kSuccess;
}

int nvmlShutdown() { return kSuccess; }

const char* nvmlErrorString(int code) {
  switch (code) {
    case kGpuLost: return "GPU is lost";
    case kNotSupported: return "Not Supported";
    case kInvalid: return "Invalid Argument";
    default: return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  Refresh(s);
  *count = s.doc.contains("gpus") ? static_cast<unsigned>(s.doc["gpus"].size()) : 0;
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  Refresh(s);
  if (!s.doc.contains("gpus") || index >= s.doc["gpus"].size()) return kInvalid;
  *device = reinterpret_cast<void*>(static_cast<uintptr_t>(index) + 1);
  return kSuccess;
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  return WithGpu(device, [&](const json& g) {
    std::string u = g.value("uuid", "");
    if (u.size() + 1 > length) return kInsufficient;
    std::memcpy(uuid, u.c_str(), u.size() + 1);
    return kSuccess;
  });
}

int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* pci) {
  return WithGpu(device, [&](const json& g) {
    std::string id = g.value("pci_bus_id", "");
    if (id.empty()) return kNotSupported;
    std::memset(pci, 0, sizeof(*pci));
    std::strncpy(pci->bus_id, id.c_str(), sizeof(pci->bus_id) - 1);
    return kSuccess;
  });
}

// As a real driver: v1's `used` counts the memory the driver reserves, v2's does not.
int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  return WithGpu(device, [&](const json& g) {
    unsigned long long total = g.value("memory_total_mb", 0ULL) << 20, used = g.value("memory_used_mb", 0ULL) << 20,
                       reserved = g.value("memory_reserved_mb", 0ULL) << 20;
    *memory = Memory{total, total - used - reserved, used + reserved};
    return kSuccess;
  });
}

int nvmlDeviceGetMemoryInfo_v2(void* device, MemoryV2* memory) {
  if (memory->version != (sizeof(MemoryV2) | (2u << 24))) return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  return WithGpu(device, [&](const json& g) {
    unsigned long long total = g.value("memory_total_mb", 0ULL) << 20, used = g.value("memory_used_mb", 0ULL) << 20,
                       reserved = g.value("memory_reserved_mb", 0ULL) << 20;
    *memory = MemoryV2{memory->version, total, reserved, total - used - reserved, used};
    return kSuccess;
  });
}

int nvmlDeviceGetUtilizationRates(void* device, Utilization* u) {
  return WithGpu(device, [&](const json& g) {
    if (!g.contains("util_gpu")) return kNotSupported;
    *u = Utilization{g.value("util_gpu", 0u), g.value("util_mem", 0u)};
    return kSuccess;
  });
}

int nvmlDeviceGetTemperature(void* device, int sensor, unsigned* t) {
  return sensor == 0 ? Unsigned(device, "temperature_c", t) : kNotSupported;
}
int nvmlDeviceGetPowerUsage(void* device, unsigned* mw) { return Unsigned(device, "power_mw", mw); }
int nvmlDeviceGetEnforcedPowerLimit(void* device, unsigned* mw) { return Unsigned(device, "power_limit_mw", mw); }
int nvmlDeviceGetClockInfo(void* device, int type, unsigned* mhz) {
  return type == 1 ? Unsigned(device, "sm_clock_mhz", mhz) : kNotSupported;
}

int nvmlDeviceGetTotalEccErrors(void* device, int type, int counter, unsigned long long* n) {
  return WithGpu(device, [&](const json& g) {
    const char* key = type == 1 ? "ecc_uncorrected" : "ecc_corrected";
    if (counter != 0 || !g.contains(key)) return kNotSupported;
    *n = g[key].get<unsigned long long>();
    return kSuccess;
  });
}

int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned* count, ProcessInfo* infos) {
  return Processes(device, "processes", count, infos);
}
int nvmlDeviceGetGraphicsRunningProcesses_v3(void* device, unsigned* count, ProcessInfo* infos) {
  return Processes(device, "graphics_processes", count, infos);
}

int nvmlDeviceGetMigMode(void* device, unsigned* current, unsigned* pending) {
  return WithGpu(device, [&](const json& g) {
    if (!g.contains("mig")) return kNotSupported;
    *current = *pending = 1;
    return kSuccess;
  });
}

int nvmlDeviceGetMaxMigDeviceCount(void* device, unsigned* count) {
  return WithGpu(device, [&](const json& g) {
    if (!g.contains("mig")) return kNotSupported;
    *count = 7;
    return kSuccess;
  });
}

// Instances 0..n-1 exist; asking past them is NOT_FOUND (6), as for a slot without one.
int nvmlDeviceGetMigDeviceHandleByIndex(void* device, unsigned index, void** mig) {
  return WithGpu(device, [&](const json& g) {
    if (!g.contains("mig")) return kNotSupported;
    if (index >= g["mig"].size()) return 6;
    *mig = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(device) | (static_cast<uintptr_t>(index) + 1) << 16);
    return kSuccess;
  });
}

int nvmlEventSetCreate(void** set) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  *set = &s.set_token;
  return kSuccess;
}
int nvmlEventSetFree(void*) { return kSuccess; }
int nvmlDeviceRegisterEvents(void* device, unsigned long long, void*) {
  return WithGpu(device, [](const json&) { return kSuccess; });
}

int nvmlEventSetWait_v2(void*, EventData* data, unsigned) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  Refresh(s);
  json xids = s.doc.value("xids", json::array());
  if (s.xids_delivered >= xids.size()) return kTimeout;
  const json& x = xids[s.xids_delivered++];
  std::memset(data, 0, sizeof(*data));
  data->device = reinterpret_cast<void*>(static_cast<uintptr_t>(x.value("gpu", 0)) + 1);
  data->event_type = 0x8;
  data->event_data = x.value("xid", 0ULL);
  return kSuccess;
}

}  // extern "C"
