// Named resources (`-h gpu.small`, `"resource": "cpu.small"`): TorchX's generic
// table (cpu.*, gpu.*; GiB = 1024 MB), its AWS table (aws_*; memory taxed by
// 0.96, instance-type capability, EFA / Neuron devices), and user-defined ones
// from a JSON file: $TORCHX_NAMED_RESOURCES, else
// ~/.config/torchx/named_resources.json, shaped as
//   {"rdma.large": {"cpu": 32, "gpu": 4, "memMB": 262144,
//                   "capabilities": {...}, "devices": {"rdma/rdma_shared_device_a": 1}}}
// A user entry overrides a builtin of the same name. Unknown names are an
// error with a "did you mean" suggestion.
//
// Thread contract: immutable after loading; safe from any thread.
#ifndef TORCHXD_CORE_NAMED_RESOURCES_H_
#define TORCHXD_CORE_NAMED_RESOURCES_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/app_def.h"
#include "core/environment.h"
#include "core/result.h"

namespace torchxd::core {

inline constexpr std::string_view kK8sInstanceType = "node.kubernetes.io/instance-type";
inline constexpr std::string_view kEfaDevice = "vpc.amazonaws.com/efa";
inline constexpr std::string_view kNeuronDevice = "aws.amazon.com/neurondevice";

class NamedResources {
 public:
  // TorchX's generic and AWS tables.
  static NamedResources Builtin();
  // Builtin plus the user's file, located through `env` ($TORCHX_NAMED_RESOURCES
  // must exist when set; the default path may be absent).
  [[nodiscard]] static Result<NamedResources> Load(const EnvLookup& env);

  // Adds the entries of a user JSON document (`origin` names it in errors).
  [[nodiscard]] Result<void> AddFromJson(std::string_view text, const std::string& origin);

  [[nodiscard]] Result<Resource> Get(std::string_view name) const;
  std::vector<std::string> Names() const;
  // Asked for a name the tables lack (the user's TorchX: its entry-point and
  // plugin named resources); nullopt = unknown there too. Each answer is kept.
  void SetFallback(std::function<std::optional<Resource>(std::string_view)> fallback) { fallback_ = std::move(fallback); }

 private:
  std::map<std::string, Resource, std::less<>> table_;
  std::function<std::optional<Resource>(std::string_view)> fallback_;
  mutable std::map<std::string, std::optional<Resource>, std::less<>> asked_;
};

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_NAMED_RESOURCES_H_
