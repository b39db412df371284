// KubernetesScheduler's submit-time checks against the cluster, before the
// Job's own dry run: what Volcano would only find out when it creates the
// pods (the app then sits SUBMITTED forever) is refused here with the field.
//  1. The Volcano Queue exists, is Open and is not `root` (Volcano's webhook rules).
//  2. The service account exists in the namespace.
//  3. One pod per role (every replica's has the same shape) is created with
//     dryRun=All: the Pod API's own validation and admission (PodSecurity,
//     quotas' admission). A caller that may not create pods gets the local
//     check only (k8sbridge/pod_rules.h, always run), and a warning says so.
// A check the caller may not read (RBAC) is skipped with a warning, never a refusal.

#include <memory>
#include <set>

#include "core/log.h"
#include "k8sbridge/kube_api.h"
#include "k8sbridge/kubernetes_app.h"
#include "k8sbridge/labels.h"

namespace torchxd::k8sbridge {
namespace {

using nlohmann::json;

// Refusals are bad input (exit 2), as the Job dry run's are.
Error Refused(const std::string& why) { return Error::InvalidArgument("Invalid job spec: " + why); }

// RBAC's answer, not an admission's (PodSecurity also answers 403, with "is forbidden: violates").
bool NotAllowedToAsk(const Error& e) {
  return e.code == ErrorCode::kPermissionDenied && e.message.find("cannot ") != std::string::npos;
}

// A pod like the one Volcano makes of a task's template.
json PodOf(const json& job, const json& task) {
  std::string name = job["metadata"].value("name", "") + "-" + task.value("name", "") + "-0";
  json tmpl = task.value("template", json::object());
  json meta = tmpl.value("metadata", json::object());
  meta["name"] = name;
  json spec = tmpl.value("spec", json::object());
  if (job["spec"].contains("schedulerName")) spec["schedulerName"] = job["spec"]["schedulerName"];
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}};
}

}  // namespace

std::optional<Error> NamespaceRefusal(const Error& e, const std::string& ns) {
  if (e.code != ErrorCode::kNotFound || e.message.find("namespaces \"" + ns + "\" not found") == std::string::npos) {
    return std::nullopt;
  }
  return Refused("namespace: \"" + ns + "\" does not exist on the cluster (`kubectl get namespaces` lists them)");
}

struct KubernetesScheduler::ClusterCheck {
  std::string ns, queue, service_account;
  std::vector<json> pods;  // one per role
  std::vector<std::string> warnings;
  std::function<void(Result<std::vector<std::string>>)> done;
};

void KubernetesScheduler::CheckCluster(const std::string& ns, const json& job, const KubernetesOptions& options,
                                       std::function<void(Result<std::vector<std::string>>)> done) {
  auto check = std::make_shared<ClusterCheck>();
  check->ns = ns;
  check->queue = options.queue;
  check->service_account = options.service_account.value_or("");
  check->done = std::move(done);
  std::set<std::string> roles;
  for (const auto& task : job["spec"]["tasks"]) {
    std::string role = task["template"]["metadata"]["labels"].value(std::string(kLabelRoleName), "");
    if (roles.insert(role).second) check->pods.push_back(PodOf(job, task));
  }
  if (check->queue == "root") return check->done(Fail(Refused("queue `root` accepts no jobs: name a leaf queue")));
  CheckQueue(check);
}

void KubernetesScheduler::CheckQueue(std::shared_ptr<ClusterCheck> check) {
  api_->Call("GET", QueuePath(check->queue), nullptr, [this, check](Result<json> queue) {
    if (!queue) {
      const Error& e = queue.error();
      if (e.code == ErrorCode::kNotFound) {
        return check->done(Fail(Refused("queue `" + check->queue + "` does not exist on the cluster "
                                        "(`kubectl get queues` lists them)")));
      }
      if (e.code != ErrorCode::kPermissionDenied) return check->done(Fail(e.WithContext("checking the queue")));
      check->warnings.push_back("queue `" + check->queue + "` was not checked: " + e.message);
    } else {
      json status = queue->value("status", json::object());
      std::string state = status.is_object() ? status.value("state", "") : "";
      if (!state.empty() && state != "Open") {
        return check->done(Fail(Refused("queue `" + check->queue + "` is " + state +
                                        ": Volcano takes jobs only into Open queues")));
      }
    }
    CheckServiceAccount(check);
  });
}

void KubernetesScheduler::CheckServiceAccount(std::shared_ptr<ClusterCheck> check) {
  if (check->service_account.empty()) return CheckPods(check, 0);
  api_->Call("GET", ServiceAccountPath(check->ns, check->service_account), nullptr,
             [this, check](Result<json> account) {
               if (!account) {
                 const Error& e = account.error();
                 if (e.code == ErrorCode::kNotFound) {
                   return check->done(Fail(Refused("service_account: `" + check->service_account +
                                                   "` does not exist in namespace " + check->ns)));
                 }
                 if (e.code != ErrorCode::kPermissionDenied) {
                   return check->done(Fail(e.WithContext("checking the service account")));
                 }
                 check->warnings.push_back("service account `" + check->service_account +
                                           "` was not checked: " + e.message);
               }
               CheckPods(check, 0);
             });
}

void KubernetesScheduler::CheckPods(std::shared_ptr<ClusterCheck> check, size_t index) {
  if (index >= check->pods.size()) return check->done(std::move(check->warnings));
  json pod = check->pods[index];
  std::string name = pod["metadata"].value("name", "");
  api_->Call("POST", PodsPath(check->ns) + "?dryRun=All", &pod, [this, check, index, name](Result<json> made) {
    if (!made) {
      const Error& e = made.error();
      if (NotAllowedToAsk(e)) {
        // Without the right to create pods the local check is all there is.
        check->warnings.push_back("the pods were checked by torchxd's own rules only (no right to dry-run a pod: " +
                                  e.message + ")");
        return check->done(std::move(check->warnings));
      }
      if (e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kPermissionDenied) {
        return check->done(Fail(Refused("the cluster refuses pod " + name + ": " + e.message)));
      }
      if (auto refusal = NamespaceRefusal(e, check->ns)) return check->done(Fail(*refusal));
      return check->done(Fail(e.WithContext("checking the pods")));
    }
    CheckPods(check, index + 1);
  });
}

}  // namespace torchxd::k8sbridge
