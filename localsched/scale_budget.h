// ScaleBudget: how many replicas one user's `scale` requests may start or
// stop, all of their apps together. Each replica a scale starts or stops
// costs the box a process start or stop, store writes and log files: a loop
// of scales between 1 and 128 replicas must not take the daemon's loop from
// everyone else. A bucket of `burst` replicas, refilled at `rate` per second;
// a scale that needs more than is left is refused, saying when it fits (one
// larger than the burst needs the whole bucket).
//
// Pure: times are the caller's clock in ms. Thread contract: one thread.
#ifndef TORCHXD_LOCALSCHED_SCALE_BUDGET_H_
#define TORCHXD_LOCALSCHED_SCALE_BUDGET_H_

#include <cstdint>
#include <map>

namespace torchxd::localsched {

class ScaleBudget {
 public:
  ScaleBudget(double rate_per_second, double burst) : rate_(rate_per_second), burst_(burst) {}

  // 0 when `user` may start or stop `replicas` at `now_ms` (they are taken
  // from the bucket); else how many ms until they fit (nothing is taken).
  uint64_t Take(uint32_t user, uint64_t replicas, int64_t now_ms);

  double rate() const { return rate_; }
  double burst() const { return burst_; }

 private:
  struct Bucket {
    double left = 0;
    int64_t at_ms = 0;
  };
  double rate_;
  double burst_;
  std::map<uint32_t, Bucket> buckets_;
};

}  // namespace torchxd::localsched

#endif  // TORCHXD_LOCALSCHED_SCALE_BUDGET_H_
