// Fuzz target: a kubeconfig file (YAML), loaded as torchxd --kubeconfig does.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "k8sbridge/kubeconfig.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One file for the whole run, removed when it ends.
  static const struct Scratch {
    std::string path = "/tmp/torchxd_kubeconfig_fuzz_" + std::to_string(::getpid());
    ~Scratch() { ::unlink(path.c_str()); }
  } scratch;
  const std::string& path = scratch.path;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  torchxd::k8sbridge::KubeConfigSearch search;
  search.explicit_path = path;
  search.service_account_dir = "/nonexistent";
  (void)torchxd::k8sbridge::LoadKubeConfig(search, torchxd::core::MapEnv({}));
  return 0;
}
