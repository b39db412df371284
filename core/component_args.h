// Parsing a builtin component's arguments from TorchX-style argv, the way
// TorchX's argparse-based parser does (specs/builders._create_args_parser):
//   --name VALUE | --name=VALUE | -x VALUE | -xVALUE (one-letter params),
//   unique prefixes of long names (argparse's allow_abbrev),
//   the first positional starts the varargs, which take everything after it
//   (a leading "--" is dropped: `dist.ddp --script t.py -- --lr 0.1`),
//   --help asks for the component's help.
// Beyond TorchX: a repeated option is an error rather than last-wins, and a
// bool value is True only for "true" in any case (as TorchX decodes it).
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_COMPONENT_ARGS_H_
#define TORCHXD_CORE_COMPONENT_ARGS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/runopts.h"

namespace torchxd::core {

enum class ParamType { kStr, kInt, kFloat, kBool, kList, kDict };

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kStr;
  std::string help;
  // String form of the default (as on a command line); nullopt = None.
  std::optional<std::string> default_value;
  bool required = false;
};

struct ComponentSpec {
  std::string name;         // "utils.echo"
  std::string description;  // first paragraph of the help
  std::vector<ParamSpec> params;
  std::optional<ParamSpec> varargs;  // *args, if the component takes them
};

struct ComponentArgs {
  bool help_requested = false;
  // Every param by name; std::monostate = None. Typed: string, int64_t, double,
  // bool, vector<string> (list) or map<string, string> (dict).
  std::map<std::string, CfgValue> values;
  std::vector<std::string> varargs;

  std::optional<std::string> Str(const std::string& name) const;
  int64_t Int(const std::string& name) const;  // params with a default only
  bool Bool(const std::string& name) const;
  std::vector<std::string> List(const std::string& name) const;           // None -> {}
  std::map<std::string, std::string> Dict(const std::string& name) const;  // None -> {}
};

// `defaults` (from .torchxconfig [component:NAME]) replace declared defaults.
[[nodiscard]] Result<ComponentArgs> ParseComponentArgs(
    const ComponentSpec& spec, const std::vector<std::string>& argv,
    const std::map<std::string, std::string>& defaults = {});

std::string ComponentHelp(const ComponentSpec& spec);
// `torchx builtins --print NAME`: the component's Python signature and
// docstring, as TorchX's source shows them (the body is torchxd's C++).
std::string ComponentSignature(const ComponentSpec& spec);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_COMPONENT_ARGS_H_
