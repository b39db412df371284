#include "cli/argv.h"

#include <algorithm>

namespace torchxd::cli {
namespace {

bool TakesValue(const std::string& flag) {
  return flag == "-s" || flag == "--scheduler" || flag == "--scheduler_args" || flag == "-cfg" ||
         flag == "--workspace" || flag == "--buck-target" || flag == "--parent_run_id";
}

}  // namespace

std::vector<std::string> NormalizeArgv(int argc, char** argv) {
  return NormalizeArgs(std::vector<std::string>(argv + 1, argv + argc));
}

std::vector<std::string> NormalizeArgs(std::vector<std::string> args) {
  auto run = std::find(args.begin(), args.end(), "run");
  if (run == args.end()) {
    // `list` takes -cfg too (it has no component to stop at).
    auto list = std::find(args.begin(), args.end(), "list");
    for (auto it = list; it != args.end(); ++it) {
      if (*it == "-cfg") *it = "--scheduler_args";
      if (it->rfind("-cfg=", 0) == 0) *it = "--scheduler_args=" + it->substr(5);
    }
    return args;
  }
  for (auto it = run + 1; it != args.end(); ++it) {
    if (*it == "-cfg") {
      *it = "--scheduler_args";
    } else if (it->rfind("-cfg=", 0) == 0) {
      *it = "--scheduler_args=" + it->substr(5);
      continue;
    }
    if (it->empty() || (*it)[0] != '-' || *it == "--") break;  // COMPONENT: stop touching
    if (it->find('=') == std::string::npos && TakesValue(*it) && it + 1 != args.end()) ++it;
  }
  return args;
}

std::vector<std::string> TakeRunRemainder(std::vector<std::string>& args) {
  auto run = std::find(args.begin(), args.end(), "run");
  if (run == args.end()) return {};
  for (auto it = run + 1; it != args.end(); ++it) {
    if (*it == "--") {
      std::vector<std::string> rest(it + 1, args.end());
      args.erase(it, args.end());
      return rest;
    }
    if (it->empty() || (*it)[0] != '-') break;  // COMPONENT
    if (it->find('=') == std::string::npos && TakesValue(*it) && it + 1 != args.end()) ++it;
  }
  return {};
}

}  // namespace torchxd::cli
