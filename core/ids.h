// App ids as TorchX makes them: make_unique(name) = "{name}-{random_id}" where
// random_id is 64 bits from /dev/urandom written in base 20 (first character,
// always a letter) then base 29, alphabet "bcdfghjklmnpqrstvwxz012345679" (no
// '8'). normalize_str makes a name RFC 1123-friendly for Kubernetes.
//
// Thread contract: safe from any thread.
#ifndef TORCHXD_CORE_IDS_H_
#define TORCHXD_CORE_IDS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace torchxd::core {

inline constexpr std::string_view kIdStartChars = "bcdfghjklmnpqrstvwxz";
inline constexpr std::string_view kIdEndChars = "bcdfghjklmnpqrstvwxz012345679";

// The id for a given 64-bit value (the deterministic half of random_id).
std::string IdFromUint64(uint64_t value);
std::string RandomId();
std::string MakeUnique(std::string_view name);
// A random (version 4) UUID, as TorchX's TORCHX_INTERNAL_SESSION_ID.
std::string SessionUuid();

// Lower-case, keep only [a-z0-9-], strip leading '-'.
std::string NormalizeStr(std::string_view s);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_IDS_H_
