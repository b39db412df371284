// Byte sizes as people write them in options and run options: "4096", "64K", "128M", "1G"
// (K/M/G and KiB/MiB/GiB are powers of 1024).
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_BYTE_SIZE_H_
#define TORCHXD_CORE_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "core/result.h"

namespace torchxd::core {

// Bytes ("0" too, which callers read as unbounded), at most 2^62; InvalidArgument naming the
// text otherwise.
[[nodiscard]] Result<uint64_t> ParseByteSize(const std::string& text);
// How messages say a size: "512 B", "64 KiB", "1.5 MiB", "2 GiB" (one decimal
// below ten units, rounded up so that a size past a limit never reads as the limit).
std::string FormatByteSize(uint64_t bytes);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_BYTE_SIZE_H_
