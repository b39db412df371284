#include "core/component_args.h"

#include <cerrno>
#include <cstdlib>

#include "core/cfg_string.h"
#include "core/text.h"

namespace torchxd::core {
namespace {

std::string OptionName(const ParamSpec& p) {
  return p.name.size() == 1 ? "-" + p.name : "--" + p.name;
}

bool LooksLikeNegativeNumber(const std::string& token) {
  if (token.size() < 2 || token[0] != '-') return false;
  char* end = nullptr;
  std::strtod(token.c_str(), &end);
  return *end == '\0';
}

bool IsOptionToken(const std::string& token) {
  return token.size() > 1 && token[0] == '-' && !LooksLikeNegativeNumber(token);
}

Result<CfgValue> Convert(const ParamSpec& p, const std::string& raw) {
  auto invalid = [&](std::string_view what) {
    return Fail(Error::InvalidArgument("argument " + OptionName(p) + ": invalid " +
                                       std::string(what) + " value: " + PyRepr(raw)));
  };
  switch (p.type) {
    case ParamType::kStr:
      return CfgValue{raw};
    case ParamType::kInt: {
      auto t = Trim(raw);
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(t.c_str(), &end, 10);
      if (t.empty() || *end != '\0' || errno == ERANGE) return invalid("int");
      return CfgValue{static_cast<int64_t>(v)};
    }
    case ParamType::kFloat: {
      auto t = Trim(raw);
      char* end = nullptr;
      double v = std::strtod(t.c_str(), &end);
      if (t.empty() || *end != '\0') return invalid("float");
      return CfgValue{v};
    }
    case ParamType::kBool:
      // As TorchX decodes a bool argument: only "true", in any case, is True.
      return CfgValue{ToLower(raw) == "true"};
    case ParamType::kList:
      if (raw.empty()) return CfgValue{};
      return CfgValue{ParseList(raw)};
    case ParamType::kDict: {
      if (raw.empty()) return CfgValue{};
      auto pairs = ParseKeyValues(raw);
      if (!pairs) return Fail(pairs.error().WithContext("argument " + OptionName(p)));
      std::map<std::string, std::string> out;
      for (auto& [k, v] : *pairs) out[k] = v;
      return CfgValue{out};
    }
  }
  return invalid("");
}

// The param a token names: exact, one-letter alias, or a unique prefix.
Result<const ParamSpec*> FindParam(const ComponentSpec& spec, const std::string& flag) {
  std::vector<const ParamSpec*> prefixed;
  for (const auto& p : spec.params) {
    if (flag == OptionName(p) || flag == "--" + p.name) return &p;
    if (StartsWith(flag, "--") && flag.size() > 2 && StartsWith("--" + p.name, flag)) {
      prefixed.push_back(&p);
    }
  }
  if (prefixed.size() == 1) return prefixed[0];
  if (prefixed.size() > 1) {
    std::vector<std::string> names;
    for (const auto* p : prefixed) names.push_back("--" + p->name);
    return Fail(Error::InvalidArgument("ambiguous option: " + flag + " could match " +
                                       Join(names, ", ")));
  }
  std::vector<std::string> names;
  for (const auto& p : spec.params) names.push_back(OptionName(p));
  return Fail(Error::InvalidArgument("unrecognized argument: " + flag + "." +
                                     DidYouMean(flag, names)));
}

}  // namespace

std::optional<std::string> ComponentArgs::Str(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  return std::nullopt;
}

int64_t ComponentArgs::Int(const std::string& name) const {
  return std::get<int64_t>(values.at(name));
}

bool ComponentArgs::Bool(const std::string& name) const { return std::get<bool>(values.at(name)); }

std::vector<std::string> ComponentArgs::List(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return {};
  if (const auto* l = std::get_if<std::vector<std::string>>(&it->second)) return *l;
  return {};
}

std::map<std::string, std::string> ComponentArgs::Dict(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return {};
  if (const auto* d = std::get_if<std::map<std::string, std::string>>(&it->second)) return *d;
  return {};
}

Result<ComponentArgs> ParseComponentArgs(const ComponentSpec& spec,
                                         const std::vector<std::string>& argv,
                                         const std::map<std::string, std::string>& defaults) {
  ComponentArgs out;
  std::map<std::string, std::string> given;  // param name -> raw value
  size_t i = 0;
  for (; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    if (token == "--help") {
      out.help_requested = true;
      return out;
    }
    if (token == "--" || !IsOptionToken(token)) break;  // varargs start here
    std::string flag = token;
    std::optional<std::string> value;
    if (size_t eq = token.find('='); StartsWith(token, "--") && eq != std::string::npos) {
      flag = token.substr(0, eq);
      value = token.substr(eq + 1);
    } else if (!StartsWith(token, "--") && token.size() > 2) {
      flag = token.substr(0, 2);  // -j2x1
      value = token.substr(2);
    }
    auto param = FindParam(spec, flag);
    if (!param) return Fail(param.error());
    const ParamSpec& p = **param;
    if (!value) {
      if (i + 1 >= argv.size() || IsOptionToken(argv[i + 1]) || argv[i + 1] == "--") {
        return Fail(Error::InvalidArgument("argument " + OptionName(p) + ": expected one argument"));
      }
      value = argv[++i];
    }
    if (given.count(p.name) > 0) {
      return Fail(Error::InvalidArgument("Repeated Command Line Arguments: " + OptionName(p)));
    }
    given[p.name] = *value;
  }
  if (i < argv.size()) {
    if (!spec.varargs) {
      std::vector<std::string> rest(argv.begin() + static_cast<long>(i), argv.end());
      return Fail(Error::InvalidArgument("unrecognized arguments: " + Join(rest, " ")));
    }
    out.varargs.assign(argv.begin() + static_cast<long>(i), argv.end());
    if (!out.varargs.empty() && out.varargs[0] == "--") out.varargs.erase(out.varargs.begin());
  }
  std::vector<std::string> missing;
  for (const auto& p : spec.params) {
    std::optional<std::string> raw;
    if (auto it = given.find(p.name); it != given.end()) {
      raw = it->second;
    } else if (auto d = defaults.find(p.name); d != defaults.end()) {
      raw = d->second;
    } else {
      raw = p.default_value;
    }
    if (!raw) {
      if (p.required) missing.push_back(OptionName(p));
      out.values[p.name] = CfgValue{};
      continue;
    }
    auto v = Convert(p, *raw);
    if (!v) return Fail(v.error());
    out.values[p.name] = std::move(*v);
  }
  if (!missing.empty()) {
    return Fail(Error::InvalidArgument("the following arguments are required: " +
                                       Join(missing, ", ")));
  }
  return out;
}

std::string ComponentHelp(const ComponentSpec& spec) {
  std::string usage = "usage: torchx run <run args...> " + spec.name + " [--help]";
  for (const auto& p : spec.params) {
    std::string item = OptionName(p) + " " + ToUpper(p.name);
    usage += p.required ? " " + item : " [" + item + "]";
  }
  if (spec.varargs) usage += " ...";
  std::string out = usage + "\n\n" + spec.description + "\n\n";
  if (spec.varargs) {
    out += "positional arguments:\n  " + spec.varargs->name + "\n      " + spec.varargs->help +
           "\n\n";
  }
  out += "options:\n  --help\n      show this help message and exit\n";
  for (const auto& p : spec.params) {
    std::string suffix = p.required ? " (required)"
                                    : " (default: " + p.default_value.value_or("None") + ")";
    out += "  " + OptionName(p) + " " + ToUpper(p.name) + "\n      " + p.help + suffix + "\n";
  }
  return out;
}

std::string ComponentSignature(const ComponentSpec& spec) {
  auto type_name = [](ParamType t) -> std::string {
    switch (t) {
      case ParamType::kStr: return "str";
      case ParamType::kInt: return "int";
      case ParamType::kFloat: return "float";
      case ParamType::kBool: return "bool";
      case ParamType::kList: return "Optional[List[str]]";
      case ParamType::kDict: return "Optional[Dict[str, str]]";
    }
    return "str";
  };
  auto default_text = [](const ParamSpec& p) -> std::string {
    if (!p.default_value) return "None";
    if (p.type == ParamType::kStr) return PyRepr(*p.default_value);
    return *p.default_value;
  };
  std::string fn = spec.name.substr(spec.name.rfind('.') + 1);
  std::vector<std::string> params;
  if (spec.varargs) params.push_back("*" + spec.varargs->name + ": str");
  for (const auto& p : spec.params) {
    std::string type = type_name(p.type);
    if (!p.required && !p.default_value && !StartsWith(type, "Optional")) type = "Optional[" + type + "]";
    std::string item = p.name + ": " + type;
    if (!p.required) item += " = " + default_text(p);
    params.push_back(item);
  }
  std::string out = "def " + fn + "(\n";
  for (const auto& item : params) out += "    " + item + ",\n";
  out += ") -> specs.AppDef:\n    \"\"\"\n    " + spec.description + "\n\n    Args:\n";
  if (spec.varargs) out += "        " + spec.varargs->name + ": " + spec.varargs->help + "\n";
  for (const auto& p : spec.params) out += "        " + p.name + ": " + p.help + "\n";
  return out + "    \"\"\"\n";
}

}  // namespace torchxd::core
