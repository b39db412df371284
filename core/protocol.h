// The torchxd wire protocol (docs/protocol.md), shared by the daemon and its
// clients: newline-delimited JSON frames over a Unix stream socket.
//   request   {"v":1, "id":N, "method":"status", "params":{...}}
//   event     {"v":1, "id":N, "event":{...}}          (zero or more, streaming methods)
//   response  {"v":1, "id":N, "result":{...}}  or  {"v":1, "id":N, "error":{"code","message"}}
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_PROTOCOL_H_
#define TORCHXD_CORE_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace torchxd::protocol {

inline constexpr int kVersion = 1;
inline constexpr size_t kMaxFrameBytes = 16 * 1024 * 1024;
// Values in one request: an AppDef of 20,000 variables is about 40,000; five
// million empty strings fit in a frame and cost gigabytes once parsed.
inline constexpr size_t kMaxRequestValues = 256 * 1024;

struct Request {
  int64_t id = 0;
  std::string method;
  nlohmann::json params = nlohmann::json::object();
};

// One frame (without the trailing newline) -> Request. Errors say what is wrong.
[[nodiscard]] Result<Request> DecodeRequest(std::string_view frame);
std::string EncodeRequest(const Request& request);  // ends with '\n'

std::string EncodeResult(int64_t id, const nlohmann::json& result);
std::string EncodeEvent(int64_t id, const nlohmann::json& event);
std::string EncodeError(int64_t id, const Error& error);

// The error object of a response frame back into an Error.
Error ErrorFromJson(const nlohmann::json& error);

}  // namespace torchxd::protocol

#endif  // TORCHXD_CORE_PROTOCOL_H_
