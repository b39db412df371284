#include "core/macros.h"

namespace torchxd::core {
namespace {

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }

size_t IdentEnd(std::string_view s, size_t begin) {
  size_t end = begin;
  while (end < s.size() && IsIdentChar(s[end])) ++end;
  return end;
}

// TorchX's Values._apply_nested: dicts recurse, strings are substituted, and in
// lists only strings and dicts are touched (a list inside a list is left alone).
void ApplyNested(const MacroValues& values, nlohmann::json& node) {
  for (auto& [key, value] : node.items()) {
    if (value.is_object()) {
      ApplyNested(values, value);
    } else if (value.is_string()) {
      value = values.Substitute(value.get_ref<const std::string&>());
    } else if (value.is_array()) {
      for (auto& item : value) {
        if (item.is_object()) {
          ApplyNested(values, item);
        } else if (item.is_string()) {
          item = values.Substitute(item.get_ref<const std::string&>());
        }
      }
    }
  }
}

}  // namespace

std::string SafeSubstitute(std::string_view templ,
                           const std::map<std::string, std::string, std::less<>>& values) {
  std::string out;
  out.reserve(templ.size());
  size_t i = 0;
  while (i < templ.size()) {
    char c = templ[i];
    if (c != '$' || i + 1 >= templ.size()) {
      out += c;
      ++i;
      continue;
    }
    char next = templ[i + 1];
    if (next == '$') {  // escaped
      out += '$';
      i += 2;
    } else if (IsIdentStart(next)) {  // $name
      size_t end = IdentEnd(templ, i + 1);
      auto it = values.find(templ.substr(i + 1, end - i - 1));
      out += it != values.end() ? std::string_view(it->second) : templ.substr(i, end - i);
      i = end;
    } else if (next == '{' && i + 2 < templ.size() && IsIdentStart(templ[i + 2]) &&
               IdentEnd(templ, i + 2) < templ.size() && templ[IdentEnd(templ, i + 2)] == '}') {
      size_t end = IdentEnd(templ, i + 2);  // ${name}
      auto it = values.find(templ.substr(i + 2, end - i - 2));
      out += it != values.end() ? std::string_view(it->second) : templ.substr(i, end + 1 - i);
      i = end + 1;
    } else {  // invalid placeholder: the '$' stays
      out += '$';
      ++i;
    }
  }
  return out;
}

std::string MacroValues::Substitute(std::string_view s) const {
  const std::map<std::string, std::string, std::less<>> values = {
      {"img_root", img_root},
      {"app_id", app_id},
      {"replica_id", replica_id},
      {"rank0_env", rank0_env},
  };
  return SafeSubstitute(s, values);
}

Role MacroValues::Apply(const Role& role) const {
  Role out = role;
  for (auto& arg : out.args) arg = Substitute(arg);
  for (auto& [key, value] : out.env) value = Substitute(value);
  ApplyNested(*this, out.metadata);
  return out;
}

}  // namespace torchxd::core
