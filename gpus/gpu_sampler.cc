#include "gpus/gpu_sampler.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "core/app_status.h"
#include "gpus/nvml.h"

namespace torchxd::gpus {
namespace {

constexpr int kMaxAncestors = 64;

// /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces and ')'.
bool ReadStat(const std::string& proc_root, int pid, int* ppid, std::string* comm) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  if (comm != nullptr) *comm = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 1));
  std::string state;
  return static_cast<bool>(rest >> state >> *ppid);
}

// A device's reading. A MIG instance has its own memory and processes; its
// utilization NVML does not give (absent), and its temperature, power, clock
// and ECC counts are its whole GPU's.
GpuReading ReadGpu(const Nvml& nvml, unsigned index, const Nvml::Slot& slot, unsigned max_processes) {
  GpuReading r;
  r.index = static_cast<int>(index);
  Nvml::Device device = slot.device;
  if (device == nullptr) {
    r.error = "NVML cannot open it";
    return r;
  }
  if (slot.mig >= 0) r.mig_parent = static_cast<int>(slot.gpu);
  if (auto uuid = nvml.Uuid(device)) r.uuid = *uuid;
  NvmlMemory mem{};
  if (int rc = nvml.Memory(device, &mem); rc == kNvmlSuccess) {
    r.mem_used_bytes = mem.used;
    r.mem_total_bytes = mem.total;
  } else if (rc != kNvmlErrorNotSupported) {
    r.error = nvml.ErrorText(rc);
    r.lost = rc == kNvmlErrorGpuIsLost;
    return r;
  }
  if (slot.mig < 0) {
    if (auto u = nvml.Utilization(device)) r.util_gpu = u->gpu, r.util_mem = u->memory;
  }
  Nvml::Device whole = slot.parent;
  r.temperature_c = nvml.TemperatureC(whole);
  r.power_mw = nvml.PowerMilliwatts(whole);
  r.power_limit_mw = nvml.PowerLimitMilliwatts(whole);
  r.sm_clock_mhz = nvml.SmClockMhz(whole);
  r.ecc_corrected = nvml.EccErrors(whole, false);
  r.ecc_uncorrected = nvml.EccErrors(whole, true);
  for (bool graphics : {false, true}) {
    for (const NvmlProcessInfo& p : nvml.Processes(device, graphics, max_processes)) {
      GpuProcess gp;
      gp.pid = static_cast<int>(p.pid);
      gp.graphics = graphics;
      if (p.used_gpu_memory != kNvmlValueNotAvailable) gp.used_bytes = p.used_gpu_memory;
      r.processes.push_back(gp);
    }
  }
  return r;
}

}  // namespace

std::optional<ProcessOwner> ReadProcessOwner(const std::string& proc_root, int pid) {
  ProcessOwner owner;
  std::ifstream status(proc_root + "/" + std::to_string(pid) + "/status");
  std::string key;
  bool found = false;
  while (status >> key) {
    if (key == "Uid:") {
      status >> owner.uid;
      found = true;
      break;
    }
    std::string rest;
    std::getline(status, rest);
  }
  if (!found) return std::nullopt;
  int ppid = 0;
  if (!ReadStat(proc_root, pid, &ppid, &owner.command)) return std::nullopt;
  for (int depth = 0; ppid > 1 && depth < kMaxAncestors; ++depth) {
    owner.ancestors.push_back(ppid);
    int next = 0;
    if (!ReadStat(proc_root, ppid, &next, nullptr)) break;
    ppid = next;
  }
  return owner;
}

GpuSampler::GpuSampler(uv_loop_t* loop, GpuSamplerOptions options, OnSnapshot on_snapshot)
    : options_(std::move(options)), on_snapshot_(std::move(on_snapshot)) {
  async_ = NewUvHandle<uv_async_t>(this);
  uv_async_init(loop, async_.get(), [](uv_async_t* h) {
    if (auto* self = static_cast<GpuSampler*>(h->data)) self->OnAsync();
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(async_.get()));
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GpuSampler::Start() { thread_ = std::thread([this] { Run(); }); }

void GpuSampler::Run() {
  auto period = std::chrono::duration<double>(options_.period_seconds);
  auto nvml = Nvml::Open(options_.nvml_library);
  std::vector<Nvml::Slot> slots;  // numbered as discovery numbers them
  if (nvml) {
    slots = (*nvml)->Slots();
    std::vector<Nvml::Device> whole;
    for (const Nvml::Slot& slot : slots) {
      if (slot.parent != nullptr && std::find(whole.begin(), whole.end(), slot.parent) == whole.end()) {
        whole.push_back(slot.parent);
      }
    }
    (*nvml)->WatchXids(whole);
  }
  for (;;) {
    GpuSnapshot snap;
    snap.at_ms = core::UnixNowMs();
    if (!nvml) {
      snap.error = nvml.error().message;
    } else {
      for (unsigned i = 0; i < slots.size(); ++i) {
        snap.gpus.push_back(ReadGpu(**nvml, i, slots[i], options_.max_processes_per_gpu));
      }
      while (auto event = (*nvml)->PollXid()) {
        // An XID is its whole GPU's: each of its MIG instances hears it.
        bool any = false;
        for (size_t i = 0; i < slots.size(); ++i) {
          if (slots[i].parent == nullptr || slots[i].parent != event->device) continue;
          snap.xids.push_back(XidEvent{static_cast<int>(i), event->event_data});
          any = true;
        }
        if (!any) snap.xids.push_back(XidEvent{-1, event->event_data});
        if (snap.xids.size() >= 1024) break;  // a storm waits for the next period
      }
      for (const GpuReading& g : snap.gpus) {
        for (const GpuProcess& p : g.processes) {
          if (snap.processes.count(p.pid)) continue;
          if (auto owner = ReadProcessOwner(options_.proc_root, p.pid)) snap.processes[p.pid] = std::move(*owner);
        }
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return;
    if (ready_) {
      snap.xids.insert(snap.xids.begin(), ready_->xids.begin(), ready_->xids.end());
      if (snap.xids.size() > 4096) snap.xids.erase(snap.xids.begin(), snap.xids.end() - 4096);
    }
    ready_ = std::move(snap);
    uv_async_send(async_.get());
    if (!nvml) return;  // nothing to read; the error stands
    wake_.wait_for(lock, period, [this] { return stopping_; });
    if (stopping_) return;
  }
}

void GpuSampler::OnAsync() {
  std::optional<GpuSnapshot> snap;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap.swap(ready_);
  }
  if (snap && on_snapshot_) on_snapshot_(std::move(*snap));
}

}  // namespace torchxd::gpus
