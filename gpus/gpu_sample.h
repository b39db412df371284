// One reading of the box's GPUs, as the sampler takes it from NVML: per GPU
// its utilization, memory, temperature, power, SM clock, ECC counts and the
// processes using it; the XID events since the last reading; and, for each
// process seen, its owner and its ancestors (so the loop can tell which
// replica's process tree holds it without reading /proc itself).
//
// Thread contract: plain values, safe from any thread.
#ifndef TORCHXD_GPUS_GPU_SAMPLE_H_
#define TORCHXD_GPUS_GPU_SAMPLE_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace torchxd::gpus {

struct GpuProcess {
  int pid = 0;
  std::optional<uint64_t> used_bytes;  // absent where NVML cannot say (no permission, MIG without it)
  bool graphics = false;               // a graphics (not compute) context
};

struct GpuReading {
  int index = 0;
  std::string uuid;
  std::string error;  // "" = read; else why NVML could not read it ("GPU is lost")
  bool lost = false;  // NVML_ERROR_GPU_IS_LOST
  int mig_parent = -1;  // a MIG instance of this whole GPU (NVML index); -1: a whole GPU
  std::optional<unsigned> util_gpu;  // % of the last sample period a kernel ran
  std::optional<unsigned> util_mem;  // % of it device memory was read or written
  std::optional<uint64_t> mem_used_bytes, mem_total_bytes;
  std::optional<unsigned> temperature_c;
  std::optional<unsigned> power_mw, power_limit_mw;
  std::optional<unsigned> sm_clock_mhz;
  std::optional<uint64_t> ecc_corrected, ecc_uncorrected;  // volatile counts
  std::vector<GpuProcess> processes;
};

struct XidEvent {
  int index = -1;  // the GPU, -1 when NVML did not say which
  uint64_t xid = 0;
};

// A process using a GPU, as /proc showed it when sampled.
struct ProcessOwner {
  uid_t uid = 0;
  std::string command;          // comm
  std::vector<int> ancestors;   // parent first, up to (not including) pid 1
};

struct GpuSnapshot {
  int64_t at_ms = 0;  // wall clock
  std::string error;  // the whole reading failed (NVML gone): why
  std::vector<GpuReading> gpus;
  std::vector<XidEvent> xids;
  std::map<int, ProcessOwner> processes;  // pid -> owner, for every pid in `gpus`
};

// What an XID means, as NVIDIA's XID table says, for the ones that matter to
// a scheduler; "" for others.
std::string XidMeaning(uint64_t xid);
// XIDs after which the GPU must not be handed out again until an admin says
// so: 79 fell off the bus, 48 double-bit ECC, 63/64 page retirement or row
// remapping, 74 NVLink, 95 uncontained ECC.
bool XidLosesGpu(uint64_t xid);

}  // namespace torchxd::gpus

#endif  // TORCHXD_GPUS_GPU_SAMPLE_H_
