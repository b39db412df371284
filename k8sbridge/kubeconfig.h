// KubeConfig: where the kube-apiserver is and how to authenticate, found as
// kubectl and client-go find it:
//   1. an explicit file (torchxd --kubeconfig), else
//   2. $KUBECONFIG, a ':'-separated list merged first-wins (as kubectl), else
//   3. ~/.kube/config when it exists, else
//   4. in-cluster: $KUBERNETES_SERVICE_HOST/_PORT with the pod's service
//      account token, CA and namespace.
// From the kubeconfig: the current context (or a named one), its cluster
// (server, certificate-authority[-data], insecure-skip-tls-verify), user
// (client-certificate[-data], client-key[-data], token, tokenFile) and
// namespace. Relative file paths are relative to the kubeconfig's folder.
// TLS is verified unless the cluster says insecure-skip-tls-verify.
// Credential plugins (exec, auth-provider) and basic auth are refused with a
// clear error. The token is never logged.
//
// Thread contract: pure, except for reading the files named.
#ifndef TORCHXD_K8SBRIDGE_KUBECONFIG_H_
#define TORCHXD_K8SBRIDGE_KUBECONFIG_H_

#include <optional>
#include <string>

#include "core/environment.h"
#include "core/result.h"
#include "net/http_client.h"

namespace torchxd::k8sbridge {

struct KubeConfig {
  std::string server;  // e.g. https://10.0.0.1:6443 (no trailing '/')
  std::string namespace_ = "default";
  std::string token;
  net::TlsOptions tls;
  std::string source;  // for messages: "kubeconfig /root/.kube/config (context prod)"
};

struct KubeConfigSearch {
  std::string explicit_path;              // --kubeconfig
  std::optional<std::string> context;     // default: current-context
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

[[nodiscard]] Result<KubeConfig> LoadKubeConfig(const KubeConfigSearch& search, const core::EnvLookup& env);

// Standard base64 (kubeconfig *-data fields); InvalidArgument on bad input.
[[nodiscard]] Result<std::string> DecodeBase64(const std::string& text);

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_KUBECONFIG_H_
