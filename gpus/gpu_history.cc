#include "gpus/gpu_history.h"

#include <algorithm>
#include <cstring>

namespace torchxd::gpus {
namespace {

constexpr char kMagic[8] = {'T', 'X', 'D', 'G', 'P', 'U', 'H', '1'};
constexpr size_t kMaxUuid = 96;
constexpr size_t kSums = 6;
// Readings in one minute: one per 0.1 s, the shortest period, with room to spare.
constexpr uint64_t kMaxPerMinute = 1'000'000;

template <class T>
void Put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Reads what Put wrote; false once `in` is too short.
template <class T>
bool Take(std::string_view& in, T& v) {
  if (in.size() < sizeof v) return false;
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return true;
}

bool SlotValid(const HistorySlot& s) {
  auto pct = [](uint8_t v) { return v <= 100 || v == HistorySlot::kNoValue; };
  return pct(s.util_gpu) && pct(s.util_mem);
}

uint8_t Pct(const std::optional<unsigned>& v) {
  return v ? static_cast<uint8_t>(std::min(*v, 100u)) : HistorySlot::kNoValue;
}

}  // namespace

GpuHistory::PerGpu* GpuHistory::Of(const std::string& uuid) {
  for (PerGpu& g : gpus_) {
    if (g.uuid == uuid) return &g;
  }
  if (gpus_.size() >= kMaxGpus || uuid.empty() || uuid.size() > kMaxUuid) return nullptr;
  gpus_.emplace_back();
  gpus_.back().uuid = uuid;
  return &gpus_.back();
}

const GpuHistory::PerGpu* GpuHistory::Find(const std::string& uuid) const {
  for (const PerGpu& g : gpus_) {
    if (g.uuid == uuid) return &g;
  }
  return nullptr;
}

void GpuHistory::Add(int64_t at_ms, const std::vector<GpuReading>& gpus) {
  if (at_ms <= 0) return;
  auto second = static_cast<uint32_t>(at_ms / 1000);
  uint32_t minute = second / 60;
  for (const GpuReading& r : gpus) {
    PerGpu* g = Of(r.uuid);
    if (g == nullptr || !r.error.empty()) continue;
    HistorySlot fine;
    fine.at = second;
    fine.util_gpu = Pct(r.util_gpu);
    fine.util_mem = Pct(r.util_mem);
    if (r.mem_used_bytes) fine.mem_used_mb = static_cast<uint32_t>(std::min<uint64_t>(*r.mem_used_bytes >> 20, UINT32_MAX - 1));
    g->fine[second % kFineSlots] = fine;
    if (g->minute != minute) {
      g->minute = minute;
      g->sum_gpu = g->n_gpu = g->sum_mem = g->n_mem = g->sum_used = g->n_used = 0;
    }
    if (fine.util_gpu != HistorySlot::kNoValue) g->sum_gpu += fine.util_gpu, ++g->n_gpu;
    if (fine.util_mem != HistorySlot::kNoValue) g->sum_mem += fine.util_mem, ++g->n_mem;
    if (fine.mem_used_mb != HistorySlot::kNoMemory) g->sum_used += fine.mem_used_mb, ++g->n_used;
    HistorySlot coarse;
    coarse.at = minute;
    if (g->n_gpu) coarse.util_gpu = static_cast<uint8_t>((g->sum_gpu + g->n_gpu / 2) / g->n_gpu);
    if (g->n_mem) coarse.util_mem = static_cast<uint8_t>((g->sum_mem + g->n_mem / 2) / g->n_mem);
    if (g->n_used) coarse.mem_used_mb = static_cast<uint32_t>((g->sum_used + g->n_used / 2) / g->n_used);
    g->coarse[minute % kCoarseSlots] = coarse;
  }
}

HistorySeries GpuHistory::Query(const std::string& uuid, int64_t from_ms, int64_t to_ms, int64_t now_ms,
                                int max_points) const {
  HistorySeries out;
  const PerGpu* g = Find(uuid);
  max_points = std::clamp(max_points, 1, kMaxPoints);
  bool fine = from_ms >= now_ms - int64_t{kFineSlots} * 1000;
  int64_t unit_ms = fine ? 1000 : 60000;
  int64_t slots = fine ? kFineSlots : kCoarseSlots;
  const std::vector<HistorySlot>* ring = g == nullptr ? nullptr : fine ? &g->fine : &g->coarse;
  int64_t last = std::min(to_ms, now_ms) / unit_ms;
  int64_t first = std::max(from_ms / unit_ms, now_ms / unit_ms - slots + 1);
  if (from_ms < 0 || last < first) return out;
  int64_t span = last - first + 1;
  int64_t per_point = (span + max_points - 1) / max_points;
  out.step_s = static_cast<int>(per_point * unit_ms / 1000);
  for (int64_t start = first; start <= last; start += per_point) {
    uint64_t sums[3] = {0, 0, 0}, counts[3] = {0, 0, 0};
    for (int64_t u = start; ring != nullptr && u < start + per_point && u <= last; ++u) {
      const HistorySlot& s = (*ring)[static_cast<size_t>(u % slots)];
      if (s.at != static_cast<uint32_t>(u)) continue;
      if (s.util_gpu != HistorySlot::kNoValue) sums[0] += s.util_gpu, ++counts[0];
      if (s.util_mem != HistorySlot::kNoValue) sums[1] += s.util_mem, ++counts[1];
      if (s.mem_used_mb != HistorySlot::kNoMemory) sums[2] += s.mem_used_mb, ++counts[2];
    }
    auto mean = [&](int k) -> std::optional<double> {
      if (counts[k] == 0) return std::nullopt;
      return static_cast<double>(sums[k]) / static_cast<double>(counts[k]);
    };
    out.at_ms.push_back(start * unit_ms);
    out.util_gpu.push_back(mean(0));
    out.util_mem.push_back(mean(1));
    out.mem_used_mb.push_back(mean(2));
  }
  return out;
}

std::string GpuHistory::Serialize() const {
  std::string out;
  out.reserve(12 + gpus_.size() * (BytesPerGpu() + 160));
  out.append(kMagic, sizeof kMagic);
  Put(out, static_cast<uint32_t>(gpus_.size()));
  for (const PerGpu& g : gpus_) {
    Put(out, static_cast<uint8_t>(g.uuid.size()));
    out += g.uuid;
    Put(out, g.minute);
    for (uint64_t v : {g.sum_gpu, g.n_gpu, g.sum_mem, g.n_mem, g.sum_used, g.n_used}) Put(out, v);
    out.append(reinterpret_cast<const char*>(g.fine.data()), g.fine.size() * sizeof(HistorySlot));
    out.append(reinterpret_cast<const char*>(g.coarse.data()), g.coarse.size() * sizeof(HistorySlot));
  }
  return out;
}

size_t GpuHistory::MaxSerializedBytes() {
  return sizeof kMagic + 4 + kMaxGpus * (1 + kMaxUuid + 4 + kSums * 8 + BytesPerGpu());
}

Result<void> GpuHistory::Restore(std::string_view in) {
  auto bad = [](const std::string& why) { return Fail(Error::InvalidArgument("GPU history: " + why)); };
  if (in.size() < sizeof kMagic || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0) {
    return bad("not a GPU history file (or another version of it)");
  }
  in.remove_prefix(sizeof kMagic);
  uint32_t count = 0;
  if (!Take(in, count)) return bad("truncated header");
  if (count > kMaxGpus) return bad("declares " + std::to_string(count) + " GPUs, at most " + std::to_string(kMaxGpus));
  std::vector<PerGpu> gpus(count);
  for (PerGpu& g : gpus) {
    uint8_t len = 0;
    if (!Take(in, len) || len == 0 || len > kMaxUuid || in.size() < len) return bad("truncated or bad GPU UUID");
    g.uuid.assign(in.data(), len);
    in.remove_prefix(len);
    if (!Take(in, g.minute)) return bad("truncated");
    for (uint64_t* v : {&g.sum_gpu, &g.n_gpu, &g.sum_mem, &g.n_mem, &g.sum_used, &g.n_used}) {
      if (!Take(in, *v)) return bad("truncated");
    }
    if (g.n_gpu > kMaxPerMinute || g.n_mem > kMaxPerMinute || g.n_used > kMaxPerMinute || g.sum_gpu > 100 * g.n_gpu ||
        g.sum_mem > 100 * g.n_mem || g.sum_used > uint64_t{UINT32_MAX} * g.n_used) {
      return bad("a minute's running sums out of range for " + g.uuid);
    }
    for (std::vector<HistorySlot>* ring : {&g.fine, &g.coarse}) {
      size_t bytes = ring->size() * sizeof(HistorySlot);
      if (in.size() < bytes) return bad("truncated slots of " + g.uuid);
      std::memcpy(ring->data(), in.data(), bytes);
      in.remove_prefix(bytes);
      if (!std::all_of(ring->begin(), ring->end(), SlotValid)) return bad("a utilization over 100% for " + g.uuid);
    }
  }
  if (!in.empty()) return bad(std::to_string(in.size()) + " bytes past its end");
  gpus_ = std::move(gpus);
  return {};
}

}  // namespace torchxd::gpus
