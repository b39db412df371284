// RestartBudget: how fast one user's replicas may restart, all of their apps
// together. Each restart costs the box a process start, store writes and log
// files, so a user whose replicas crash in a loop must not take the daemon's
// loop from everyone else: a bucket of `burst` restarts, refilled at `rate`
// per second (GCRA). A restart beyond it is booked for the first free slot,
// later than its backoff asked; none is dropped.
//
// Pure: times are the caller's clock in ms. Thread contract: one thread.
#ifndef TORCHXD_SUPERVISOR_RESTART_BUDGET_H_
#define TORCHXD_SUPERVISOR_RESTART_BUDGET_H_

#include <cstdint>
#include <map>

namespace torchxd::supervisor {

class RestartBudget {
 public:
  RestartBudget(double rate_per_second, double burst);

  // When a restart of `user`'s that wants to happen at `want_ms` may happen
  // (at or after want_ms); the slot is taken.
  uint64_t Book(uint32_t user, uint64_t want_ms);

  double rate() const { return rate_; }

 private:
  double rate_;
  double interval_ms_;   // between restarts at the steady rate
  double tolerance_ms_;  // how far ahead of the steady rate a burst may run
  std::map<uint32_t, double> next_;  // per user: the theoretical time of the next restart
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_RESTART_BUDGET_H_
