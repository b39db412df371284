#include "core/runopts.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/cfg_string.h"
#include "core/check.h"
#include "core/text.h"

namespace torchxd::core {
namespace {

bool IsOfType(const CfgValue& v, OptType type) {
  switch (type) {
    case OptType::kStr:
      return std::holds_alternative<std::string>(v);
    case OptType::kInt:
      return std::holds_alternative<int64_t>(v);
    case OptType::kFloat:
      return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v);
    case OptType::kBool:
      return std::holds_alternative<bool>(v);
    case OptType::kList:
      return std::holds_alternative<std::vector<std::string>>(v);
    case OptType::kMap:
      return std::holds_alternative<std::map<std::string, std::string>>(v);
  }
  return false;
}

std::string CfgRepr(const Cfg& cfg) {
  if (cfg.empty()) return "<EMPTY>";
  std::vector<std::string> items;
  for (const auto& [k, v] : cfg) items.push_back(PyRepr(k) + ": " + CfgValueRepr(v));
  return "{" + Join(items, ", ") + "}";
}

// 100, 0.1, 86400: a bound as a person writes it.
std::string FormatNumber(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v))) return std::to_string(static_cast<int64_t>(v));
  return nlohmann::json(v).dump();
}

// Python str() of a value: a string prints bare, everything else as repr.
std::string CfgValueStr(const CfgValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return CfgValueRepr(v);
}

Result<CfgValue> FromJsonValue(const RunOpt& opt, const nlohmann::json& j) {
  auto wrong = [&] {
    return Fail(Error::InvalidArgument("Run option: " + opt.name + ", must be of type: " +
                                       std::string(OptTypeName(opt.type)) + ", but was: " +
                                       j.dump()));
  };
  if (j.is_null()) return CfgValue{};
  switch (opt.type) {
    case OptType::kStr:
      if (!j.is_string()) return wrong();
      return CfgValue{j.get<std::string>()};
    case OptType::kInt:
      if (!j.is_number_integer()) return wrong();
      if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return Fail(Error::InvalidArgument("Run option: " + opt.name + ", " + j.dump() + " is out of range"));
      }
      return CfgValue{j.get<int64_t>()};
    case OptType::kFloat:
      if (!j.is_number()) return wrong();
      return CfgValue{j.get<double>()};
    case OptType::kBool:
      if (!j.is_boolean()) return wrong();
      return CfgValue{j.get<bool>()};
    case OptType::kList: {
      if (!j.is_array()) return wrong();
      std::vector<std::string> out;
      for (const auto& item : j) out.push_back(item.is_string() ? item.get<std::string>() : item.dump());
      return CfgValue{out};
    }
    case OptType::kMap: {
      if (!j.is_object()) return wrong();
      std::map<std::string, std::string> out;
      for (const auto& [k, item] : j.items()) {
        out[k] = item.is_string() ? item.get<std::string>() : item.dump();
      }
      return CfgValue{out};
    }
  }
  return wrong();
}

}  // namespace

std::string_view OptTypeName(OptType type) {
  switch (type) {
    case OptType::kStr:
      return "str";
    case OptType::kInt:
      return "int";
    case OptType::kFloat:
      return "float";
    case OptType::kBool:
      return "bool";
    case OptType::kList:
      return "list[str]";
    case OptType::kMap:
      return "dict[str, str]";
  }
  return "str";
}

nlohmann::json CfgValueToJson(const CfgValue& value) {
  return std::visit(
      [](const auto& v) -> nlohmann::json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return nullptr;
        } else {
          return v;
        }
      },
      value);
}

nlohmann::json CfgToJson(const Cfg& cfg) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : cfg) out[k] = CfgValueToJson(v);
  return out;
}

std::string CfgValueRepr(const CfgValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return "None";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return PyRepr(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "True" : "False";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          return nlohmann::json(v).dump();
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::vector<std::string> items;
          for (const auto& s : v) items.push_back(PyRepr(s));
          return "[" + Join(items, ", ") + "]";
        } else {
          std::vector<std::string> items;
          for (const auto& [k, s] : v) items.push_back(PyRepr(k) + ": " + PyRepr(s));
          return "{" + Join(items, ", ") + "}";
        }
      },
      value);
}

RunOpts& RunOpts::Range(double lo, double hi) {
  TORCHXD_CHECK(!options_.empty());
  TORCHXD_CHECK(options_.back().type == OptType::kInt || options_.back().type == OptType::kFloat);
  options_.back().range = std::make_pair(lo, hi);
  return *this;
}

RunOpts& RunOpts::Add(std::string name, OptType type, std::string help, CfgValue default_value,
                      bool required) {
  bool has_default = !std::holds_alternative<std::monostate>(default_value);
  TORCHXD_CHECK(!(required && has_default));
  TORCHXD_CHECK(!has_default || IsOfType(default_value, type));
  options_.push_back({std::move(name), type, std::move(help), std::move(default_value), required, std::nullopt});
  return *this;
}

std::optional<std::string> RunOpts::CanonicalKey(std::string_view name) const {
  for (const auto& opt : options_) {
    if (opt.name == name) return opt.name;
  }
  std::string snake = CamelToSnake(name);
  if (snake != name) {
    for (const auto& opt : options_) {
      if (opt.name == snake) return opt.name;
    }
  }
  return std::nullopt;
}

const RunOpt* RunOpts::Get(std::string_view name) const {
  auto key = CanonicalKey(name);
  if (!key) return nullptr;
  for (const auto& opt : options_) {
    if (opt.name == *key) return &opt;
  }
  return nullptr;
}

std::vector<std::string> RunOpts::Names() const {
  std::vector<std::string> names;
  for (const auto& opt : options_) names.push_back(opt.name);
  return names;
}

Result<CfgValue> RunOpts::CastToType(const RunOpt& opt, std::string_view value) const {
  auto bad = [&](std::string_view expected) {
    return Fail(Error::InvalidArgument("run option " + opt.name + "=" + std::string(value) +
                                       ": " + std::string(expected)));
  };
  std::string v(value);
  switch (opt.type) {
    case OptType::kStr:
      return CfgValue{v};
    case OptType::kBool: {
      auto lower = ToLower(v);
      if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") return CfgValue{true};
      if (lower == "false" || lower == "0" || lower == "no" || lower == "off") {
        return CfgValue{false};
      }
      return bad("`" + v + "` is not a valid bool literal, expected one of (case-insensitive): "
                 "true/1/yes/on or false/0/no/off");
    }
    case OptType::kInt: {
      auto t = Trim(v);
      char* end = nullptr;
      errno = 0;
      long long n = std::strtoll(t.c_str(), &end, 10);
      if (t.empty() || *end != '\0') return bad("must be an integer");
      if (errno == ERANGE) return bad("out of range");
      return CfgValue{static_cast<int64_t>(n)};
    }
    case OptType::kFloat: {
      auto t = Trim(v);
      char* end = nullptr;
      errno = 0;
      double d = std::strtod(t.c_str(), &end);
      if (t.empty() || *end != '\0' || !std::isfinite(d)) return bad("must be a number");
      if (errno == ERANGE) return bad("out of range");
      return CfgValue{d};
    }
    case OptType::kList: {
      std::vector<std::string> out;
      for (auto& item : Split(v, ',')) {
        for (auto& piece : Split(item, ';')) {
          if (!piece.empty()) out.push_back(piece);
        }
      }
      return CfgValue{out};
    }
    case OptType::kMap: {
      std::map<std::string, std::string> out;
      std::string normalized = v;
      for (char& c : normalized) c = c == ';' ? ',' : c;
      for (auto& item : Split(normalized, ',')) {
        size_t colon = item.find(':');
        if (colon == std::string::npos) return bad("expected `key:value` pairs, got `" + item + "`");
        out[item.substr(0, colon)] = item.substr(colon + 1);
      }
      return CfgValue{out};
    }
  }
  return bad("unsupported type");
}

Result<Cfg> RunOpts::CfgFromString(std::string_view cfg_str,
                                   std::vector<std::string>& warnings) const {
  auto pairs = ParseKeyValues(cfg_str);
  if (!pairs) return Fail(pairs.error());
  Cfg cfg;
  std::map<std::string, std::string> spelling;
  const RunOpt* previous = nullptr;  // the option before, and how it was written
  std::string previous_key, previous_value;
  for (const auto& [key, value] : *pairs) {
    const RunOpt* opt = Get(key);
    if (opt == nullptr) {
      std::string hint = DidYouMean(key, Names());
      if (hint.empty() && previous != nullptr &&
          (previous->type == OptType::kList || previous->type == OptType::kMap)) {
        // As in TorchX, `=` starts a new option: an item holding one needs quotes.
        hint = " If it was meant as an item of `" + previous->name + "`, quote the whole value: " + previous_key +
               "=\"" + previous_value + ";" + key + "=" + value + "\"";
      }
      warnings.push_back("unknown run option passed to scheduler: " + key + "=" + value + "." + hint);
      previous = nullptr;
      continue;
    }
    previous = opt, previous_key = key, previous_value = value;
    auto cast = CastToType(*opt, value);
    if (!cast) return Fail(cast.error());
    if (spelling.count(opt->name) && cfg[opt->name] != *cast) {
      return Fail(Error::InvalidArgument("Run option `" + opt->name +
                                         "` was passed under two spellings (`" +
                                         spelling[opt->name] + "` and `" + key +
                                         "`) with conflicting values. Pass it once, as `" +
                                         opt->name + "`"));
    }
    spelling.emplace(opt->name, key);
    cfg[opt->name] = std::move(*cast);
  }
  return cfg;
}

Result<Cfg> RunOpts::CfgFromJson(const nlohmann::json& json) const {
  if (!json.is_object()) return Fail(Error::InvalidArgument("cfg: must be an object"));
  Cfg cfg;
  for (const auto& [key, value] : json.items()) {
    const RunOpt* opt = Get(key);
    if (opt == nullptr) {
      return Fail(Error::InvalidArgument("cfg." + key + ": unknown run option." +
                                         DidYouMean(key, Names())));
    }
    auto v = FromJsonValue(*opt, value);
    if (!v) return Fail(v.error());
    cfg[opt->name] = std::move(*v);
  }
  return cfg;
}

Result<Cfg> RunOpts::Resolve(const Cfg& cfg) const {
  Cfg resolved;
  for (const auto& [key, value] : cfg) {
    auto canonical = CanonicalKey(key);
    resolved[canonical ? *canonical : key] = value;
  }
  for (const auto& opt : options_) {
    auto it = resolved.find(opt.name);
    bool unset = it == resolved.end() || std::holds_alternative<std::monostate>(it->second);
    if (opt.required && unset) {
      return Fail(Error::InvalidArgument("Required run option: " + opt.name +
                                         ", must be provided and not `None`. Given: " +
                                         CfgRepr(cfg)));
    }
    if (!unset && !IsOfType(it->second, opt.type)) {
      return Fail(Error::InvalidArgument("Run option: " + opt.name + ", must be of type: " +
                                         std::string(OptTypeName(opt.type)) + ", but was: " +
                                         CfgValueStr(it->second) + ". Given: " + CfgRepr(cfg)));
    }
    if (unset) resolved[opt.name] = opt.default_value;  // None is the default, as in TorchX
    if (!unset && opt.range) {
      double v = std::holds_alternative<int64_t>(it->second) ? static_cast<double>(std::get<int64_t>(it->second))
                                                              : std::get<double>(it->second);
      if (!(v >= opt.range->first && v <= opt.range->second)) {
        return Fail(Error::InvalidArgument("Run option: " + opt.name + ", must be between " +
                                           FormatNumber(opt.range->first) + " and " + FormatNumber(opt.range->second) +
                                           ", but was: " + CfgValueStr(it->second)));
      }
    }
  }
  return resolved;
}

std::string RunOpts::Usage() const {
  std::vector<const RunOpt*> required, optional;
  for (const auto& opt : options_) (opt.required ? required : optional).push_back(&opt);
  std::string out = "    usage:\n        ";
  size_t i = 0;
  for (const auto* list : {&required, &optional}) {
    for (const auto* opt : *list) {
      std::string contents = opt->name + "=" + ToUpper(opt->name);
      if (!opt->required) contents = "[" + contents + "]";
      if (i++ > 0) contents = "," + contents;
      out += contents;
    }
  }
  const std::pair<const char*, const std::vector<const RunOpt*>*> sections[] = {
      {"required", &required}, {"optional", &optional}};
  for (const auto& [section, opts] : sections) {
    if (opts->empty()) continue;
    out += std::string("\n\n    ") + section + " arguments:";
    for (const auto* opt : *opts) {
      std::string dflt = opt->required ? "" : ", " + CfgValueStr(opt->default_value);
      out += "\n        " + opt->name + "=" + ToUpper(opt->name) + " (" +
             std::string(OptTypeName(opt->type)) + dflt + ")";
      out += "\n            " + opt->help;
    }
  }
  return out;
}

}  // namespace torchxd::core
