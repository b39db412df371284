// Kubernetes' own rules for pod templates, and a translation that breaks them
// refused before anything is sent (the cases a real cluster showed the Job
// dry run lets through).
#include "k8sbridge/pod_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "k8sbridge/volcano_job.h"

namespace torchxd::k8sbridge {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

TEST(PodRulesTest, NamesAndValuesFollowTheApiserversRules) {
  struct Case {
    const char* name;
    std::string (*check)(const std::string&);
    std::string value;
    const char* why;  // "" = valid
  };
  for (const Case& c : std::vector<Case>{
           {"label", CheckDns1123Label, "trainer-0", ""},
           {"label upper", CheckDns1123Label, "Trainer", "lowercase RFC 1123 label"},
           {"label long", CheckDns1123Label, std::string(64, 'a'), "no more than 63 characters"},
           {"subdomain", CheckDns1123Subdomain, "sa.team-a", ""},
           {"subdomain dots", CheckDns1123Subdomain, "a..b", "lowercase RFC 1123 subdomain"},
           {"qualified", CheckQualifiedName, "example.com/My_Name", ""},
           {"qualified bad prefix", CheckQualifiedName, "Example.com/x", "prefix part"},
           {"qualified two slashes", CheckQualifiedName, "a/b/c", "a qualified name"},
           {"qualified bad name", CheckQualifiedName, "nvidia.com/gpu!", "name part must consist"},
           {"label value", CheckLabelValue, "", ""},
           {"label value space", CheckLabelValue, "my team", "a valid label must be an empty string"},
           {"env", CheckEnvVarName, "MY_ENV.name-1", ""},
           {"env digit", CheckEnvVarName, "1BAD", "must not start with a digit"},
           {"env space", CheckEnvVarName, "A B", "a valid environment variable name"},
           {"port", CheckPortName, "tensorboard", ""},
           {"port long", CheckPortName, "tensorboard-port", "no more than 15 characters"},
           {"port digits", CheckPortName, "8080", "at least one letter"},
           {"port hyphens", CheckPortName, "a--b", "consecutive hyphens"},
           {"port edge", CheckPortName, "-http", "must not begin or end with a hyphen"},
           {"port upper", CheckPortName, "HTTP", "only alpha-numeric characters (a-z, 0-9)"},
           {"quantity", CheckQuantity, "1500m", ""},
           {"quantity exp", CheckQuantity, "1e3", ""},
           {"quantity binary", CheckQuantity, "64Gi", ""},
           {"quantity bad", CheckQuantity, "lots", "quantities must match"},
           {"quantity suffix", CheckQuantity, "5GB", "quantities must match"},
       }) {
    SCOPED_TRACE(c.name);
    std::string why = c.check(c.value);
    if (std::string(c.why).empty()) {
      EXPECT_EQ(why, "");
    } else {
      EXPECT_THAT(why, HasSubstr(c.why));
    }
  }
}

class TranslationRulesTest : public ::testing::Test {
 protected:
  core::AppDef App() {
    core::AppDef app;
    app.name = "train";
    core::Role r;
    r.name = "trainer";
    r.image = "pytorch/pytorch";
    r.entrypoint = "python";
    r.num_replicas = 1;
    r.resource.cpu = 1;
    r.resource.mem_mb = 2048;
    app.roles.push_back(r);
    return app;
  }
  std::string Refused(const core::AppDef& app) {
    KubernetesOptions o;
    o.queue = "default";
    auto job = AppDefToVolcanoJob(app, "train-1", o);
    return job ? std::string("accepted") : job.error().message;
  }
};

TEST_F(TranslationRulesTest, WhatThePodApiWouldRefuseIsRefusedNamingTheField) {
  EXPECT_EQ(Refused(App()), "accepted");
  core::AppDef env = App();
  env.roles[0].env["1BAD"] = "x";
  EXPECT_THAT(Refused(env), HasSubstr("spec.tasks[0].template.spec.containers[0].env[0].name: Invalid value: "
                                      "\"1BAD\": a valid environment variable name"));
  core::AppDef device = App();
  device.roles[0].resource.devices = {{"rdma shared", 1}};
  EXPECT_THAT(Refused(device), HasSubstr("spec.tasks[0].template.spec.containers[0].resources.limits[rdma shared]"));
  core::AppDef port = App();
  port.roles[0].port_map = {{"tensorboard-port", 6006}};
  EXPECT_THAT(Refused(port), HasSubstr("ports[0].name: Invalid value: \"tensorboard-port\": must be no more than 15"));
  core::AppDef big = App();
  big.roles[0].port_map = {{"web", 70000}};
  EXPECT_THAT(Refused(big), HasSubstr("ports[0].containerPort: Invalid value: \"70000\": must be between 1 and 65535"));
  core::AppDef labels = App();
  labels.roles[0].resource.capabilities = {{"kubernetes.pod.labels", {{"team", "my team"}}}};
  EXPECT_THAT(Refused(labels), HasSubstr("metadata.labels[team]: Invalid value: \"my team\""));
  core::AppDef annotation = App();
  annotation.roles[0].resource.capabilities = {{"kubernetes.pod.annotations", {{"bad key!", "x"}}}};
  EXPECT_THAT(Refused(annotation), HasSubstr("metadata.annotations: Invalid value: \"bad key!\""));
}

TEST(PodRulesTest, ExtendedResourcesAreWholeAndRequestedAsLimited) {
  json job = {{"spec",
               {{"tasks",
                 {{{"template",
                    {{"spec",
                      {{"containers",
                        {{{"name", "main"},
                          {"image", "x"},
                          {"resources",
                           {{"limits", {{"example.com/fpga", "1.5"}, {"vendor.io/nic", "2"}}},
                            {"requests", {{"vendor.io/nic", "1"}, {"memory", "1Gi"}, {"gpu", "1"}}}}}}}}}}}}}}}}}};
  auto errors = CheckPodTemplates(job);
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  EXPECT_THAT(all, HasSubstr("limits[example.com/fpga]: Invalid value: \"1.5\": must be an integer"));
  EXPECT_THAT(all, HasSubstr("requests[vendor.io/nic]: Invalid value: \"1\": must be equal to vendor.io/nic limit of 2"));
  EXPECT_THAT(all, HasSubstr("requests[gpu]: Invalid value: \"gpu\": must be a standard resource for containers"));
  EXPECT_EQ(errors.size(), 3u) << all;
}

}  // namespace
}  // namespace torchxd::k8sbridge
