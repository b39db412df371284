// A reply's result printed as `--json` prints it (indented by 2, as
// nlohmann's dump(2)), read from the frame's text without a JSON DOM: a
// `queue --json` with 10,000 pending apps is a reply of 5 MB.
//
// Thread contract: pure functions of their arguments.
#ifndef TORCHXD_CLI_REPLY_TEXT_H_
#define TORCHXD_CLI_REPLY_TEXT_H_

#include <ostream>
#include <string>
#include <string_view>

#include "core/result.h"

namespace torchxd::cli {

// The result of a reply frame ({"id":N,"result":...}) written with 2-space
// indents, keys in the order the daemon sent them. A daemon's error frame
// comes back as that Error; a frame without a result is Internal, saying why.
[[nodiscard]] Result<std::string> IndentedResult(std::string_view frame);
// The same written to `out` in chunks of 64 KiB as it is read (no copy of it
// whole). A frame found malformed part way has had its first chunks written.
[[nodiscard]] Result<void> WriteIndentedResult(std::string_view frame, std::ostream& out);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_REPLY_TEXT_H_
