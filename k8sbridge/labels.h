// Every label and annotation key torchxd puts on Kubernetes objects, in one
// place (shared/STYLE.md §8). Values are TorchX's.
#ifndef TORCHXD_K8SBRIDGE_LABELS_H_
#define TORCHXD_K8SBRIDGE_LABELS_H_

#include <string_view>

namespace torchxd::k8sbridge {

inline constexpr std::string_view kLabelVersion = "torchx.pytorch.org/version";
inline constexpr std::string_view kLabelAppName = "torchx.pytorch.org/app-name";
inline constexpr std::string_view kLabelRoleIndex = "torchx.pytorch.org/role-index";
inline constexpr std::string_view kLabelRoleName = "torchx.pytorch.org/role-name";
inline constexpr std::string_view kLabelReplicaId = "torchx.pytorch.org/replica-id";
inline constexpr std::string_view kLabelKubeAppName = "app.kubernetes.io/name";
inline constexpr std::string_view kLabelManagedBy = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kLabelInstance = "app.kubernetes.io/instance";
inline constexpr std::string_view kManagedByTorchx = "torchx.pytorch.org";
inline constexpr std::string_view kAnnotationIstioInject = "sidecar.istio.io/inject";

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_LABELS_H_
