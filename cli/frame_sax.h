// What the CLI's readers of large reply frames share: nlohmann's SAX events
// over {"id":N,"result":...} read without a JSON DOM, the daemon's error frame
// handed back as its Error, and a frame the reader refuses said as such.
//
// Thread contract: one reader per parse; the functions are pure.
#ifndef TORCHXD_CLI_FRAME_SAX_H_
#define TORCHXD_CLI_FRAME_SAX_H_

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace torchxd::cli {

// A reader's base: the flags ReadFrameWith reads, and the events every reader answers alike.
class FrameSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool error_frame = false;  // {"error":...}: read again as a DOM, which is small
  bool has_result = false;
  std::string why;           // what made the reader stop, when it did

  bool binary(binary_t&) override { return Stop("a binary value"); }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& e) override;

 protected:
  // False (the parse stops), keeping the first reason.
  bool Stop(std::string reason);
};

// Runs `reader` over `frame`. A daemon's error frame comes back as that Error; a frame the
// reader stopped on is Internal ("torchxd sent a malformed <what>: <why>"), and so is one
// without a result.
[[nodiscard]] Result<void> ReadFrameWith(std::string_view frame, FrameSax& reader, std::string_view what);

// The Error an error frame ({"id":N,"error":{...}}) carries, or Internal when the frame is not one.
Error ErrorOfFrame(std::string_view frame);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_FRAME_SAX_H_
