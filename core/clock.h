// Clock: the time and the one-shot timers code on the loop waits on, behind
// one seam so that tests can run that code on fake time (tests/support's
// FakeClock) instead of sleeping. LoopClock is the real one: libuv timers on
// the loop (monotonic) and the wall clock for what is shown.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_CORE_CLOCK_H_
#define TORCHXD_CORE_CLOCK_H_

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace torchxd {

// A pending timer; destroying it cancels it (its function is never called after).
class Timer {
 public:
  virtual ~Timer() = default;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the epoch (wall clock: for display and records).
  virtual int64_t UnixNowMs() = 0;
  // Calls `fire` once, `delay_ms` from now, unless the timer is destroyed first.
  [[nodiscard]] virtual std::unique_ptr<Timer> After(uint64_t delay_ms, std::function<void()> fire) = 0;
};

class LoopClock : public Clock {
 public:
  explicit LoopClock(uv_loop_t* loop) : loop_(loop) {}
  int64_t UnixNowMs() override;
  [[nodiscard]] std::unique_ptr<Timer> After(uint64_t delay_ms, std::function<void()> fire) override;

 private:
  uv_loop_t* loop_;
};

// The clock an object was given, or, when it was given none, the loop's own
// (owned here): what every user of a Clock that tests may replace holds.
class ClockOrLoop {
 public:
  ClockOrLoop(uv_loop_t* loop, Clock* given)
      : own_(given != nullptr ? nullptr : std::make_unique<LoopClock>(loop)), clock_(given != nullptr ? given : own_.get()) {}
  Clock* get() const { return clock_; }
  Clock* operator->() const { return clock_; }

 private:
  std::unique_ptr<Clock> own_;
  Clock* clock_;
};

}  // namespace torchxd

#endif  // TORCHXD_CORE_CLOCK_H_
