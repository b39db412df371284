// EnvLookup: how client-side resolution (components, .torchxconfig, named
// resources) reads environment variables, so tests can pass a map instead of
// mutating the process environment.
//
// Thread contract: ProcessEnv() reads getenv(); do not call it while another
// thread calls setenv.
#ifndef TORCHXD_CORE_ENVIRONMENT_H_
#define TORCHXD_CORE_ENVIRONMENT_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace torchxd::core {

using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

EnvLookup ProcessEnv();
EnvLookup MapEnv(std::map<std::string, std::string> env);
// The process's whole environment as a map (what `torchx run` sends as the caller's).
std::map<std::string, std::string> ProcessEnvMap();

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_ENVIRONMENT_H_
