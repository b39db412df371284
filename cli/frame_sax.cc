#include "cli/frame_sax.h"

#include <utility>

#include "core/json_parse.h"
#include "core/protocol.h"

namespace torchxd::cli {

bool FrameSax::parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
  return Stop("not valid JSON at byte " + std::to_string(position) + ": " + e.what());
}

bool FrameSax::Stop(std::string reason) {
  if (why.empty()) why = std::move(reason);
  return false;
}

Result<void> ReadFrameWith(std::string_view frame, FrameSax& reader, std::string_view what) {
  bool ok = nlohmann::json::sax_parse(frame.begin(), frame.end(), &reader);
  if (reader.error_frame) return Fail(ErrorOfFrame(frame));
  if (!ok) return Fail(Error::Internal("torchxd sent a malformed " + std::string(what) + ": " + reader.why));
  if (!reader.has_result) return Fail(Error::Internal("torchxd reply has neither result nor error"));
  return {};
}

Error ErrorOfFrame(std::string_view frame) {
  nlohmann::json reply = core::ParseJsonOrDiscarded(frame);
  if (reply.is_object() && reply.contains("error")) return protocol::ErrorFromJson(reply["error"]);
  return Error::Internal("torchxd sent a malformed frame");
}

}  // namespace torchxd::cli
