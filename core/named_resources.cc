#include "core/named_resources.h"

#include "core/json_parse.h"

#include <fstream>
#include <sstream>

#include "core/app_json.h"
#include "core/text.h"

namespace torchxd::core {
namespace {

constexpr int kGiB = 1024;
constexpr int kAwsGiB = static_cast<int>(1024 * 0.96);  // TorchX's MEM_TAX

Resource Generic(int cpu, int gpu, int mem_mb) {
  Resource r;
  r.cpu = cpu;
  r.gpu = gpu;
  r.mem_mb = mem_mb;
  return r;
}

Resource Aws(int cpu, int gpu, int mem_gib, std::string_view instance_type,
             std::map<std::string, int> devices = {}) {
  Resource r = Generic(cpu, gpu, mem_gib * kAwsGiB);
  r.capabilities[std::string(kK8sInstanceType)] = instance_type;
  r.devices = std::move(devices);
  return r;
}

std::map<std::string, int> Efa(int n) { return {{std::string(kEfaDevice), n}}; }
std::map<std::string, int> Neuron(int n) { return {{std::string(kNeuronDevice), n}}; }

}  // namespace

NamedResources NamedResources::Builtin() {
  NamedResources nr;
  auto& t = nr.table_;
  t["gpu.small"] = Generic(8, 1, 32 * kGiB);
  t["gpu.medium"] = Generic(16, 2, 64 * kGiB);
  t["gpu.large"] = Generic(32, 4, 128 * kGiB);
  t["gpu.xlarge"] = Generic(64, 8, 256 * kGiB);
  t["cpu.nano"] = Generic(1, 0, 512);
  t["cpu.micro"] = Generic(1, 0, 1 * kGiB);
  t["cpu.small"] = Generic(1, 0, 2 * kGiB);
  t["cpu.medium"] = Generic(2, 0, 4 * kGiB);
  t["cpu.large"] = Generic(2, 0, 8 * kGiB);
  t["cpu.xlarge"] = Generic(8, 0, 32 * kGiB);
  t["NULL"] = Resource{};
  t["MISSING"] = Resource{};

  t["aws_t3.medium"] = Aws(2, 0, 4, "t3.medium");
  t["aws_m5.large"] = Aws(2, 0, 8, "m5.large");
  t["aws_m5.xlarge"] = Aws(4, 0, 16, "m5.xlarge");
  t["aws_m5.2xlarge"] = Aws(8, 0, 32, "m5.2xlarge");
  t["aws_m5.4xlarge"] = Aws(16, 0, 64, "m5.4xlarge");
  t["aws_m5.8xlarge"] = Aws(32, 0, 128, "m5.8xlarge");
  t["aws_m5.12xlarge"] = Aws(48, 0, 192, "m5.12xlarge");
  t["aws_m5.16xlarge"] = Aws(64, 0, 256, "m5.16xlarge");
  t["aws_m5.24xlarge"] = Aws(96, 0, 384, "m5.24xlarge");
  t["aws_m5.metal"] = Aws(96, 0, 384, "m5.metal");
  t["aws_m5d.large"] = Aws(2, 0, 8, "m5d.large");
  t["aws_m5d.xlarge"] = Aws(4, 0, 16, "m5d.xlarge");
  t["aws_m5d.2xlarge"] = Aws(8, 0, 32, "m5d.2xlarge");
  t["aws_m5d.4xlarge"] = Aws(16, 0, 64, "m5d.4xlarge");
  t["aws_m5d.8xlarge"] = Aws(32, 0, 128, "m5d.8xlarge");
  t["aws_m5d.12xlarge"] = Aws(48, 0, 192, "m5d.12xlarge");
  t["aws_m5d.16xlarge"] = Aws(64, 0, 256, "m5d.16xlarge");
  t["aws_m5d.24xlarge"] = Aws(96, 0, 384, "m5d.24xlarge");
  t["aws_m5d.metal"] = Aws(96, 0, 384, "m5d.metal");
  t["aws_c5.18xlarge"] = Aws(72, 0, 142, "c5.18xlarge");
  t["aws_p3.2xlarge"] = Aws(8, 1, 61, "p3.2xlarge");
  t["aws_p3.8xlarge"] = Aws(32, 4, 244, "p3.8xlarge");
  t["aws_p3.16xlarge"] = Aws(64, 8, 488, "p3.16xlarge");
  t["aws_p3dn.24xlarge"] = Aws(96, 8, 768, "p3dn.24xlarge", Efa(1));
  t["aws_p4d.24xlarge"] = Aws(96, 8, 1152, "p4d.24xlarge", Efa(4));
  t["aws_p4de.24xlarge"] = Aws(96, 8, 1152, "p4de.24xlarge", Efa(4));
  t["aws_p5.48xlarge"] = Aws(192, 8, 2048, "p5.48xlarge", Efa(32));
  t["aws_p5e.48xlarge"] = Aws(192, 8, 2048, "p5e.48xlarge", Efa(32));
  t["aws_p5en.48xlarge"] = Aws(192, 8, 2048, "p5en.48xlarge", Efa(16));
  t["aws_p6-b200.48xlarge"] = Aws(192, 8, 2048, "p6-b200.48xlarge", Efa(8));
  t["aws_p6-b300.48xlarge"] = Aws(192, 8, 4096, "p6-b300.48xlarge", Efa(16));
  t["aws_p6e-gb200.36xlarge"] = Aws(144, 4, 960, "p6e-gb200.36xlarge", Efa(16));
  t["aws_g4dn.xlarge"] = Aws(4, 1, 16, "g4dn.xlarge");
  t["aws_g4dn.2xlarge"] = Aws(8, 1, 32, "g4dn.2xlarge");
  t["aws_g4dn.4xlarge"] = Aws(16, 1, 64, "g4dn.4xlarge");
  t["aws_g4dn.8xlarge"] = Aws(32, 1, 128, "g4dn.8xlarge", Efa(1));
  t["aws_g4dn.16xlarge"] = Aws(64, 1, 256, "g4dn.16xlarge", Efa(1));
  t["aws_g4dn.12xlarge"] = Aws(48, 4, 192, "g4dn.12xlarge", Efa(1));
  t["aws_g4dn.metal"] = Aws(96, 8, 384, "g4dn.metal", Efa(1));
  t["aws_g5.xlarge"] = Aws(4, 1, 16, "g5.xlarge");
  t["aws_g5.2xlarge"] = Aws(8, 1, 32, "g5.2xlarge");
  t["aws_g5.4xlarge"] = Aws(16, 1, 64, "g5.4xlarge");
  t["aws_g5.8xlarge"] = Aws(32, 1, 128, "g5.8xlarge", Efa(1));
  t["aws_g5.16xlarge"] = Aws(64, 1, 256, "g5.16xlarge", Efa(1));
  t["aws_g5.12xlarge"] = Aws(48, 4, 192, "g5.12xlarge", Efa(1));
  t["aws_g5.24xlarge"] = Aws(96, 4, 384, "g5.24xlarge", Efa(1));
  t["aws_g5.48xlarge"] = Aws(192, 8, 768, "g5.48xlarge", Efa(1));
  t["aws_g6e.xlarge"] = Aws(4, 1, 32, "g6e.xlarge");
  t["aws_g6e.2xlarge"] = Aws(8, 1, 64, "g6e.2xlarge");
  t["aws_g6e.4xlarge"] = Aws(16, 1, 128, "g6e.4xlarge");
  t["aws_g6e.8xlarge"] = Aws(32, 1, 256, "g6e.8xlarge");
  t["aws_g6e.16xlarge"] = Aws(64, 1, 512, "g6e.16xlarge");
  t["aws_g6e.12xlarge"] = Aws(48, 4, 384, "g6e.12xlarge");
  t["aws_g6e.24xlarge"] = Aws(96, 4, 768, "g6e.24xlarge", Efa(2));
  t["aws_g6e.48xlarge"] = Aws(192, 8, 1536, "g6e.48xlarge", Efa(4));
  t["aws_trn1.2xlarge"] = Aws(8, 0, 32, "trn1.2xlarge", Neuron(1));
  auto trn1_32 = Aws(128, 0, 512, "trn1.32xlarge", Efa(8));
  trn1_32.devices[std::string(kNeuronDevice)] = 16;
  t["aws_trn1.32xlarge"] = trn1_32;
  t["aws_inf2.xlarge"] = Aws(4, 0, 16, "inf2.xlarge", Neuron(1));
  t["aws_inf2.8xlarge"] = Aws(32, 0, 128, "inf2.8xlarge", Neuron(1));
  t["aws_inf2.24xlarge"] = Aws(96, 0, 384, "inf2.24xlarge", Neuron(6));
  t["aws_inf2.48xlarge"] = Aws(192, 0, 768, "inf2.48xlarge", Neuron(12));
  return nr;
}

Result<NamedResources> NamedResources::Load(const EnvLookup& env) {
  NamedResources nr = Builtin();
  std::string path;
  bool must_exist = false;
  if (auto explicit_path = env("TORCHX_NAMED_RESOURCES"); explicit_path && !explicit_path->empty()) {
    path = *explicit_path;
    must_exist = true;
  } else if (auto home = env("HOME")) {
    path = *home + "/.config/torchx/named_resources.json";
  } else {
    return nr;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (must_exist) {
      return Fail(Error::NotFound("$TORCHX_NAMED_RESOURCES names " + path +
                                  ", which cannot be read; fix or unset TORCHX_NAMED_RESOURCES"));
    }
    return nr;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (auto ok = nr.AddFromJson(text.str(), path); !ok) return Fail(ok.error());
  return nr;
}

Result<void> NamedResources::AddFromJson(std::string_view text, const std::string& origin) {
  auto doc = core::ParseJsonOrDiscarded(text);
  if (doc.is_discarded() || !doc.is_object()) {
    return Fail(Error::InvalidArgument(
        origin + ": must be a JSON object mapping names to resources {\"cpu\", \"gpu\", \"memMB\", ...}"));
  }
  for (const auto& [name, value] : doc.items()) {
    auto resource = ResourceFromJson(value, name);
    if (!resource) return Fail(resource.error().WithContext(origin));
    table_[name] = std::move(*resource);
  }
  return {};
}

Result<Resource> NamedResources::Get(std::string_view name) const {
  auto it = table_.find(name);
  if (it != table_.end()) return it->second;
  if (fallback_) {
    auto asked = asked_.find(name);
    if (asked == asked_.end()) asked = asked_.emplace(std::string(name), fallback_(name)).first;
    if (asked->second) return *asked->second;
  }
  return Fail(Error::InvalidArgument("No named resource found for `" + std::string(name) + "`." +
                                     DidYouMean(name, Names())));
}

std::vector<std::string> NamedResources::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, r] : table_) names.push_back(name);
  return names;
}

}  // namespace torchxd::core
