// What each replica of a local app will run: the role with macros applied for
// that replica, and its environment composed as TorchX's local scheduler does
// (schedulers/local_scheduler.py _to_popen_request + _popen):
//   1. the submitting client's environment,
//   2. the role env (with TORCHX_JOB_ID) after macros,
//   3. TORCHX_RANK0_HOST=localhost, TORCHX_INTERNAL_SESSION_ID (overwrite),
//   4. TORCHELASTIC_ERROR_FILE, PET_LOG_DIR, PYTHONUNBUFFERED=x only where unset,
//   5. PATH = join([cwd if prepend_cwd], role PATH, [cwd if not], client PATH),
//      empty parts and edge colons dropped.
// Pure: image providers resolve img_root and cwd beforehand.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_REPLICA_REQUEST_H_
#define TORCHXD_CORE_REPLICA_REQUEST_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/app_def.h"
#include "core/replica_key.h"

namespace torchxd::core {

struct RoleLocation {
  std::string img_root;  // ${img_root}
  std::string cwd;       // the replica's working directory
};

struct LocalAppContext {
  std::string scheduler;  // "local_cwd"
  std::string session;    // "torchx"
  std::string app_id;
  std::string session_id;  // TORCHX_INTERNAL_SESSION_ID
  std::string app_log_dir;  // {log_dir}/{session}/{app_id}
  bool prepend_cwd = false;
  std::map<std::string, std::string> client_env;
  std::vector<RoleLocation> roles;  // one per AppDef role
};

struct ReplicaRequest {
  std::string role;
  int replica_id = 0;
  std::string entrypoint;
  std::vector<std::string> args;
  // The environment in three layers, each over the one before: what it
  // inherits (the submitting client's), one copy shared by every replica of
  // the app; the role's variables that macros make the same for every replica
  // of it, one copy shared by them; and what this replica alone sets (the
  // role's variables that name its replica_id, TorchX's, PATH, its GPUs).
  // An app's memory grows with its environment once, not once per replica.
  // Environment() is the whole.
  std::shared_ptr<const std::map<std::string, std::string>> inherited;
  std::shared_ptr<const std::map<std::string, std::string>> role_env;
  std::map<std::string, std::string> env;
  std::string cwd;
  std::string log_dir;  // ReplicaLogDir(app_log_dir, Key())
  int cpu = -1;         // the role's resource, for the limits its containment may enforce
  int mem_mb = -1;
  // Containers only (local_docker, core/docker_container.h): the container's
  // name and the Docker Engine API create body; empty for processes.
  std::string container_name;
  nlohmann::json container;

  ReplicaKey Key() const { return {role, replica_id}; }
  // The complete environment, in name order: `inherited` with `env` over it.
  std::map<std::string, std::string> Environment() const;
  // Each variable of the complete environment once, in name order, the
  // upper layer's value where two set it, without building it.
  template <class F>
  void ForEachVariable(F f) const {
    static const std::map<std::string, std::string> kNone;
    const auto& base = inherited ? *inherited : kNone;
    const auto& shared = role_env ? *role_env : kNone;
    auto b = base.begin();
    auto s = shared.begin();
    auto e = env.begin();
    while (b != base.end() || s != shared.end() || e != env.end()) {
      const std::string* first = nullptr;
      for (const auto* at : {b != base.end() ? &b->first : nullptr, s != shared.end() ? &s->first : nullptr,
                             e != env.end() ? &e->first : nullptr}) {
        if (at != nullptr && (first == nullptr || *at < *first)) first = at;
      }
      const std::string* value = nullptr;
      const std::string& key = *first;  // a node of its map: valid after the iterators move on
      if (b != base.end() && b->first == key) value = &(b++)->second;
      if (s != shared.end() && s->first == key) value = &(s++)->second;
      if (e != env.end() && e->first == key) value = &(e++)->second;
      f(key, *value);
    }
  }
  // The value `name` has in the complete environment, or nothing.
  const std::string* Find(const std::string& name) const;
  // Bytes of environment and arguments its process gets ("k=v" and each
  // argument with their terminators): what its start costs in memory.
  size_t ExpandedBytes() const;
};

// Linux refuses to exec a process one of whose arguments or "k=v" variables
// is longer than this, its NUL included (MAX_ARG_STRLEN: 32 pages).
inline constexpr size_t kMaxExecString = 32 * 4096;
// Why the kernel would refuse to exec `r`'s process (E2BIG): an argument or a
// variable of kMaxExecString or more, named, or all of them with their
// pointers past `arg_max` (sysconf(_SC_ARG_MAX)). "" when it would start.
std::string ExecLimitProblem(const ReplicaRequest& r, size_t arg_max);

// TorchX's _join_PATH: ":".join(p.strip(":") for p in parts if p).
std::string JoinPath(const std::vector<std::string>& parts);

std::vector<ReplicaRequest> BuildReplicaRequests(const AppDef& app, const LocalAppContext& ctx);

// The ExpandedBytes of all of an app's replicas, estimated from the AppDef
// and the client's environment before any of it is built, whichever
// scheduler runs it: macros counted at their longest (${img_root} as
// `img_root_len` bytes), the few variables torchxd adds left out. A few
// bytes of AppDef can stand for gigabytes once substituted; this is known
// in one pass over the request. Saturates, never wraps.
// What else of it is copied for each replica is counted too (image,
// ports, mounts, capabilities, devices, and `per_replica` bytes from
// outside the AppDef: cwd, cfg), and each argument, variable, port or
// device costs kElementBytes besides its text.
uint64_t EstimateExpandedBytes(const AppDef& app, const std::map<std::string, std::string>& client_env,
                               size_t img_root_len, uint64_t per_replica = 0);
inline constexpr uint64_t kElementBytes = 256;
// What a request copies for each replica from outside its AppDef: the cwd
// (a replica's, its PATH's, its log paths'), the cfg (Slurm's options,
// log_dir) and the session, each at its escaped size.
uint64_t CopiedPerReplica(std::string_view cwd, std::string_view cfg_json, std::string_view session);
// `text`'s size at its most escaped: a control character is 6 bytes in JSON
// (\u0001), a single quote 5 in a shell's quoting ('"'"'), '"' and '\' 2.
uint64_t EscapedBytes(std::string_view text);

// TorchX's auto_set_cuda_visible_devices: gives each replica of a role with
// gpu > 0 a contiguous slice of the `device_count` GPUs, in role then replica
// order, overwriting CUDA_VISIBLE_DEVICES. All or nothing: when the app asks
// for more GPUs than exist nothing is set and the warning is returned.
std::string AssignCudaVisibleDevices(const AppDef& app, std::vector<ReplicaRequest>& requests,
                                     int device_count);

// The request without the inherited client environment (for --dryrun output).
nlohmann::json ReplicaRequestToJson(const ReplicaRequest& request,
                                    const std::map<std::string, std::string>& client_env);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_REPLICA_REQUEST_H_
