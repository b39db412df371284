// kubeconfig and in-cluster configuration, found and read as kubectl does.
#include "k8sbridge/kubeconfig.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torchxd::k8sbridge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class KubeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kcfg_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "home/.kube");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& rel, const std::string& text) {
    fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  core::EnvLookup Env(std::map<std::string, std::string> extra = {}) {
    extra.emplace("HOME", (dir_ / "home").string());
    return core::MapEnv(extra);
  }
  fs::path dir_;
};

constexpr char kTwoContexts[] = R"(apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: certs/ca.crt
- name: dev
  cluster:
    server: https://dev:6443
    insecure-skip-tls-verify: true
contexts:
- name: prod
  context: {cluster: prod, user: alice, namespace: research}
- name: dev
  context: {cluster: dev, user: bob}
users:
- name: alice
  user:
    client-certificate-data: aGVsbG8=
    client-key: keys/alice.key
- name: bob
  user:
    tokenFile: token.txt
)";

TEST_F(KubeConfigTest, HomeKubeConfigCurrentContextWithRelativeFilesAndData) {
  Write("home/.kube/certs/ca.crt", "CA");
  Write("home/.kube/keys/alice.key", "KEY");
  Write("home/.kube/config", kTwoContexts);
  auto c = LoadKubeConfig({}, Env());
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->namespace_, "research");
  EXPECT_EQ(c->tls.ca_file, (dir_ / "home/.kube/certs/ca.crt").string());
  EXPECT_EQ(c->tls.cert_pem, "hello");
  EXPECT_EQ(c->tls.key_file, (dir_ / "home/.kube/keys/alice.key").string());
  EXPECT_FALSE(c->tls.insecure_skip_verify);
  EXPECT_THAT(c->source, HasSubstr("(context prod)"));
}

TEST_F(KubeConfigTest, NamedContextTokenFileAndInsecureCluster) {
  Write("home/.kube/token.txt", "tok-123\n");
  Write("home/.kube/config", kTwoContexts);
  KubeConfigSearch search;
  search.context = "dev";
  auto c = LoadKubeConfig(search, Env());
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->token, "tok-123");
  EXPECT_TRUE(c->tls.insecure_skip_verify);
  EXPECT_EQ(c->namespace_, "default");
}

TEST_F(KubeConfigTest, KubeconfigListMergesFirstWins) {
  std::string a = Write("a.yaml", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                                  "users:\n- name: u\n  user: {token: first}\n");
  std::string b = Write("b.yaml", "current-context: y\nclusters:\n- name: c\n  cluster: {server: 'http://b:80'}\n"
                                  "users:\n- name: u\n  user: {token: second}\n");
  auto c = LoadKubeConfig({}, Env({{"KUBECONFIG", a + ":" + (dir_ / "missing").string() + ":" + b}}));
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->server, "http://b:80");
  EXPECT_EQ(c->token, "first");
}

TEST_F(KubeConfigTest, EveryMissingPieceIsNamed) {
  struct Case {
    std::string name, yaml, want;
  };
  std::vector<Case> cases = {
      {"no current context", "clusters: []\n", "no current-context"},
      {"unknown context", "current-context: nope\n", "context \"nope\" is not defined"},
      {"unknown cluster", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n",
       "cluster \"c\" is not defined"},
      {"exec plugin",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n"
       "  cluster: {server: 'https://k'}\nusers:\n- name: u\n  user:\n    exec: {command: aws}\n",
       "exec credential plugin"},
      {"bad base64",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n"
       "  cluster: {server: 'https://k', certificate-authority-data: '!!!'}\n",
       "certificate-authority-data: not valid base64"},
      {"missing CA file",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n"
       "  cluster: {server: 'https://k', certificate-authority: /nonexistent/ca.crt}\n",
       "/nonexistent/ca.crt does not exist"},
      {"not yaml", "current-context: [\n", "not valid YAML"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = Write("case.yaml", c.yaml);
    KubeConfigSearch search;
    search.explicit_path = path;
    auto got = LoadKubeConfig(search, Env());
    ASSERT_FALSE(got.has_value());
    EXPECT_THAT(got.error().message, HasSubstr(c.want));
  }
}

TEST_F(KubeConfigTest, InClusterServiceAccountWhenNoKubeconfig) {
  Write("sa/token", "sa-token\n");
  Write("sa/namespace", "jobs");
  KubeConfigSearch search;
  search.service_account_dir = (dir_ / "sa").string();
  auto c = LoadKubeConfig(search, Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}}));
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token, "sa-token");
  EXPECT_EQ(c->namespace_, "jobs");
  EXPECT_EQ(c->tls.ca_file, (dir_ / "sa/ca.crt").string());
}

TEST_F(KubeConfigTest, NothingFoundSaysWhatWasTried) {
  auto c = LoadKubeConfig({}, Env());
  ASSERT_FALSE(c.has_value());
  EXPECT_THAT(c.error().message, HasSubstr("no Kubernetes configuration"));
  EXPECT_THAT(c.error().message, HasSubstr(".kube/config does not exist"));
}

TEST(Base64Test, DecodesWithAndWithoutPadding) {
  EXPECT_EQ(*DecodeBase64("aGVsbG8="), "hello");
  EXPECT_EQ(*DecodeBase64("aGVs\nbG8"), "hello");
  EXPECT_EQ(*DecodeBase64(""), "");
  EXPECT_FALSE(DecodeBase64("a$b").has_value());
}

}  // namespace
}  // namespace torchxd::k8sbridge
