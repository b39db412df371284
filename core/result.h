// Result<T> and Error: how every recoverable failure in torchxd travels.
//
// An Error is a value with a machine-readable code (sent over the protocol as
// its name, e.g. "InvalidArgument") and a message for humans that says what
// was wrong, where, and what to do next. Functions that can fail return
// Result<T> (tl::expected); exceptions never cross a module API.
//
// Thread contract: plain values, safe to use from any thread.
#ifndef TORCHXD_CORE_RESULT_H_
#define TORCHXD_CORE_RESULT_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace torchxd {

enum class ErrorCode {
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kUnavailable,
  kTimeout,
  kIo,
  kInternal,
  kDisconnected,  // client side only: no daemon answered, or the connection broke
};

// "InvalidArgument", "NotFound", ... (the protocol's spelling).
std::string_view ErrorCodeName(ErrorCode code);
std::optional<ErrorCode> ErrorCodeFromName(std::string_view name);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  static Error InvalidArgument(std::string message) {
    return {ErrorCode::kInvalidArgument, std::move(message)};
  }
  static Error NotFound(std::string message) { return {ErrorCode::kNotFound, std::move(message)}; }
  static Error AlreadyExists(std::string message) {
    return {ErrorCode::kAlreadyExists, std::move(message)};
  }
  static Error PermissionDenied(std::string message) {
    return {ErrorCode::kPermissionDenied, std::move(message)};
  }
  static Error Unavailable(std::string message) {
    return {ErrorCode::kUnavailable, std::move(message)};
  }
  static Error Timeout(std::string message) { return {ErrorCode::kTimeout, std::move(message)}; }
  static Error Io(std::string message) { return {ErrorCode::kIo, std::move(message)}; }
  static Error Internal(std::string message) {
    return {ErrorCode::kInternal, std::move(message)};
  }
  static Error Disconnected(std::string message) {
    return {ErrorCode::kDisconnected, std::move(message)};
  }

  // The same error with "context: " put in front of the message.
  Error WithContext(std::string_view context) const;
};

template <class T = void>
using Result = tl::expected<T, Error>;

// `return Fail(Error::NotFound("..."));`
inline tl::unexpected<Error> Fail(Error error) { return tl::unexpected<Error>(std::move(error)); }

}  // namespace torchxd

#endif  // TORCHXD_CORE_RESULT_H_
