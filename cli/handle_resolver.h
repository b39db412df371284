// An app named as people type it: a full handle (scheduler://session/app_id)
// as is, else an app id or the unique start of one, found among the apps the
// caller may list (`torchx status echo-d9w4`).
//
// Thread contract: a blocking call on the CLI's thread.
#ifndef TORCHXD_CLI_HANDLE_RESOLVER_H_
#define TORCHXD_CLI_HANDLE_RESOLVER_H_

#include <string>

#include "cli/cli_context.h"
#include "core/result.h"

namespace torchxd::cli {

// The full handle; InvalidArgument when nothing matches (TorchX's message
// for a malformed handle) or, listing them, when several do.
[[nodiscard]] Result<std::string> ResolveHandle(const std::string& text, const std::string& socket,
                                                const CliContext& ctx);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_HANDLE_RESOLVER_H_
