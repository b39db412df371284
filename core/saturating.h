// Sums and products of sizes that stop at UINT64_MAX instead of wrapping:
// for estimates of what a request would cost, where a wrapped figure would
// pass a bound it exceeds.
//
// Thread contract: pure functions.
#ifndef TORCHXD_CORE_SATURATING_H_
#define TORCHXD_CORE_SATURATING_H_

#include <cstdint>

namespace torchxd::core {

inline uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
inline uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_SATURATING_H_
