#include "gpus/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>

#include "core/dl_symbols.h"

namespace torchxd::gpus {
namespace {

// Bounds on what a driver (or a broken one) may report.
constexpr unsigned kMaxGpus = 256;
constexpr unsigned kMaxMigInstances = 8;  // 7 on an A100/H100

}  // namespace

struct Nvml::Api {
  using Ret = int;
  Ret (*init)() = nullptr;
  Ret (*shutdown)() = nullptr;
  const char* (*error_string)(Ret) = nullptr;
  Ret (*count)(unsigned*) = nullptr;
  Ret (*by_index)(unsigned, Device*) = nullptr;
  Ret (*uuid)(Device, char*, unsigned) = nullptr;
  Ret (*pci)(Device, NvmlPciInfo*) = nullptr;
  Ret (*memory)(Device, NvmlMemory*) = nullptr;
  Ret (*memory_v2)(Device, NvmlMemoryV2*) = nullptr;
  Ret (*utilization)(Device, NvmlUtilization*) = nullptr;
  Ret (*temperature)(Device, int, unsigned*) = nullptr;
  Ret (*power)(Device, unsigned*) = nullptr;
  Ret (*power_limit)(Device, unsigned*) = nullptr;
  Ret (*clock)(Device, int, unsigned*) = nullptr;
  Ret (*ecc)(Device, int, int, unsigned long long*) = nullptr;
  Ret (*compute_procs)(Device, unsigned*, NvmlProcessInfo*) = nullptr;
  Ret (*graphics_procs)(Device, unsigned*, NvmlProcessInfo*) = nullptr;
  Ret (*link_state)(Device, unsigned, int*) = nullptr;
  Ret (*link_remote)(Device, unsigned, NvmlPciInfo*) = nullptr;
  Ret (*event_set_create)(void**) = nullptr;
  Ret (*event_set_free)(void*) = nullptr;
  Ret (*register_events)(Device, unsigned long long, void*) = nullptr;
  Ret (*event_wait)(void*, NvmlEventData*, unsigned) = nullptr;
  Ret (*mig_mode)(Device, unsigned*, unsigned*) = nullptr;
  Ret (*mig_max)(Device, unsigned*) = nullptr;
  Ret (*mig_at)(Device, unsigned, Device*) = nullptr;
};

namespace {

template <class Fn>
void Optional(void* lib, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(::dlsym(lib, name));
}

}  // namespace

Result<std::unique_ptr<Nvml>> Nvml::Open(const std::string& library) {
  std::unique_ptr<Nvml> nvml(new Nvml());
  nvml->lib_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml->lib_ == nullptr) {
    return Fail(Error::Unavailable("no NVML (" + library + " cannot be loaded)"));
  }
  nvml->api_ = std::make_unique<Api>();
  Api& a = *nvml->api_;
  std::string missing;
  if (!DlSymbol(nvml->lib_, "nvmlInit_v2", a.init, missing) ||
      !DlSymbol(nvml->lib_, "nvmlDeviceGetCount_v2", a.count, missing) ||
      !DlSymbol(nvml->lib_, "nvmlDeviceGetHandleByIndex_v2", a.by_index, missing)) {
    return Fail(Error::Unavailable("NVML (" + library + ") lacks " + missing));
  }
  Optional(nvml->lib_, "nvmlErrorString", a.error_string);
  Optional(nvml->lib_, "nvmlDeviceGetUUID", a.uuid);
  Optional(nvml->lib_, "nvmlDeviceGetPciInfo_v3", a.pci);
  Optional(nvml->lib_, "nvmlDeviceGetMemoryInfo", a.memory);
  Optional(nvml->lib_, "nvmlDeviceGetMemoryInfo_v2", a.memory_v2);
  Optional(nvml->lib_, "nvmlDeviceGetUtilizationRates", a.utilization);
  Optional(nvml->lib_, "nvmlDeviceGetTemperature", a.temperature);
  Optional(nvml->lib_, "nvmlDeviceGetPowerUsage", a.power);
  Optional(nvml->lib_, "nvmlDeviceGetEnforcedPowerLimit", a.power_limit);
  Optional(nvml->lib_, "nvmlDeviceGetClockInfo", a.clock);
  Optional(nvml->lib_, "nvmlDeviceGetTotalEccErrors", a.ecc);
  Optional(nvml->lib_, "nvmlDeviceGetComputeRunningProcesses_v3", a.compute_procs);
  if (a.compute_procs == nullptr) Optional(nvml->lib_, "nvmlDeviceGetComputeRunningProcesses_v2", a.compute_procs);
  Optional(nvml->lib_, "nvmlDeviceGetGraphicsRunningProcesses_v3", a.graphics_procs);
  if (a.graphics_procs == nullptr) Optional(nvml->lib_, "nvmlDeviceGetGraphicsRunningProcesses_v2", a.graphics_procs);
  Optional(nvml->lib_, "nvmlDeviceGetNvLinkState", a.link_state);
  Optional(nvml->lib_, "nvmlDeviceGetNvLinkRemotePciInfo_v2", a.link_remote);
  Optional(nvml->lib_, "nvmlEventSetCreate", a.event_set_create);
  Optional(nvml->lib_, "nvmlEventSetFree", a.event_set_free);
  Optional(nvml->lib_, "nvmlDeviceRegisterEvents", a.register_events);
  Optional(nvml->lib_, "nvmlEventSetWait_v2", a.event_wait);
  Optional(nvml->lib_, "nvmlDeviceGetMigMode", a.mig_mode);
  Optional(nvml->lib_, "nvmlDeviceGetMaxMigDeviceCount", a.mig_max);
  Optional(nvml->lib_, "nvmlDeviceGetMigDeviceHandleByIndex", a.mig_at);
  if (int rc = a.init(); rc != kNvmlSuccess) {
    return Fail(Error::Unavailable("nvmlInit failed (" + nvml->ErrorText(rc) + "; is the driver loaded?)"));
  }
  Optional(nvml->lib_, "nvmlShutdown", a.shutdown);
  return nvml;
}

Nvml::~Nvml() {
  if (api_ != nullptr) {
    if (event_set_ != nullptr && api_->event_set_free != nullptr) api_->event_set_free(event_set_);
    if (api_->shutdown != nullptr) api_->shutdown();
  }
  if (lib_ != nullptr) ::dlclose(lib_);
}

std::string Nvml::ErrorText(int code) const {
  if (api_ && api_->error_string != nullptr) {
    if (const char* text = api_->error_string(code); text != nullptr) return text;
  }
  return "NVML error " + std::to_string(code);
}

unsigned Nvml::Count() const {
  unsigned n = 0;
  return api_->count(&n) == kNvmlSuccess ? n : 0;
}

int Nvml::DeviceAt(unsigned index, Device* device) const { return api_->by_index(index, device); }

std::vector<Nvml::Device> Nvml::MigInstances(Device d) const {
  std::vector<Device> out;
  unsigned current = 0, pending = 0, max = 0;
  if (api_->mig_mode == nullptr || api_->mig_max == nullptr || api_->mig_at == nullptr) return out;
  // NVML_DEVICE_MIG_ENABLE = 1; a GPU without MIG answers NOT_SUPPORTED.
  if (api_->mig_mode(d, &current, &pending) != kNvmlSuccess || current != 1) return out;
  if (api_->mig_max(d, &max) != kNvmlSuccess) return out;
  for (unsigned k = 0; k < std::min(max, kMaxMigInstances); ++k) {
    Device mig = nullptr;
    if (api_->mig_at(d, k, &mig) == kNvmlSuccess && mig != nullptr) out.push_back(mig);
  }
  return out;
}

std::vector<Nvml::Slot> Nvml::Slots() const {
  std::vector<Slot> out;
  unsigned count = std::min(Count(), kMaxGpus);
  for (unsigned i = 0; i < count; ++i) {
    Device d = nullptr;
    if (DeviceAt(i, &d) != kNvmlSuccess) d = nullptr;
    std::vector<Device> migs = d == nullptr ? std::vector<Device>{} : MigInstances(d);
    if (migs.empty()) {
      out.push_back(Slot{d, d, i, -1});
      continue;
    }
    for (size_t k = 0; k < migs.size(); ++k) out.push_back(Slot{migs[k], d, i, static_cast<int>(k)});
  }
  return out;
}

std::optional<std::string> Nvml::Uuid(Device d) const {
  char uuid[96] = {0};
  if (api_->uuid == nullptr || api_->uuid(d, uuid, sizeof(uuid) - 1) != kNvmlSuccess) return std::nullopt;
  return std::string(uuid);
}

std::optional<NvmlPciInfo> Nvml::Pci(Device d) const {
  NvmlPciInfo pci{};
  if (api_->pci == nullptr || api_->pci(d, &pci) != kNvmlSuccess) return std::nullopt;
  pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
  return pci;
}

int Nvml::Memory(Device d, NvmlMemory* out) const {
  if (api_->memory_v2 != nullptr) {
    NvmlMemoryV2 v2{};
    v2.version = kNvmlMemoryV2Version;
    int rc = api_->memory_v2(d, &v2);
    if (rc == kNvmlSuccess) {
      *out = NvmlMemory{v2.total, v2.free, v2.used};
      return rc;
    }
    // A driver older than the struct answers "not supported" or a version mismatch: ask v1.
    if (rc != kNvmlErrorNotSupported && rc != kNvmlErrorArgumentVersionMismatch) return rc;
  }
  return api_->memory == nullptr ? kNvmlErrorNotSupported : api_->memory(d, out);
}

std::optional<NvmlUtilization> Nvml::Utilization(Device d) const {
  NvmlUtilization u{};
  if (api_->utilization == nullptr || api_->utilization(d, &u) != kNvmlSuccess) return std::nullopt;
  return u;
}

std::optional<unsigned> Nvml::TemperatureC(Device d) const {
  unsigned t = 0;
  if (api_->temperature == nullptr || api_->temperature(d, /*NVML_TEMPERATURE_GPU*/ 0, &t) != kNvmlSuccess) {
    return std::nullopt;
  }
  return t;
}

std::optional<unsigned> Nvml::PowerMilliwatts(Device d) const {
  unsigned mw = 0;
  if (api_->power == nullptr || api_->power(d, &mw) != kNvmlSuccess) return std::nullopt;
  return mw;
}

std::optional<unsigned> Nvml::PowerLimitMilliwatts(Device d) const {
  unsigned mw = 0;
  if (api_->power_limit == nullptr || api_->power_limit(d, &mw) != kNvmlSuccess) return std::nullopt;
  return mw;
}

std::optional<unsigned> Nvml::SmClockMhz(Device d) const {
  unsigned mhz = 0;
  if (api_->clock == nullptr || api_->clock(d, /*NVML_CLOCK_SM*/ 1, &mhz) != kNvmlSuccess) return std::nullopt;
  return mhz;
}

std::optional<unsigned long long> Nvml::EccErrors(Device d, bool uncorrected) const {
  unsigned long long n = 0;
  // NVML_MEMORY_ERROR_TYPE_{CORRECTED=0,UNCORRECTED=1}, NVML_VOLATILE_ECC=0.
  if (api_->ecc == nullptr || api_->ecc(d, uncorrected ? 1 : 0, 0, &n) != kNvmlSuccess) return std::nullopt;
  return n;
}

std::vector<NvmlProcessInfo> Nvml::Processes(Device d, bool graphics, unsigned limit) const {
  auto fn = graphics ? api_->graphics_procs : api_->compute_procs;
  std::vector<NvmlProcessInfo> out;
  if (fn == nullptr || limit == 0) return out;
  out.resize(limit);
  unsigned n = limit;
  int rc = fn(d, &n, out.data());
  // More than `limit` processes: NVML fills none (INSUFFICIENT_SIZE), and the
  // reading stays empty rather than growing without bound.
  if (rc != kNvmlSuccess) return {};
  out.resize(std::min(n, limit));
  return out;
}

bool Nvml::NvlinkActive(Device d, unsigned link) const {
  int active = 0;
  return api_->link_state != nullptr && api_->link_state(d, link, &active) == kNvmlSuccess && active != 0;
}

std::optional<NvmlPciInfo> Nvml::NvlinkRemote(Device d, unsigned link) const {
  NvmlPciInfo pci{};
  if (api_->link_remote == nullptr || api_->link_remote(d, link, &pci) != kNvmlSuccess) return std::nullopt;
  pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
  return pci;
}

bool Nvml::WatchXids(const std::vector<Device>& devices) {
  if (api_->event_set_create == nullptr || api_->register_events == nullptr || api_->event_wait == nullptr) {
    return false;
  }
  if (event_set_ == nullptr && api_->event_set_create(&event_set_) != kNvmlSuccess) {
    event_set_ = nullptr;
    return false;
  }
  bool any = false;
  for (Device d : devices) {
    if (d != nullptr && api_->register_events(d, kNvmlEventXidCritical, event_set_) == kNvmlSuccess) any = true;
  }
  return any;
}

std::optional<NvmlEventData> Nvml::PollXid() {
  if (event_set_ == nullptr) return std::nullopt;
  NvmlEventData data{};
  if (api_->event_wait(event_set_, &data, 0) != kNvmlSuccess) return std::nullopt;
  return data;
}

std::string SysfsBusId(const char* nvml_bus_id) {
  std::string id(nvml_bus_id);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return id.size() > 12 ? id.substr(id.size() - 12) : id;
}

}  // namespace torchxd::gpus
