#include "admission/gpu_placement.h"

#include <algorithm>
#include <numeric>

namespace torchxd::admission {
namespace {

struct Score {
  int preferred = 0;
  long locality = 0;
  long affinity = 0;
  long pairable = 0;
  std::vector<int> gpus;

  // Better when greater on 1-4, then lexicographically smaller indices.
  bool BetterThan(const Score& o) const {
    if (preferred != o.preferred) return preferred > o.preferred;
    if (locality != o.locality) return locality > o.locality;
    if (affinity != o.affinity) return affinity > o.affinity;
    if (pairable != o.pairable) return pairable > o.pairable;
    return gpus < o.gpus;
  }
};

class Picker {
 public:
  Picker(const GpuTopology& t, const std::vector<bool>& free, const std::vector<int>& app_gpus,
         const std::vector<bool>& prefer)
      : t_(t), app_gpus_(app_gpus), prefer_(prefer) {
    for (int i = 0; i < t.size(); ++i) {
      if (i < static_cast<int>(free.size()) && free[i]) free_.push_back(i);
    }
  }

  const std::vector<int>& free() const { return free_; }

  Score Evaluate(const std::vector<int>& set) const {
    Score s;
    s.gpus = set;
    for (size_t a = 0; a < set.size(); ++a) {
      if (!prefer_.empty() && prefer_[set[a]]) ++s.preferred;
      for (size_t b = a + 1; b < set.size(); ++b) s.locality += t_.PairScore(set[a], set[b]);
      for (int g : app_gpus_) s.affinity += t_.PairScore(set[a], g);
    }
    // What stays free: each one's best partner among the others left.
    for (int g : free_) {
      if (std::binary_search(set.begin(), set.end(), g)) continue;
      int best = 0;
      for (int h : free_) {
        if (h != g && !std::binary_search(set.begin(), set.end(), h)) best = std::max(best, t_.PairScore(g, h));
      }
      s.pairable += best;
    }
    return s;
  }

  std::vector<int> Exhaustive(int k) const {
    std::vector<int> idx(k);
    std::iota(idx.begin(), idx.end(), 0);
    std::optional<Score> best;
    const int n = static_cast<int>(free_.size());
    std::vector<int> set(k);
    for (;;) {
      for (int i = 0; i < k; ++i) set[i] = free_[idx[i]];
      Score s = Evaluate(set);
      if (!best || s.BetterThan(*best)) best = std::move(s);
      int i = k - 1;
      while (i >= 0 && idx[i] == n - k + i) --i;
      if (i < 0) break;
      ++idx[i];
      for (int j = i + 1; j < k; ++j) idx[j] = idx[j - 1] + 1;
    }
    return best->gpus;
  }

  // From each free GPU as a seed, add the GPU that links best to those taken
  // (preferred ones first, ties to the lower index); keep the best result.
  std::vector<int> Greedy(int k) const {
    std::optional<Score> best;
    for (int seed : free_) {
      std::vector<int> set = {seed};
      while (static_cast<int>(set.size()) < k) {
        int pick = -1;
        long pick_score = -1;
        bool pick_preferred = false;
        for (int g : free_) {
          if (std::find(set.begin(), set.end(), g) != set.end()) continue;
          long score = 0;
          for (int s : set) score += t_.PairScore(g, s);
          bool preferred = !prefer_.empty() && prefer_[g];
          if (pick < 0 || (preferred && !pick_preferred) || (preferred == pick_preferred && score > pick_score)) {
            pick = g, pick_score = score, pick_preferred = preferred;
          }
        }
        set.push_back(pick);
      }
      std::sort(set.begin(), set.end());
      Score s = Evaluate(set);
      if (!best || s.BetterThan(*best)) best = std::move(s);
    }
    return best->gpus;
  }

 private:
  const GpuTopology& t_;
  const std::vector<int>& app_gpus_;
  const std::vector<bool>& prefer_;
  std::vector<int> free_;
};

// C(n, k), saturating at limit + 1.
long Choose(int n, int k, long limit) {
  long c = 1;
  for (int i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;
    if (c > limit) return limit + 1;
  }
  return c;
}

}  // namespace

std::optional<std::vector<int>> PickGpus(const GpuTopology& topology, const std::vector<bool>& free, int count,
                                         const std::vector<int>& app_gpus, const std::vector<bool>& prefer) {
  if (count <= 0) return std::vector<int>{};
  Picker picker(topology, free, app_gpus, prefer);
  int n = static_cast<int>(picker.free().size());
  if (n < count) return std::nullopt;
  if (Choose(n, count, kMaxCandidates) <= kMaxCandidates) return picker.Exhaustive(count);
  return picker.Greedy(count);
}

std::optional<std::vector<std::vector<int>>> PlaceGang(const GpuTopology& topology, std::vector<bool> free,
                                                       const std::vector<int>& counts, const std::vector<bool>& prefer) {
  std::vector<std::vector<int>> out(counts.size());
  int total = std::accumulate(counts.begin(), counts.end(), 0);
  if (total == 0) return out;
  if (std::count(free.begin(), free.end(), true) < total) return std::nullopt;
  std::vector<size_t> order(counts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return counts[a] > counts[b]; });
  std::vector<int> app_gpus;
  for (size_t i : order) {
    if (counts[i] == 0) break;
    auto set = PickGpus(topology, free, counts[i], app_gpus, prefer);
    if (!set) return std::nullopt;
    for (int g : *set) {
      free[g] = false;
      app_gpus.push_back(g);
    }
    out[i] = std::move(*set);
  }
  return out;
}

}  // namespace torchxd::admission
