#include "core/mounts.h"

#include <map>
#include <optional>

#include "core/text.h"

namespace torchxd::core {
namespace {

const std::vector<std::pair<std::string, std::string>>& OptionAliases() {
  static const std::vector<std::pair<std::string, std::string>> kAliases = {
      {"type", "type"},         {"destination", "dst"}, {"dst", "dst"},
      {"target", "dst"},        {"read_only", "readonly"}, {"readonly", "readonly"},
      {"source", "src"},        {"src", "src"},         {"perm", "perm"},
  };
  return kAliases;
}

std::optional<std::string> CanonicalOption(std::string_view key) {
  for (const auto& [alias, canonical] : OptionAliases()) {
    if (alias == key) return canonical;
  }
  return std::nullopt;
}

std::string OptionList() {
  std::vector<std::string> names;
  for (const auto& [alias, canonical] : OptionAliases()) names.push_back(PyRepr(alias));
  return "[" + Join(names, ", ") + "]";
}

using Options = std::map<std::string, std::string>;

Result<std::string> Required(const Options& opts, const std::string& key) {
  auto it = opts.find(key);
  if (it == opts.end()) {
    return Fail(Error::InvalidArgument("mount type=" + opts.at("type") +
                                       " is missing required option '" + key + "'"));
  }
  return it->second;
}

Result<Mount> BuildMount(const Options& opts, std::string_view home) {
  const std::string& type = opts.at("type");
  bool read_only = opts.count("readonly") > 0;
  if (type == "bind") {
    auto src = Required(opts, "src");
    if (!src) return Fail(src.error());
    auto dst = Required(opts, "dst");
    if (!dst) return Fail(dst.error());
    std::string src_path = *src;
    if (StartsWith(src_path, "~") && (src_path.size() == 1 || src_path[1] == '/')) {
      src_path = std::string(home) + src_path.substr(1);
    }
    return BindMount{src_path, *dst, read_only};
  }
  if (type == "volume") {
    auto src = Required(opts, "src");
    if (!src) return Fail(src.error());
    auto dst = Required(opts, "dst");
    if (!dst) return Fail(dst.error());
    return VolumeMount{*src, *dst, read_only};
  }
  if (type == "device") {
    auto src = Required(opts, "src");
    if (!src) return Fail(src.error());
    auto dst = opts.count("dst") ? opts.at("dst") : *src;
    auto perm = opts.count("perm") ? opts.at("perm") : std::string("rwm");
    for (char c : perm) {
      if (c != 'r' && c != 'w' && c != 'm') {
        return Fail(Error::InvalidArgument(std::string(1, c) +
                                           " is not a valid permission flags must one of r,w,m"));
      }
    }
    return DeviceMount{*src, dst, perm};
  }
  return Fail(Error::InvalidArgument("invalid mount type " + PyRepr(type) +
                                     ", must be one of ['bind', 'volume', 'device']"));
}

}  // namespace

Result<std::vector<Mount>> ParseMounts(const std::vector<std::string>& tokens,
                                       std::string_view home) {
  std::vector<Options> specs;
  for (const auto& token : tokens) {
    size_t eq = token.find('=');
    std::string key = token.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : token.substr(eq + 1);
    auto canonical = CanonicalOption(key);
    if (!canonical) {
      return Fail(Error::InvalidArgument("unknown mount option " + key + ", must be one of " +
                                         OptionList()));
    }
    if (*canonical == "type") {
      specs.emplace_back();
    } else if (specs.empty()) {
      return Fail(Error::InvalidArgument("type must be specified first"));
    }
    specs.back()[*canonical] = value;
  }
  std::vector<Mount> mounts;
  for (const auto& opts : specs) {
    auto mount = BuildMount(opts, home);
    if (!mount) return Fail(mount.error());
    mounts.push_back(std::move(*mount));
  }
  return mounts;
}

Result<std::vector<Mount>> ParseMountString(std::string_view spec, std::string_view home) {
  std::vector<std::string> tokens;
  for (auto& part : Split(spec, ',')) {
    auto token = Trim(part);
    if (!token.empty()) tokens.push_back(token);
  }
  return ParseMounts(tokens, home);
}

std::string_view MountTypeName(const Mount& mount) {
  switch (mount.index()) {
    case 0:
      return "bind";
    case 1:
      return "volume";
    default:
      return "device";
  }
}

}  // namespace torchxd::core
