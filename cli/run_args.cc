#include "cli/run_args.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_parse.h"
#include "core/text.h"

namespace torchxd::cli {
namespace {

using nlohmann::json;

// A component argument given as a JSON value, in the form the component's
// own parser reads on a command line.
std::string ArgText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_array()) {
    std::vector<std::string> parts;
    for (const auto& e : v) parts.push_back(ArgText(e));
    return core::Join(parts, ",");
  }
  if (v.is_object()) {
    std::vector<std::string> parts;
    for (const auto& [k, e] : v.items()) parts.push_back(k + "=" + ArgText(e));
    return core::Join(parts, ",");
  }
  return v.dump();
}

Result<void> CheckRepeatedOptions(const std::vector<std::string>& args) {
  std::vector<std::string> repeated;
  std::set<std::string> seen;
  for (const auto& a : args) {
    if (a == "--") {
      seen.clear();
      continue;
    }
    if (a.empty() || a[0] != '-' || core::Trim(a) == "-" || core::Trim(a) == "--") continue;
    if (!seen.insert(a).second && std::find(repeated.begin(), repeated.end(), a) == repeated.end()) {
      repeated.push_back(a);
    }
  }
  if (repeated.empty()) return {};
  std::vector<std::string> quoted;
  for (const auto& r : repeated) quoted.push_back("'" + r + "'");
  return Fail(Error::InvalidArgument("Repeated Command Line Arguments: [" + core::Join(quoted, ", ") + "]"));
}

}  // namespace

Result<bool> ParseIniBool(const std::string& text) {
  std::string t = core::ToLower(core::Trim(text));
  if (t == "1" || t == "yes" || t == "true" || t == "on") return true;
  if (t == "0" || t == "no" || t == "false" || t == "off") return false;
  return Fail(Error::InvalidArgument("`" + text + "` is not a boolean (true/false, yes/no, on/off, 1/0)"));
}

Result<void> ApplyStdinRunArgs(std::string_view text, RunArgs& args) {
  json j = core::ParseJsonOrDiscarded(text);
  if (j.is_discarded()) {
    return Fail(Error::InvalidArgument("--stdin: standard input is not valid JSON (a TorchX run-args object)"));
  }
  if (!j.is_object()) return Fail(Error::InvalidArgument("--stdin: expected a JSON object, got " + std::string(j.type_name())));
  static const std::set<std::string> kFields = {
      "component_name", "scheduler", "scheduler_args", "scheduler_cfg", "dryrun", "wait", "log", "workspace",
      "parent_run_id", "tee_logs", "component_args", "component_args_str", "detach"};
  std::vector<std::string> unknown;
  for (const auto& [key, _] : j.items()) {
    if (!kFields.count(key)) unknown.push_back(key);
  }
  if (!unknown.empty()) {
    return Fail(Error::InvalidArgument("--stdin: these fields are not run arguments: " + core::Join(unknown, ", ")));
  }
  for (const char* required : {"component_name", "scheduler"}) {
    if (!j.contains(required)) return Fail(Error::InvalidArgument(std::string("--stdin: `") + required + "` is required"));
  }
  auto str = [&](const char* key) -> Result<std::optional<std::string>> {
    if (!j.contains(key) || j[key].is_null()) return std::optional<std::string>{};
    if (!j[key].is_string()) return Fail(Error::InvalidArgument(std::string("--stdin: `") + key + "` must be a string"));
    return std::optional<std::string>(j[key].get<std::string>());
  };
  auto boolean = [&](const char* key, bool& out) -> Result<void> {
    if (!j.contains(key)) return {};
    if (!j[key].is_boolean()) return Fail(Error::InvalidArgument(std::string("--stdin: `") + key + "` must be true or false"));
    out = j[key].get<bool>();
    return {};
  };
  auto component = str("component_name");
  if (!component) return Fail(component.error());
  auto scheduler = str("scheduler");
  if (!scheduler) return Fail(scheduler.error());
  auto workspace = str("workspace");
  if (!workspace) return Fail(workspace.error());
  auto parent = str("parent_run_id");
  if (!parent) return Fail(parent.error());
  if (!*component || !*scheduler) return Fail(Error::InvalidArgument("--stdin: `component_name` and `scheduler` must be strings"));
  for (auto [key, out] : {std::pair{"dryrun", &args.dryrun}, std::pair{"wait", &args.wait},
                          std::pair{"log", &args.log}, std::pair{"tee_logs", &args.tee_logs}}) {
    if (auto ok = boolean(key, *out); !ok) return ok;
  }
  if (j.contains("detach")) {
    bool d = false;
    if (auto ok = boolean("detach", d); !ok) return ok;
    args.detach = d;
  }
  args.scheduler = **scheduler;
  args.workspace = *workspace;
  args.parent_run_id = *parent;
  for (const char* key : {"scheduler_args", "scheduler_cfg"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_object()) return Fail(Error::InvalidArgument(std::string("--stdin: `") + key + "` must be an object"));
    if (!j[key].empty()) args.scheduler_args_json = j[key].dump();
  }
  args.rest = {**component};
  if (j.contains("component_args_str") && !j["component_args_str"].empty()) {
    const json& list = j["component_args_str"];
    if (!list.is_array()) return Fail(Error::InvalidArgument("--stdin: `component_args_str` must be a list of strings"));
    for (const auto& a : list) {
      if (!a.is_string()) return Fail(Error::InvalidArgument("--stdin: `component_args_str` must be a list of strings"));
      args.rest.push_back(a.get<std::string>());
    }
  } else if (j.contains("component_args") && !j["component_args"].is_null()) {
    const json& kwargs = j["component_args"];
    if (!kwargs.is_object()) return Fail(Error::InvalidArgument("--stdin: `component_args` must be an object"));
    for (const auto& [name, value] : kwargs.items()) {
      if (value.is_null()) continue;
      args.rest.push_back("--" + name);
      args.rest.push_back(ArgText(value));
    }
  }
  return {};
}

Result<void> ApplyRunSection(const std::map<std::string, core::TorchxConfig::Value>& section, RunArgs& args,
                             std::vector<std::string>& warnings) {
  auto where = [](const std::string& key, const core::TorchxConfig::Value& v) {
    return "[cli:run] " + key + " in " + v.file;
  };
  bool attach_asked = args.wait || args.log;  // on the command line
  for (const auto& entry : section) {
    const std::string& key = entry.first;  // named, not bound: clang 14 captures no bindings
    const core::TorchxConfig::Value& v = entry.second;
    auto flag = [&](bool& out) -> Result<void> {
      auto b = ParseIniBool(v.value);
      if (!b) return Fail(Error::InvalidArgument(where(key, v) + ": " + b.error().message));
      out = out || *b;
      return {};
    };
    if (key == "scheduler") {
      if (!args.scheduler) args.scheduler = core::Trim(v.value);
    } else if (key == "workspace") {
      if (!args.workspace) args.workspace = v.value;
    } else if (key == "scheduler_args") {
      if (args.scheduler_args.empty() && !args.scheduler_args_json) args.scheduler_args = v.value;
    } else if (key == "parent_run_id") {
      if (!args.parent_run_id) args.parent_run_id = v.value;
    } else if (key == "detach") {
      auto b = ParseIniBool(v.value);
      if (!b) return Fail(Error::InvalidArgument(where(key, v) + ": " + b.error().message));
      if (!args.detach && !attach_asked) args.detach = *b;
    } else if (key == "wait") {
      if (auto ok = flag(args.wait); !ok) return ok;
    } else if (key == "log") {
      if (auto ok = flag(args.log); !ok) return ok;
    } else if (key == "tee_logs") {
      if (auto ok = flag(args.tee_logs); !ok) return ok;
    } else if (key != "component") {
      warnings.push_back("`" + key + " = " + v.value + "` in [cli:run] of " + v.file +
                         " is not a `torchx run` argument; ignored");
    }
  }
  return {};
}

Result<void> SplitComponent(RunArgs& args, const std::string& default_component) {
  std::vector<std::string> words = args.rest;
  if (!words.empty() && words[0] == "--") words.erase(words.begin());
  args.component = default_component;
  args.component_args.clear();
  if (!words.empty()) {
    if (core::StartsWith(words[0], "-")) {
      args.component_args = words;
    } else {
      args.component = words[0];
      args.component_args.assign(words.begin() + 1, words.end());
    }
  }
  if (auto ok = CheckRepeatedOptions(args.component_args); !ok) return ok;
  if (args.component.empty() && !words.empty() && core::StartsWith(words[0], "-")) {
    // Before a component, only run's own options: argparse's "unrecognized arguments".
    return Fail(Error::InvalidArgument("unrecognized arguments: " + words[0] +
                                       " (missing COMPONENT: torchx run's own options come before it, the "
                                       "component's after it; see `torchx run --help`)"));
  }
  if (args.component.empty()) {
    return Fail(Error::InvalidArgument(
        "missing COMPONENT: pass a builtin (see `torchx builtins`), a PATH.py:FUNCTION component, a path to "
        "an AppDef JSON file, or set `component` in .torchxconfig's [cli:run]"));
  }
  return {};
}

Result<void> CompleteRunArgs(RunArgs& args, const core::TorchxConfig& config, std::string_view stdin_text,
                             const core::EnvLookup& env, std::vector<std::string>& warnings) {
  if (args.from_stdin) {
    std::vector<std::string> given;
    if (args.scheduler) given.push_back("--scheduler");
    if (!args.scheduler_args.empty()) given.push_back("--scheduler_args");
    if (args.dryrun) given.push_back("--dryrun");
    if (args.wait) given.push_back("--wait");
    if (args.log) given.push_back("--log");
    if (args.detach) given.push_back("--detach");
    if (args.workspace) given.push_back("--workspace");
    if (args.parent_run_id) given.push_back("--parent_run_id");
    if (args.tee_logs) given.push_back("--tee_logs");
    if (!args.rest.empty()) given.push_back("COMPONENT");
    if (!given.empty()) {
      return Fail(Error::InvalidArgument("Cannot specify " + core::Join(given, ", ") +
                                         " when using --stdin. All configuration should be provided in JSON input."));
    }
    if (auto ok = ApplyStdinRunArgs(stdin_text, args); !ok) return ok;
  }
  if (args.detach.value_or(false) && (args.wait || args.log)) {
    return Fail(Error::InvalidArgument("-d/--detach returns at once: it cannot go with --wait or --log"));
  }
  auto section = config.Section("cli:run");
  if (!args.from_stdin) {
    if (auto ok = ApplyRunSection(section, args, warnings); !ok) return ok;
  }
  if (args.detach.value_or(false) && (args.wait || args.log)) args.detach = false;  // [cli:run] wait/log
  std::string default_component;
  if (auto it = section.find("component"); it != section.end() && !args.from_stdin) {
    default_component = core::Trim(it->second.value);
  }
  if (auto ok = SplitComponent(args, default_component); !ok) return ok;
  if (auto from_env = env("TORCHX_PARENT_RUN_ID"); from_env && !from_env->empty()) args.parent_run_id = *from_env;
  return {};
}

}  // namespace torchxd::cli
