// ContainerRuntime: replicas as containers through the Docker Engine API
// (local_docker). One attempt:
//   remove a leftover container of the same name (an earlier attempt) →
//   create (the body from core/docker_container.h) → start → inspect (pid)
//   → follow its logs (stdout/stderr demultiplexed, live) and wait for it →
//   once the wait answered, the follow gets a short grace to end, then one
//   plain read of the whole log delivers what the follow missed (an engine
//   may end a follow early), and the exit is reported. Containers are
//   removed when the app ends (Cleanup), so a slower sibling still resolves
//   a finished replica's name; the logs stay with torchxd.
// Terminate/Kill send SIGTERM/SIGKILL through the engine; a stop asked for
// before the container started means it never starts. An exit code above
// 128 after a stop is reported as the signal it stands for.
// Adopt re-attaches to a container a crashed daemon left running: found by
// name, its logs read again from the start with the bytes the store already
// has skipped per stream (exact; the engine's timestamps are too coarse),
// then followed and waited for as above.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DOCKER_CONTAINER_RUNTIME_H_
#define TORCHXD_DOCKER_CONTAINER_RUNTIME_H_

#include <uv.h>

#include <functional>
#include <memory>
#include <vector>
#include <string>

#include "docker/docker_client.h"
#include "supervisor/replica_runtime.h"

namespace torchxd::docker {

class ContainerRuntime : public supervisor::ReplicaRuntime {
 public:
  ContainerRuntime(uv_loop_t* loop, DockerClient* docker) : loop_(loop), docker_(docker) {}
  std::unique_ptr<supervisor::ReplicaHandle> Start(const core::ReplicaRequest& request, int attempt, const supervisor::MonitorRecord&,
                                       supervisor::ReplicaCallbacks callbacks) override;
  std::unique_ptr<supervisor::ReplicaHandle> Adopt(const core::ReplicaRequest& request, int attempt, const supervisor::MonitorRecord&,
                                       uint64_t stdout_skip, uint64_t stderr_skip, supervisor::ReplicaCallbacks callbacks) override;
  // Removes the app's containers (force), `done` when the engine answered for each.
  void Cleanup(const std::vector<core::ReplicaRequest>& requests, std::function<void()> done) override;

 private:
  uv_loop_t* loop_;
  DockerClient* docker_;
};

}  // namespace torchxd::docker

#endif  // TORCHXD_DOCKER_CONTAINER_RUNTIME_H_
