// What each replica of a local_docker app runs: one container per replica,
// mapped as TorchX's docker scheduler does (shared/reference/torchx.md §3):
// name = hostname = "{app_id[-30:]}-{role[:30]}-{replica}" (leading
// non-alphanumerics dropped), the four torchx.pytorch.org labels, the
// user-defined bridge network "torchx" (an alias per container, so replicas
// reach each other by name), Cmd = [entrypoint] + args with macros
// (img_root "", rank0_env TORCHX_RANK0_HOST), Env = copy_env matches, then
// cfg env, then role env, plus TORCHX_RANK0_HOST (rank 0's container name),
// TORCHX_IMAGE and TORCHX_JOB_ID; bind / volume / device mounts; memMB ->
// Memory and ShmSize; cpu -> NanoCpus; gpu -> a DeviceRequest; EFA and
// Neuron devices as /dev paths; `privileged`. Restarts are torchxd's
// (the same retry policies as local replicas), not the engine's.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_DOCKER_CONTAINER_H_
#define TORCHXD_CORE_DOCKER_CONTAINER_H_

#include <map>
#include <string>
#include <vector>

#include "core/app_def.h"
#include "core/replica_request.h"

namespace torchxd::core {

inline constexpr std::string_view kDockerNetwork = "torchx";

struct DockerAppContext {
  std::string session = "torchx";
  std::string app_id;
  std::string app_log_dir;                  // {log_dir}/{session}/{app_id}
  std::vector<std::string> copy_env;        // fnmatch globs over client_env
  std::map<std::string, std::string> env;   // the `env` run option
  bool privileged = false;
  std::map<std::string, std::string> client_env;
};

// TorchX's container name for a replica.
std::string ContainerName(const std::string& app_id, const std::string& role, int replica_id);

// One request per replica, with container_name and the create body set;
// `warnings` gets what was skipped (unknown device kinds).
std::vector<ReplicaRequest> BuildContainerRequests(const AppDef& app, const DockerAppContext& ctx,
                                                   std::vector<std::string>* warnings);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_DOCKER_CONTAINER_H_
