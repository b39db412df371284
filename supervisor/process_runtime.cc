// ProcessRuntime (replica_process.h): the replica runtime of local_cwd and
// local_dir, each attempt a ReplicaProcess under torchxd-shim.
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "supervisor/proc_info.h"
#include "supervisor/replica_process.h"

namespace torchxd::supervisor {
namespace {

std::string RandomHex(size_t bytes) {
  unsigned char buf[32];
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf + got, bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  std::string out;
  char hex[3];
  for (size_t i = 0; i < bytes; ++i) {
    std::snprintf(hex, sizeof(hex), "%02x", buf[i]);
    out += hex;
  }
  return out;
}

}  // namespace

MonitorRecord ProcessRuntime::Prepare() {
  MonitorRecord m;
  std::string name = RandomHex(8);
  if (options_.containment != nullptr) m.cgroup = options_.containment->TakeGroup("a-" + name);
  if (options_.run_dir.empty()) return m;
  m.run_dir = options_.run_dir + "/" + name;
  m.nonce = RandomHex(16);
  m.boot_id = BootId();
  return m;
}

std::unique_ptr<ReplicaHandle> ProcessRuntime::Start(const core::ReplicaRequest& request, int attempt,
                                                     const MonitorRecord& monitor, ReplicaCallbacks callbacks) {
  ShimSpec spec;
  spec.cwd = request.cwd;
  spec.argv.push_back(request.entrypoint);
  spec.argv.insert(spec.argv.end(), request.args.begin(), request.args.end());
  // The environment is made when the spec is sent, from the layers the app's replicas share.
  core::ReplicaRequest layers;
  layers.inherited = request.inherited;
  layers.role_env = request.role_env;
  layers.env = request.env;
  auto spec_env = [layers = std::move(layers)](std::vector<std::string>& env) {
    layers.ForEachVariable([&](const std::string& k, const std::string& v) { env.push_back(k + "=" + v); });
  };
  spec.nofile = ReplicaNofileLimit();
  // Always explicit: the shim runs nothing without knowing whom to run it as.
  const auto& run_as = options_.run_as;
  if (run_as.size() >= 2) {
    spec.credentials.uid = run_as[0];
    spec.credentials.gid = run_as[1];
    spec.credentials.groups.assign(run_as.begin() + 2, run_as.end());
  } else {
    spec.credentials.uid = ::geteuid();
    spec.credentials.gid = ::getegid();
  }
  spec.log_dir = request.log_dir;
  spec.log_max_bytes = options_.log_max_bytes;
  spec.attempt = std::max(1, attempt);
  spec.nonce = monitor.nonce;
  spec.keep = options_.keep;
  return ReplicaProcess::Start(loop_, options_.shim_path, spec, monitor, std::move(callbacks), options_.when_stored,
                               options_.containment, AttemptLimits{request.cpu, request.mem_mb}, options_.launcher,
                               std::move(spec_env));
}

std::unique_ptr<ReplicaHandle> ProcessRuntime::Adopt(const core::ReplicaRequest&, int, const MonitorRecord& monitor,
                                                     uint64_t, uint64_t, ReplicaCallbacks callbacks) {
  return ReplicaProcess::Adopt(loop_, monitor, std::move(callbacks), options_.when_stored, options_.containment);
}

}  // namespace torchxd::supervisor
