#include "core/protocol.h"

#include "core/json_parse.h"
#include "core/json_reader.h"

namespace torchxd::protocol {
namespace {

using nlohmann::json;

std::string Frame(json j) {
  // Invalid UTF-8 from replica output must never make dump() throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

Result<Request> DecodeRequest(std::string_view frame) {
  if (auto ok = core::CheckJsonShape(frame, core::kMaxJsonDepth, kMaxRequestValues); !ok) {
    return Fail(ok.error().WithContext("request"));
  }
  json j = json::parse(frame, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Fail(Error::InvalidArgument("request is not valid JSON"));
  if (!j.is_object()) return Fail(Error::InvalidArgument("request must be a JSON object"));
  if (!j.contains("v") || !j["v"].is_number_integer()) {
    return Fail(Error::InvalidArgument("request.v: protocol version required (this daemon speaks " +
                                       std::to_string(kVersion) + ")"));
  }
  if (j["v"].get<int64_t>() != kVersion) {
    return Fail(Error::InvalidArgument("request.v: unsupported protocol version " + j["v"].dump() +
                                       " (this daemon speaks " + std::to_string(kVersion) + ")"));
  }
  Request r;
  if (!j.contains("id")) return Fail(Error::InvalidArgument("request.id: must be an integer"));
  auto id = core::IntInRange(j["id"], "request.id", INT64_MIN, INT64_MAX);
  if (!id) return Fail(id.error());
  r.id = *id;
  if (!j.contains("method") || !j["method"].is_string()) {
    return Fail(Error::InvalidArgument("request.method: must be a string"));
  }
  r.method = j["method"].get<std::string>();
  if (j.contains("params")) {
    if (!j["params"].is_object()) return Fail(Error::InvalidArgument("request.params: must be an object"));
    r.params = j["params"];
  }
  return r;
}

std::string EncodeRequest(const Request& request) {
  return Frame(json{{"v", kVersion}, {"id", request.id}, {"method", request.method},
                    {"params", request.params}});
}

std::string EncodeResult(int64_t id, const json& result) {
  return Frame(json{{"v", kVersion}, {"id", id}, {"result", result}});
}

std::string EncodeEvent(int64_t id, const json& event) {
  return Frame(json{{"v", kVersion}, {"id", id}, {"event", event}});
}

std::string EncodeError(int64_t id, const Error& error) {
  return Frame(json{{"v", kVersion},
                    {"id", id},
                    {"error", {{"code", ErrorCodeName(error.code)}, {"message", error.message}}}});
}

Error ErrorFromJson(const json& error) {
  Error e = Error::Internal("malformed error reply");
  if (!error.is_object()) return e;
  if (error.contains("code") && error["code"].is_string()) {
    e.code = ErrorCodeFromName(error["code"].get<std::string>()).value_or(ErrorCode::kInternal);
  }
  if (error.contains("message") && error["message"].is_string()) {
    e.message = error["message"].get<std::string>();
  }
  return e;
}

}  // namespace torchxd::protocol
