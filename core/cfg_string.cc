#include "core/cfg_string.h"

#include "core/text.h"

namespace torchxd::core {
namespace {

// Replaces each quoted run ('...' or "...", backslash escapes allowed inside)
// with a placeholder so its '=', ',' and ';' are not separators.
std::string HideQuoted(std::string_view arg, std::vector<std::string>& quoted) {
  std::string out;
  size_t i = 0;
  while (i < arg.size()) {
    char q = arg[i];
    if (q == '\'' || q == '"') {
      size_t j = i + 1;
      while (j < arg.size() && arg[j] != q && arg[j] != '\n') j += (arg[j] == '\\' ? 2 : 1);
      if (j < arg.size() && arg[j] == q) {
        quoted.emplace_back(arg.substr(i, j + 1 - i));
        out += "__QUOTED_" + std::to_string(quoted.size() - 1) + "__";
        i = j + 1;
        continue;
      }
    }
    out += arg[i++];
  }
  return out;
}

std::string RestoreQuoted(std::string value, const std::vector<std::string>& quoted) {
  for (size_t i = 0; i < quoted.size(); ++i) {
    std::string marker = "__QUOTED_" + std::to_string(i) + "__";
    for (size_t pos = value.find(marker); pos != std::string::npos;
         pos = value.find(marker, pos + quoted[i].size())) {
      value.replace(pos, marker.size(), quoted[i]);
    }
  }
  return value;
}

std::string Unquote(const std::string& val) {
  if (!val.empty() && ((val.front() == '\'' && val.back() == '\'') ||
                          (val.front() == '"' && val.back() == '"'))) {
    return val.substr(1, val.size() - 2);
  }
  return val;
}

}  // namespace

Result<KeyValues> ParseKeyValues(std::string_view arg) {
  KeyValues out;
  if (arg.empty()) return out;
  std::vector<std::string> quoted;
  std::string hidden = HideQuoted(arg, quoted);
  std::vector<std::string> parts;
  for (auto& piece : Split(hidden, '=')) {
    auto stripped = Trim(piece);
    if (!stripped.empty()) parts.push_back(stripped);
  }
  if (parts.size() < 2) {
    return Fail(Error::InvalidArgument("`" + std::string(arg) +
                                       "` does not have at least one `key=value` pair"));
  }
  std::string key = parts[0];
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    const std::string& vk = parts[i];
    size_t idx = vk.find_last_of(",;");
    if (idx == std::string::npos || idx == 0 || idx + 1 == vk.size()) {
      return Fail(Error::InvalidArgument("`" + RestoreQuoted(vk, quoted) +
                                         "` cannot be split into `val<delim>key` with "
                                         "delims=[',', ';'] (in `" + std::string(arg) + "`)"));
    }
    out.emplace_back(key, Unquote(RestoreQuoted(Trim(vk.substr(0, idx)), quoted)));
    key = Trim(vk.substr(idx + 1));
  }
  out.emplace_back(key, Unquote(RestoreQuoted(parts.back(), quoted)));
  return out;
}

std::vector<std::string> ParseList(std::string_view arg) {
  std::vector<std::string> out;
  if (Trim(arg).empty()) return out;
  for (auto& item : Split(arg, ',')) out.push_back(Trim(item));
  return out;
}

}  // namespace torchxd::core
