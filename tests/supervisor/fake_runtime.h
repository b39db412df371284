// FakeReplicaRuntime: replicas that are records, not processes. Each Start
// is kept as an Attempt the test drives: Started(pid) and Exit(...) call
// what the runner gave it; Terminate and Kill are counted with their time.
#ifndef TORCHXD_TESTS_SUPERVISOR_FAKE_RUNTIME_H_
#define TORCHXD_TESTS_SUPERVISOR_FAKE_RUNTIME_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "supervisor/replica_runtime.h"
#include "tests/supervisor/fake_clock.h"

namespace torchxd::testing {

class FakeReplicaRuntime : public supervisor::ReplicaRuntime {
 public:
  struct Attempt {
    std::string replica;  // "role/replica"
    int attempt = 0;
    supervisor::ReplicaCallbacks callbacks;
    std::optional<double> terminated_grace;
    std::optional<uint64_t> terminated_at_ms, killed_at_ms;

    void Started(int pid) { callbacks.on_started(pid); }
    void Output(supervisor::OutputStream stream, std::string_view bytes) {
      if (callbacks.on_output) callbacks.on_output(stream, bytes);
    }
    void Logged(uint64_t disk_bytes, uint64_t lost_bytes) {
      if (callbacks.on_logged) callbacks.on_logged(disk_bytes, lost_bytes);
    }
    void Exit(std::optional<int> code, std::optional<int> signal = std::nullopt) {
      supervisor::ReplicaExit e;
      e.exit_code = code;
      e.signal = signal;
      callbacks.on_exit(e);
    }
  };

  explicit FakeReplicaRuntime(FakeClock* clock) : clock_(clock) {}

  std::unique_ptr<supervisor::ReplicaHandle> Start(const core::ReplicaRequest& request, int attempt,
                                                   const supervisor::MonitorRecord&,
                                                   supervisor::ReplicaCallbacks callbacks) override {
    auto a = std::make_shared<Attempt>();
    a->replica = request.Key().String();
    a->attempt = attempt;
    a->callbacks = std::move(callbacks);
    attempts.push_back(a);
    return std::make_unique<Handle>(a, clock_);
  }

  // The attempts started, oldest first; the newest of one replica.
  std::vector<std::shared_ptr<Attempt>> attempts;
  std::shared_ptr<Attempt> Latest(const std::string& replica) const {
    for (auto it = attempts.rbegin(); it != attempts.rend(); ++it) {
      if ((*it)->replica == replica) return *it;
    }
    return nullptr;
  }

 private:
  class Handle : public supervisor::ReplicaHandle {
   public:
    Handle(std::shared_ptr<Attempt> a, FakeClock* clock) : a_(std::move(a)), clock_(clock) {}
    void Terminate(double grace_seconds) override {
      if (!a_->terminated_at_ms) a_->terminated_at_ms = clock_->now_ms();
      a_->terminated_grace = grace_seconds;
    }
    void Kill() override {
      if (!a_->killed_at_ms) a_->killed_at_ms = clock_->now_ms();
    }

   private:
    std::shared_ptr<Attempt> a_;
    FakeClock* clock_;
  };
  FakeClock* clock_;
};

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_SUPERVISOR_FAKE_RUNTIME_H_
