// Kubernetes' own rules for what a Volcano Job embeds, checked before it is
// sent. The Job CRD does not validate its pod templates, so a server-side dry
// run of the Job accepts what the Pod API later refuses, and the app would sit
// SUBMITTED forever; these rules are the kube-apiserver's (apimachinery's
// validation and core/v1's ValidatePodSpec) for the fields the translation
// writes: label and annotation keys and values, names that must be DNS-1123
// labels or subdomains, environment variable names, port names (IANA service
// names) and numbers, resource names and quantities (extended resources:
// whole numbers, requests equal to limits), volume and mount names, node
// selectors and toleration keys.
//
// Errors name the field as the apiserver does:
//   spec.tasks[0].template.spec.containers[0].env[2].name: Invalid value: "1BAD": a valid environment variable name …
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_K8SBRIDGE_POD_RULES_H_
#define TORCHXD_K8SBRIDGE_POD_RULES_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace torchxd::k8sbridge {

// Every violation in the Job's task templates ("" = none), one per line.
std::vector<std::string> CheckPodTemplates(const nlohmann::json& job);

// The single rules, for tests and other callers ("" = valid, else why not).
std::string CheckDns1123Label(const std::string& value);
std::string CheckDns1123Subdomain(const std::string& value);
std::string CheckQualifiedName(const std::string& value);  // label / annotation keys
std::string CheckLabelValue(const std::string& value);
std::string CheckEnvVarName(const std::string& value);
std::string CheckPortName(const std::string& value);  // IANA_SVC_NAME
std::string CheckQuantity(const std::string& value);

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_POD_RULES_H_
