// Nvml: the NVIDIA Management Library entry points torchxd uses, dlopen'ed
// (nvml.h is not packaged in Debian main, so the few declarations needed are
// written here, with NVML's own layouts). One object = one dlopen + nvmlInit;
// the destructor shuts NVML down. Entry points a driver lacks are null and
// their readings absent, never an error.
//
// Thread contract: one Nvml per thread (discovery at start-up, the sampler's
// thread); its calls block on the driver and never belong on the loop.
#ifndef TORCHXD_GPUS_NVML_H_
#define TORCHXD_GPUS_NVML_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace torchxd::gpus {

// NVML's return codes that torchxd tells apart.
inline constexpr int kNvmlSuccess = 0;
inline constexpr int kNvmlErrorNotSupported = 3;
inline constexpr int kNvmlErrorInsufficientSize = 7;
inline constexpr int kNvmlErrorTimeout = 10;
inline constexpr int kNvmlErrorGpuIsLost = 15;
inline constexpr int kNvmlErrorArgumentVersionMismatch = 25;

struct NvmlPciInfo {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct NvmlMemory {  // nvmlMemory_t, bytes
  unsigned long long total, free, used;
};
struct NvmlMemoryV2 {  // nvmlMemory_v2_t, bytes: `used` leaves out what the driver reserves
  unsigned version;
  unsigned long long total, reserved, free, used;
};
// NVML_STRUCT_VERSION(Memory, 2): the struct's size and the version in the top byte.
static_assert(sizeof(NvmlMemoryV2) == 40, "nvmlMemory_v2_t's layout");
inline constexpr unsigned kNvmlMemoryV2Version = sizeof(NvmlMemoryV2) | (2u << 24);
struct NvmlUtilization {  // nvmlUtilization_t, percent over the driver's last sample period
  unsigned gpu, memory;
};
struct NvmlProcessInfo {  // nvmlProcessInfo_t (the _v2/_v3 queries)
  unsigned pid;
  unsigned long long used_gpu_memory;  // bytes; ~0ULL = not available
  unsigned gpu_instance_id, compute_instance_id;
};
struct NvmlEventData {  // nvmlEventData_t
  void* device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID for an XID event
  unsigned gpu_instance_id, compute_instance_id;
};
inline constexpr unsigned long long kNvmlEventXidCritical = 0x8;  // nvmlEventTypeXidCriticalError
inline constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

class Nvml {
 public:
  using Device = void*;
  // One device admission hands out: a whole GPU, or a MIG instance of a GPU
  // in MIG mode (each then its own device, its parent not handed out).
  struct Slot {
    Device device = nullptr;   // null: NVML cannot open the GPU
    Device parent = nullptr;   // the whole GPU (itself unless a MIG instance)
    unsigned gpu = 0;          // the whole GPU's NVML index
    int mig = -1;              // the MIG instance's index on its GPU; -1: a whole GPU
  };
  // dlopen(`library`) and nvmlInit_v2; the error says which failed and why.
  [[nodiscard]] static Result<std::unique_ptr<Nvml>> Open(const std::string& library);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // nvmlErrorString where the library has it, else "NVML error N".
  std::string ErrorText(int code) const;

  unsigned Count() const;
  // The device at `index`; NVML's code when it cannot open it (lost, unhealthy).
  int DeviceAt(unsigned index, Device* device) const;
  // Every device admission hands out, in the order discovery and the sampler
  // both number them: GPUs by NVML index, a GPU in MIG mode replaced by its
  // MIG instances (those that exist; none yet: the whole GPU).
  std::vector<Slot> Slots() const;
  // The GPU's MIG instances when MIG mode is on; empty otherwise.
  std::vector<Device> MigInstances(Device d) const;

  std::optional<std::string> Uuid(Device d) const;
  std::optional<NvmlPciInfo> Pci(Device d) const;
  // Memory: the code too, since a lost GPU answers this first. `used` is what
  // nvidia-smi shows: the driver's reserved memory left out where NVML can say.
  int Memory(Device d, NvmlMemory* out) const;
  std::optional<NvmlUtilization> Utilization(Device d) const;
  std::optional<unsigned> TemperatureC(Device d) const;
  std::optional<unsigned> PowerMilliwatts(Device d) const;
  std::optional<unsigned> PowerLimitMilliwatts(Device d) const;
  std::optional<unsigned> SmClockMhz(Device d) const;
  // Volatile (since the driver loaded) ECC error counts; absent without ECC.
  std::optional<unsigned long long> EccErrors(Device d, bool uncorrected) const;
  // Compute and graphics processes using the device (at most `limit` of each).
  std::vector<NvmlProcessInfo> Processes(Device d, bool graphics, unsigned limit) const;
  bool NvlinkActive(Device d, unsigned link) const;
  std::optional<NvmlPciInfo> NvlinkRemote(Device d, unsigned link) const;

  // XID events: Watch registers every device once; PollXid returns the next
  // pending event without waiting (nullopt when there is none).
  bool WatchXids(const std::vector<Device>& devices);
  std::optional<NvmlEventData> PollXid();

 private:
  Nvml() = default;
  struct Api;
  std::unique_ptr<Api> api_;
  void* lib_ = nullptr;
  void* event_set_ = nullptr;
};

// NVML's "00000000:07:00.0" as sysfs names it: "0000:07:00.0".
std::string SysfsBusId(const char* nvml_bus_id);

}  // namespace torchxd::gpus

#endif  // TORCHXD_GPUS_NVML_H_
