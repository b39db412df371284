#include "core/result.h"

#include <array>

namespace torchxd {
namespace {

constexpr std::array<std::pair<ErrorCode, std::string_view>, 9> kNames = {{
    {ErrorCode::kInvalidArgument, "InvalidArgument"},
    {ErrorCode::kNotFound, "NotFound"},
    {ErrorCode::kAlreadyExists, "AlreadyExists"},
    {ErrorCode::kPermissionDenied, "PermissionDenied"},
    {ErrorCode::kUnavailable, "Unavailable"},
    {ErrorCode::kTimeout, "Timeout"},
    {ErrorCode::kIo, "Io"},
    {ErrorCode::kInternal, "Internal"},
    {ErrorCode::kDisconnected, "Disconnected"},
}};

}  // namespace

std::string_view ErrorCodeName(ErrorCode code) {
  for (const auto& [c, name] : kNames) {
    if (c == code) return name;
  }
  return "Internal";
}

std::optional<ErrorCode> ErrorCodeFromName(std::string_view name) {
  for (const auto& [c, n] : kNames) {
    if (n == name) return c;
  }
  return std::nullopt;
}

Error Error::WithContext(std::string_view context) const {
  return {code, std::string(context) + ": " + message};
}

}  // namespace torchxd
