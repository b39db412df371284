// Scheduler run options (TorchX's runopt / runopts / cfg).
//
// An option has a type (str, int, float, bool, list, map), help, and is either
// required or has a default. Values arrive as strings (-cfg, .torchxconfig)
// and are cast with TorchX's rules (bool: true/1/yes/on | false/0/no/off;
// list: ',' or ';' separated, empty items dropped; map: "a:1,b:2"), or as JSON
// (the protocol). camelCase aliases of registered keys are accepted.
// Unknown keys in a cfg string are dropped with a warning ("did you mean"),
// as TorchX does; bad values are errors.
//
// Thread contract: immutable after construction; safe from any thread.
#ifndef TORCHXD_CORE_RUNOPTS_H_
#define TORCHXD_CORE_RUNOPTS_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace torchxd::core {

enum class OptType { kStr, kInt, kFloat, kBool, kList, kMap };
std::string_view OptTypeName(OptType type);  // "str", "int", "float", "bool", "list[str]", "dict[str, str]"

// std::monostate is Python's None (unset).
using CfgValue = std::variant<std::monostate, std::string, int64_t, double, bool,
                              std::vector<std::string>, std::map<std::string, std::string>>;
using Cfg = std::map<std::string, CfgValue>;

// The value of `key` when it is set and of type T (a resolved cfg has every
// option at its declared type), else nothing.
template <class T>
std::optional<T> CfgGet(const Cfg& cfg, const std::string& key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  if (const auto* v = std::get_if<T>(&it->second)) return *v;
  return std::nullopt;
}

nlohmann::json CfgValueToJson(const CfgValue& value);
nlohmann::json CfgToJson(const Cfg& cfg);
// How TorchX prints a value in usage and messages: None, True, ['a', 'b'], ...
std::string CfgValueRepr(const CfgValue& value);

struct RunOpt {
  std::string name;
  OptType type = OptType::kStr;
  std::string help;
  CfgValue default_value;
  bool required = false;
  // Numbers: the values accepted, both ends included (none: any of the type).
  std::optional<std::pair<double, double>> range;
};

class RunOpts {
 public:
  // Registers an option; a required option must not have a default and a
  // default must be of the option's type (programming errors: they abort).
  RunOpts& Add(std::string name, OptType type, std::string help, CfgValue default_value = {},
               bool required = false);
  // The option added last takes numbers in [lo, hi] only (Resolve refuses the rest).
  RunOpts& Range(double lo, double hi);

  const std::vector<RunOpt>& options() const { return options_; }
  // The registered key `name` spells (itself or its camelCase alias).
  std::optional<std::string> CanonicalKey(std::string_view name) const;
  const RunOpt* Get(std::string_view name) const;
  std::vector<std::string> Names() const;

  [[nodiscard]] Result<CfgValue> CastToType(const RunOpt& opt, std::string_view value) const;

  // Parses "k=v,k2=v2"; unknown keys are dropped and reported in `warnings`.
  [[nodiscard]] Result<Cfg> CfgFromString(std::string_view cfg_str,
                                          std::vector<std::string>& warnings) const;
  // Decodes a JSON object (the protocol's form); unknown keys are errors.
  [[nodiscard]] Result<Cfg> CfgFromJson(const nlohmann::json& json) const;
  // Checks required options and types, canonicalises aliases, fills defaults.
  [[nodiscard]] Result<Cfg> Resolve(const Cfg& cfg) const;

  // What `torchx runopts` prints (TorchX's runopts.__repr__).
  std::string Usage() const;

 private:
  std::vector<RunOpt> options_;
};

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_RUNOPTS_H_
