// ContainerRuntime: replicas as containers through the Docker Engine API
// (local_docker). One attempt:
//   remove a leftover container of the same name (an earlier attempt) →
//   create (the body from core/docker_container.h) → start → inspect (pid)
//   → follow its logs (stdout/stderr demultiplexed, live) and wait for it →
//   once both ended: remove it and report the exit. The logs stay with
//   torchxd; the container does not.
// Terminate/Kill send SIGTERM/SIGKILL through the engine; a stop asked for
// before the container started means it never starts. An exit code above
// 128 after a stop is reported as the signal it stands for.
// Adopt re-attaches to a container a crashed daemon left running: found by
// name, its logs read again from the start with the bytes the store already
// has skipped per stream (exact; the engine's timestamps are too coarse),
// then followed and waited for as above.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SUPERVISOR_CONTAINER_RUNTIME_H_
#define TORCHXD_SUPERVISOR_CONTAINER_RUNTIME_H_

#include <memory>
#include <string>

#include "supervisor/docker_client.h"
#include "supervisor/replica_runtime.h"

namespace torchxd::supervisor {

class ContainerRuntime : public ReplicaRuntime {
 public:
  explicit ContainerRuntime(DockerClient* docker) : docker_(docker) {}
  std::unique_ptr<ReplicaHandle> Start(const core::ReplicaRequest& request, int attempt,
                                       ReplicaCallbacks callbacks) override;
  std::unique_ptr<ReplicaHandle> Adopt(const core::ReplicaRequest& request, uint64_t stdout_skip,
                                       uint64_t stderr_skip, ReplicaCallbacks callbacks) override;

 private:
  DockerClient* docker_;
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_CONTAINER_RUNTIME_H_
