#include "core/torchx_config.h"

#include <fstream>
#include <set>
#include <sstream>

#include "core/scheduler_opts.h"
#include "core/text.h"

namespace torchxd::core {
namespace {

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Error::NotFound("cannot read " + path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

Result<IniFile> ParseIni(std::string_view text, std::string path) {
  IniFile file{std::move(path), {}};
  std::set<std::string> seen_sections;
  std::set<std::string> seen_keys;
  std::string* last_value = nullptr;
  int line_no = 0;
  for (const auto& raw : Split(text, '\n')) {
    ++line_no;
    std::string line = raw;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string stripped = Trim(line);
    auto where = [&] { return file.path + ":" + std::to_string(line_no) + ": "; };
    if (stripped.empty() || stripped[0] == '#' || stripped[0] == ';') continue;
    if (last_value != nullptr && (line[0] == ' ' || line[0] == '\t')) {
      *last_value += "\n" + stripped;  // continuation of the previous value
      continue;
    }
    if (stripped.front() == '[') {
      if (stripped.back() != ']') return Fail(Error::InvalidArgument(where() + "unclosed section header"));
      std::string name = Trim(stripped.substr(1, stripped.size() - 2));
      if (!seen_sections.insert(name).second) {
        return Fail(Error::InvalidArgument(where() + "section [" + name + "] appears twice"));
      }
      file.sections.push_back({name, {}});
      seen_keys.clear();
      last_value = nullptr;
      continue;
    }
    size_t sep = line.find_first_of("=:");
    if (sep == std::string::npos) {
      return Fail(Error::InvalidArgument(where() + "expected `key = value`, got `" + stripped + "`"));
    }
    if (file.sections.empty()) {
      return Fail(Error::InvalidArgument(where() + "`key = value` before any [section]"));
    }
    std::string key = Trim(line.substr(0, sep));
    if (!seen_keys.insert(key).second) {
      return Fail(Error::InvalidArgument(where() + "key `" + key + "` appears twice in [" +
                                         file.sections.back().first + "]"));
    }
    auto& entries = file.sections.back().second;
    entries.emplace_back(key, Trim(line.substr(sep + 1)));
    last_value = &entries.back().second;
  }
  return file;
}

Result<TorchxConfig> TorchxConfig::Load(const EnvLookup& env, const std::string& cwd) {
  std::vector<std::string> paths;
  if (auto explicit_path = env("TORCHXCONFIG")) {
    if (!explicit_path->empty()) {
      if (!FileExists(*explicit_path)) {
        return Fail(Error::NotFound("$TORCHXCONFIG names " + *explicit_path +
                                    ", which does not exist; fix or unset TORCHXCONFIG"));
      }
      paths.push_back(*explicit_path);
    }
  } else {
    if (auto home = env("HOME"); home && FileExists(*home + "/.torchxconfig")) {
      paths.push_back(*home + "/.torchxconfig");
    }
    std::string local = cwd + "/.torchxconfig";
    if (FileExists(local) && (paths.empty() || paths[0] != local)) paths.push_back(local);
  }
  std::vector<IniFile> files;
  for (const auto& path : paths) {
    auto text = ReadFile(path);
    if (!text) return Fail(text.error());
    auto file = ParseIni(*text, path);
    if (!file) return Fail(file.error());
    files.push_back(std::move(*file));
  }
  return FromFiles(std::move(files));
}

TorchxConfig TorchxConfig::FromFiles(std::vector<IniFile> files) {
  TorchxConfig config;
  config.files_ = std::move(files);
  return config;
}

Result<void> TorchxConfig::ApplySchedulerDefaults(std::string_view scheduler, const RunOpts& opts,
                                                  Cfg& cfg,
                                                  std::vector<std::string>& warnings) const {
  for (const auto& file : files_) {
    for (const auto& [section, entries] : file.sections) {
      if (section != scheduler) continue;
      for (const auto& [key, value] : entries) {
        const RunOpt* opt = opts.Get(key);
        if (opt == nullptr) {
          warnings.push_back(file.path + ": [" + section + "] unknown run option `" + key + "`." +
                             DidYouMean(key, opts.Names()));
          continue;
        }
        if (cfg.count(opt->name) > 0) continue;  // -cfg or an earlier file set it
        if (value == "None") {
          cfg[opt->name] = CfgValue{};
          continue;
        }
        auto cast = opts.CastToType(*opt, value);
        if (!cast) return Fail(cast.error().WithContext(file.path + ": [" + section + "]"));
        cfg[opt->name] = std::move(*cast);
      }
    }
  }
  return {};
}

std::map<std::string, std::string> TorchxConfig::ComponentDefaults(
    std::string_view component) const {
  std::map<std::string, std::string> out;
  for (auto& [key, value] : Section("component:" + std::string(component))) out.emplace(key, std::move(value.value));
  return out;
}

std::map<std::string, TorchxConfig::Value> TorchxConfig::Section(std::string_view name) const {
  std::map<std::string, Value> out;
  for (const auto& file : files_) {
    for (const auto& [section, entries] : file.sections) {
      if (section != name) continue;
      for (const auto& [key, value] : entries) out.emplace(key, Value{value, file.path});  // earlier file wins
    }
  }
  return out;
}

namespace {

// A default as configparser writes TorchX's `f"{opt.default}"`.
std::string TemplateValue(const CfgValue& value) {
  if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
    return list->empty() ? "None" : Join(*list, ";");
  }
  if (const auto* map = std::get_if<std::map<std::string, std::string>>(&value)) {
    std::vector<std::string> items;
    for (const auto& [k, v] : *map) items.push_back(k + ":" + v);
    return items.empty() ? "None" : Join(items, ";");
  }
  if (const auto* str = std::get_if<std::string>(&value)) return *str;
  return CfgValueRepr(value);
}

}  // namespace

Result<std::string> ConfigTemplate(const std::vector<std::string>& schedulers, bool all) {
  std::string out;
  for (const auto& name : schedulers) {
    auto opts = SchedulerRunOpts(name);
    if (!opts) return Fail(Error::InvalidArgument(opts.error().message));
    out += "[" + name + "]\n";
    for (const auto& opt : (*opts)->options()) {
      std::string value;
      if (opt.required) {
        value = "#FIXME:(" + std::string(OptTypeName(opt.type)) + ") " + opt.help;
        if (value.size() > 60) {
          value.resize(60);
          value += "...";
        }
      } else if (all) {
        value = TemplateValue(opt.default_value);
      } else {
        continue;
      }
      out += opt.name + " = " + value + "\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace torchxd::core
