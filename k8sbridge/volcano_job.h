// AppDef -> Volcano Job (batch.volcano.sh/v1alpha1), a pure function.
//
// By default the shape is TorchX's (torchx.md §4.2): one Volcano task per
// replica (so ${replica_id} stays exact), svc(--publish-not-ready-addresses)
// and env plugins, a /dev/shm emptyDir, the istio annotation, TorchX's eight
// pod labels, reserved CPU/memory subtracted from requests, GPUs as
// nvidia.com/gpu, TORCHX_RANK0_HOST on role 0 / replica 0 and
// VC_<ROLE0>_0_HOSTS elsewhere, mounts as hostPath / PVC / device hostPath,
// the instance-type node selector, min_replicas as task minAvailable (and the Job's, their sum).
// Where volcano.md shows TorchX falls short:
//   - retry policies map per policy: APPLICATION and ROLE -> RestartJob (ROLE
//     has no narrower Volcano action across one-task-per-replica; a warning
//     says so), REPLICA -> RestartTask on that replica's own task;
//   - Resource.devices go into requests and limits;
//   - the Job carries app.kubernetes.io/managed-by and torchx.pytorch.org/app-name
//     labels itself, so `list` can select torchx's jobs;
//   - node selector, tolerations, scheduler name and an explicit rendezvous
//     endpoint are run options; device mounts do not force `privileged`.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_K8SBRIDGE_VOLCANO_JOB_H_
#define TORCHXD_K8SBRIDGE_VOLCANO_JOB_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/app_def.h"
#include "core/result.h"
#include "core/runopts.h"

namespace torchxd::k8sbridge {

struct KubernetesOptions {
  std::string queue;  // required
  std::string namespace_ = "default";  // KubernetesOptionsFromCfg: "" when not given (the kubeconfig's then)
  std::optional<std::string> service_account;
  std::optional<std::string> priority_class;
  std::string scheduler_name = "volcano";
  int reserved_millicpu = 100;
  int reserved_memmb = 1024;
  bool validate_spec = true;  // also: the 63-character pod-name check
  std::map<std::string, std::string> node_selector;
  std::vector<std::string> tolerations;  // "key[=value]:Effect" or "key:Exists"-style, see ParseToleration
  bool privileged = false;
  // The rendezvous host every replica uses (TORCHX_RANK0_HOST), e.g. rank 0's
  // address on a secondary (RDMA) network; empty = the svc plugin's DNS name.
  std::string rdzv_host;
  // TorchX's efa_device_count: unset = the role's devices, 0 = no EFA, N = N EFA devices.
  std::optional<int> efa_device_count;
};

inline constexpr std::string_view kEfaDevice = "vpc.amazonaws.com/efa";

struct VolcanoJob {
  std::string name;        // metadata.name (the app id's job part)
  nlohmann::json body;     // the exact object sent to the API server
  std::vector<std::string> warnings;
};

// The options from `torchx runopts kubernetes` values (already resolved).
KubernetesOptions KubernetesOptionsFromCfg(const core::Cfg& cfg);

// Cleans a label value as TorchX does: chars outside [A-Za-z0-9-_.] -> '.',
// leading/trailing non-alphanumerics -> '.', at most 63 characters.
std::string CleanLabelValue(const std::string& value, const std::string& fallback);

[[nodiscard]] Result<VolcanoJob> AppDefToVolcanoJob(const core::AppDef& app, const std::string& unique_app_id,
                                                    const KubernetesOptions& options);

// Elastic scale of the Job AppDefToVolcanoJob made: a JSON Patch (RFC 6902)
// giving role `role`'s tasks replicas 1 below `replicas` and 0 from it on.
// Each replace is preceded by a test of that task's name, so a Job laid out
// otherwise is refused by the server rather than changed.
nlohmann::json ScalePatch(const core::AppDef& app, size_t role, int replicas);

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_VOLCANO_JOB_H_
