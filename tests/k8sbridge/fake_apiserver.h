// FakeApiServer: runs tests/k8sbridge/fake_apiserver.py (a fake
// kube-apiserver with Volcano) on a free loopback port and drives its
// /fake/... controls with blocking libcurl calls (fine in a test).
#ifndef TORCHXD_TESTS_K8SBRIDGE_FAKE_APISERVER_H_
#define TORCHXD_TESTS_K8SBRIDGE_FAKE_APISERVER_H_

#include <curl/curl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace torchxd::testing {

// ../shared/k8s-schemas beside the checkout, or "" when absent (a user's clone).
inline std::string SharedSchemas() {
  std::filesystem::path p = std::filesystem::path(TORCHXD_SOURCE_DIR) / "../shared/k8s-schemas";
  std::error_code ec;
  return std::filesystem::exists(p / "volcano/batch.volcano.sh_jobs.yaml", ec) ? p.lexically_normal().string() : "";
}

class FakeApiServer {
 public:
  // `schemas`: validate created objects with the real CRDs ("" = no validation).
  // With `tls_cert`/`tls_key` (PEM files) it serves HTTPS.
  // `webhook`: Volcano's admission webhook rules too (false: the CRDs alone).
  bool Start(const std::filesystem::path& dir, const std::string& schemas, const std::string& token,
             const std::string& tls_cert = "", const std::string& tls_key = "", bool webhook = true) {
    tls_ = !tls_cert.empty();
    std::string port_file = (dir / "fake.port").string();
    // pdeathsig: a killed test takes its server along.
    std::vector<std::string> args = {"/usr/bin/setpriv", "--pdeathsig", "KILL", "/usr/bin/python3", FAKE_APISERVER,
                                     "--port-file", port_file};
    if (!schemas.empty()) args.insert(args.end(), {"--schemas", schemas});
    if (!token.empty()) args.insert(args.end(), {"--token", token});
    if (tls_) args.insert(args.end(), {"--tls-cert", tls_cert, "--tls-key", tls_key});
    if (!webhook) args.push_back("--no-webhook");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return false;
    for (int i = 0; i < 200; ++i) {
      std::ifstream in(port_file);
      if (in >> port_) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  ~FakeApiServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  std::string url() const { return (tls_ ? "https" : "http") + std::string("://127.0.0.1:") + std::to_string(port_); }

  // A kubeconfig for this server (context "fake", namespace `ns`, bearer `token`);
  // `cluster_extra` adds lines to the cluster (e.g. certificate-authority-data).
  std::string WriteKubeconfig(const std::filesystem::path& path, const std::string& ns, const std::string& token,
                              const std::string& cluster_extra = "") {
    std::ofstream out(path);
    out << "apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters:\n- name: fake\n  cluster:\n"
        << "    server: " << url() << "\n" << cluster_extra << "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: me\n"
        << "    namespace: " << ns << "\nusers:\n- name: me\n  user:\n    token: " << token << "\n";
    return path.string();
  }

  long Request(const std::string& method, const std::string& path, const std::string& body, std::string* out) {
    CURL* c = curl_easy_init();
    std::string url_text = url() + path;
    curl_easy_setopt(c, CURLOPT_URL, url_text.c_str());
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (method == "POST") {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
      static_cast<std::string*>(u)->append(d, s * n);
      return s * n;
    });
    std::string sink;
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out != nullptr ? out : &sink);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);  // the test's own control calls
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    return code;
  }
  long Post(const std::string& path, const nlohmann::json& body = nlohmann::json::object()) {
    return Request("POST", path, body.dump(), nullptr);
  }
  nlohmann::json State() {
    std::string out;
    Request("GET", "/fake/state", "", &out);
    return nlohmann::json::parse(out, nullptr, false);
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_K8SBRIDGE_FAKE_APISERVER_H_
