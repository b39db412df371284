// FakeClock: time that moves only when a test says. Advance(ms) fires every
// timer that falls due, in order of its time (then of its setting), each
// with the clock at its time, timers set by a firing one included.
#ifndef TORCHXD_TESTS_SUPERVISOR_FAKE_CLOCK_H_
#define TORCHXD_TESTS_SUPERVISOR_FAKE_CLOCK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "core/clock.h"

namespace torchxd::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t unix_ms = 1'700'000'000'000) : unix_ms_(unix_ms) {}

  int64_t UnixNowMs() override { return unix_ms_ + static_cast<int64_t>(now_ms_); }
  std::unique_ptr<Timer> After(uint64_t delay_ms, std::function<void()> fire) override {
    auto key = std::make_pair(now_ms_ + delay_ms, next_++);
    timers_[key] = std::move(fire);
    return std::make_unique<FakeTimer>(this, key);
  }

  void Advance(uint64_t ms) {
    uint64_t until = now_ms_ + ms;
    while (!timers_.empty() && timers_.begin()->first.first <= until) {
      auto it = timers_.begin();
      now_ms_ = it->first.first;
      auto fire = std::move(it->second);
      timers_.erase(it);
      fire();
    }
    now_ms_ = until;
  }
  uint64_t now_ms() const { return now_ms_; }
  size_t pending() const { return timers_.size(); }

 private:
  using Key = std::pair<uint64_t, uint64_t>;  // due, order set
  class FakeTimer : public Timer {
   public:
    FakeTimer(FakeClock* clock, Key key) : clock_(clock), key_(key) {}
    ~FakeTimer() override { clock_->timers_.erase(key_); }

   private:
    FakeClock* clock_;
    Key key_;
  };

  int64_t unix_ms_;
  uint64_t now_ms_ = 0;
  uint64_t next_ = 0;
  std::map<Key, std::function<void()>> timers_;
};

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_SUPERVISOR_FAKE_CLOCK_H_
