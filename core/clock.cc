#include "core/clock.h"

#include "core/app_status.h"
#include "core/uv_handle.h"

namespace torchxd {
namespace {

class LoopTimer : public Timer {
 public:
  LoopTimer(uv_loop_t* loop, uint64_t delay_ms, std::function<void()> fire)
      : fire_(std::move(fire)), handle_(NewUvHandle<uv_timer_t>(this)) {
    uv_timer_init(loop, handle_.get());
    uv_timer_start(
        handle_.get(),
        [](uv_timer_t* t) {
          auto* self = static_cast<LoopTimer*>(t->data);
          if (self == nullptr) return;
          // The function may destroy this timer: it runs from a copy.
          auto fire = self->fire_;
          fire();
        },
        delay_ms, 0);
  }

 private:
  std::function<void()> fire_;
  UvHandle<uv_timer_t> handle_;  // closed (data cleared) when this timer goes
};

}  // namespace

int64_t LoopClock::UnixNowMs() { return core::UnixNowMs(); }

std::unique_ptr<Timer> LoopClock::After(uint64_t delay_ms, std::function<void()> fire) {
  return std::make_unique<LoopTimer>(loop_, delay_ms, std::move(fire));
}

}  // namespace torchxd
