#include "admission/gpu_topology.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_parse.h"
#include "core/json_reader.h"

namespace torchxd::admission {

using nlohmann::json;

int GpuTopology::UsableCount() const {
  return static_cast<int>(std::count_if(gpus.begin(), gpus.end(), [](const Gpu& g) { return g.usable; }));
}

int GpuTopology::Links(int a, int b) const {
  auto count = [&](int from, int to) {
    auto it = gpus[from].nvlink.find(to);
    return it == gpus[from].nvlink.end() ? 0 : it->second;
  };
  return std::max(count(a, b), count(b, a));
}

int GpuTopology::ComputePairScore(int a, int b) const {
  if (a == b) return 0;
  int score = 100 * Links(a, b);
  if (gpus[a].numa_node >= 0 && gpus[a].numa_node == gpus[b].numa_node) score += 10;
  return score;
}

void GpuTopology::Index() {
  scores_.clear();
  std::vector<int> scores(gpus.size() * gpus.size());
  for (int a = 0; a < size(); ++a) {
    for (int b = 0; b < size(); ++b) scores[a * size() + b] = ComputePairScore(a, b);
  }
  scores_ = std::move(scores);
}

Result<GpuTopology> ParseGpuTopology(std::string_view text) {
  auto parsed = core::ParseJson(text);
  if (!parsed) return Fail(parsed.error());
  if (!parsed->is_object()) return Fail(Error::InvalidArgument("expected a JSON object with a `gpus` list"));
  core::JsonReader top(*parsed, "", {"gpus"});
  const json* list = top.Field("gpus");
  if (list == nullptr || !list->is_array()) {
    return Fail(Error::InvalidArgument("gpus: expected a list of GPUs, got " +
                                       (list == nullptr ? std::string("nothing") : core::JsonTypeName(*list))));
  }
  if (auto done = top.Finish(); !done) return Fail(done.error());
  constexpr size_t kMaxGpus = 1024;
  if (list->size() > kMaxGpus) {
    return Fail(Error::InvalidArgument("gpus: " + std::to_string(list->size()) + " GPUs; at most " +
                                       std::to_string(kMaxGpus)));
  }
  GpuTopology topo;
  topo.gpus.resize(list->size());
  std::set<int> seen;
  for (size_t i = 0; i < list->size(); ++i) {
    std::string path = core::JsonPathIndex("gpus", i);
    const json& node = (*list)[i];
    if (!node.is_object()) return Fail(Error::InvalidArgument(path + ": expected an object, got " + core::JsonTypeName(node)));
    core::JsonReader r(node, path, {"index", "uuid", "pci_bus_id", "numa_node", "memory_mb", "nvlink", "mig_parent"});
    std::optional<int> index = r.OptionalInt("index");
    Gpu g;
    g.uuid = r.String("uuid", "");
    g.pci_bus_id = r.String("pci_bus_id", "");
    g.numa_node = r.Int("numa_node", -1);
    g.memory_mb = r.Int("memory_mb", 0);
    std::map<std::string, int> links = r.IntMap("nvlink");
    std::optional<int64_t> mig_parent = r.OptionalInt("mig_parent", 0, 255);
    if (auto done = r.Finish(); !done) return Fail(done.error());
    if (mig_parent) g.mig_parent = static_cast<int>(*mig_parent);
    if (!index) return Fail(Error::InvalidArgument(core::JsonPathKey(path, "index") + ": required"));
    if (*index < 0 || *index >= static_cast<int>(list->size())) {
      return Fail(Error::InvalidArgument(core::JsonPathKey(path, "index") + ": " + std::to_string(*index) +
                                         " is not in 0.." + std::to_string(list->size() - 1) +
                                         " (indices number the GPUs from 0 without gaps)"));
    }
    if (!seen.insert(*index).second) {
      return Fail(Error::InvalidArgument(core::JsonPathKey(path, "index") + ": GPU " + std::to_string(*index) +
                                         " is listed twice"));
    }
    if (g.numa_node < -1) return Fail(Error::InvalidArgument(core::JsonPathKey(path, "numa_node") + ": must be >= 0"));
    if (g.memory_mb < 0) return Fail(Error::InvalidArgument(core::JsonPathKey(path, "memory_mb") + ": must be >= 0"));
    for (const auto& [peer, count] : links) {
      std::string at = core::JsonPathKey(core::JsonPathKey(path, "nvlink"), peer);
      int p = -1;
      size_t used = 0;
      try {
        p = std::stoi(peer, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != peer.size() || p < 0 || p >= static_cast<int>(list->size()) || p == *index) {
        return Fail(Error::InvalidArgument(at + ": `" + peer + "` is not the index of another GPU"));
      }
      if (count < 0 || count > 64) return Fail(Error::InvalidArgument(at + ": links must be 0..64"));
      if (count > 0) g.nvlink[p] = count;
    }
    g.index = *index;
    topo.gpus[*index] = std::move(g);
  }
  topo.Index();
  return topo;
}

Result<void> ExcludeGpus(GpuTopology& topology, std::string_view list) {
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    std::string item(list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    start = comma == std::string_view::npos ? list.size() : comma + 1;
    if (item.empty()) continue;
    bool found = false;
    for (Gpu& g : topology.gpus) {
      bool match = item == std::to_string(g.index) || (!g.uuid.empty() && item == g.uuid) ||
                   (!g.pci_bus_id.empty() && item == g.pci_bus_id);
      if (!match) continue;
      g.usable = false;
      g.unusable_reason = "excluded";
      found = true;
    }
    if (!found) {
      return Fail(Error::InvalidArgument("--exclude-gpus: `" + item + "` is not a GPU of this box (" +
                                         std::to_string(topology.size()) +
                                         " GPUs; use an index, a UUID or a PCI bus id)"));
    }
  }
  return {};
}

std::string GpuTopologyToJson(const GpuTopology& topology) {
  json gpus = json::array();
  for (const Gpu& g : topology.gpus) {
    json links = json::object();
    for (const auto& [peer, count] : g.nvlink) links[std::to_string(peer)] = count;
    json j = {{"index", g.index}, {"uuid", g.uuid}, {"pci_bus_id", g.pci_bus_id}, {"numa_node", g.numa_node},
              {"memory_mb", g.memory_mb}, {"nvlink", links}};
    if (!g.usable) j["unusable"] = g.unusable_reason;
    if (g.mig_parent >= 0) j["mig_parent"] = g.mig_parent;
    gpus.push_back(std::move(j));
  }
  return json{{"gpus", gpus}}.dump();
}

}  // namespace torchxd::admission
