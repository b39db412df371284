#include "core/macros.h"

#include <cstdint>

#include "core/app_handle.h"
#include "core/saturating.h"

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

// string.Template's scan: `text(view)` for what is copied, `placeholder(name,
// verbatim)` for each $name or ${name} (verbatim: the placeholder as written).
template <typename Text, typename Placeholder>
void ScanTemplate(std::string_view templ, Text&& text, Placeholder&& placeholder) {
  size_t i = 0;
  while (i < templ.size()) {
    size_t dollar = templ.find('$', i);
    if (dollar == std::string_view::npos || dollar + 1 >= templ.size()) {
      text(templ.substr(i));
      return;
    }
    if (dollar > i) text(templ.substr(i, dollar - i));
    i = dollar;
    char next = templ[i + 1];
    if (next == '$') {  // escaped
      text(templ.substr(i, 1));
      i += 2;
    } else if (IsIdentStart(next)) {  // $name
      size_t end = IdentEnd(templ, i + 1);
      placeholder(templ.substr(i + 1, end - i - 1), templ.substr(i, end - i));
      i = end;
    } else if (next == '{' && i + 2 < templ.size() && IsIdentStart(templ[i + 2]) &&
               IdentEnd(templ, i + 2) < templ.size() && templ[IdentEnd(templ, i + 2)] == '}') {
      size_t end = IdentEnd(templ, i + 2);  // ${name}
      placeholder(templ.substr(i + 2, end - i - 2), templ.substr(i, end + 1 - i));
      i = end + 1;
    } else {  // invalid placeholder: the '$' stays
      text(templ.substr(i, 1));
      ++i;
    }
  }
}

}  // namespace

std::string SafeSubstitute(std::string_view templ,
                           const std::map<std::string, std::string, std::less<>>& values) {
  std::string out;
  out.reserve(templ.size());
  ScanTemplate(
      templ, [&](std::string_view text) { out += text; },
      [&](std::string_view name, std::string_view verbatim) {
        auto it = values.find(name);
        out += it != values.end() ? std::string_view(it->second) : verbatim;
      });
  return out;
}

std::string EscapeMacros(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    out += c;
    if (c == '$') out += '$';
  }
  return out;
}

MacroCounts CountMacros(std::string_view templ) {
  MacroCounts c;
  ScanTemplate(
      templ, [&](std::string_view text) { c.literal += text.size(); },
      [&](std::string_view name, std::string_view verbatim) {
        if (name == "img_root") {
          ++c.img_root;
        } else if (name == "app_id") {
          ++c.app_id;
        } else if (name == "replica_id") {
          ++c.replica_id;
        } else if (name == "rank0_env") {
          ++c.rank0_env;
        } else {
          c.literal += verbatim.size();
        }
      });
  return c;
}

MacroCounts CountMacros(const Role& role) {
  MacroCounts c;
  for (const auto& arg : role.args) c += CountMacros(arg);
  for (const auto& [key, value] : role.env) c += CountMacros(value);
  return c;
}

std::string JobIdTemplate(std::string_view scheduler, std::string_view session) {
  return MakeAppHandle(scheduler, EscapeMacros(session), kMacroAppId);
}

MacroCounts& MacroCounts::operator+=(const MacroCounts& o) {
  literal += o.literal;
  img_root += o.img_root;
  app_id += o.app_id;
  replica_id += o.replica_id;
  rank0_env += o.rank0_env;
  return *this;
}

uint64_t MacroCounts::SizeWith(size_t img_root_len, size_t app_id_len, size_t replica_id_len,
                               size_t rank0_env_len) const {
  uint64_t n = literal;
  n = SaturatingAdd(n, SaturatingMul(img_root, img_root_len));
  n = SaturatingAdd(n, SaturatingMul(app_id, app_id_len));
  n = SaturatingAdd(n, SaturatingMul(replica_id, replica_id_len));
  return SaturatingAdd(n, SaturatingMul(rank0_env, rank0_env_len));
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
