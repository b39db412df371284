// torchx ui: where the web page is, with the caller's token in its URL.
#include "cli/commands.h"
#include "cli/daemon_connection.h"

namespace torchxd::cli {

int CmdUi(const GlobalArgs& global, bool as_json, const CliContext& ctx) {
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  auto reply = client->Call("ui", nlohmann::json::object());
  if (!reply) return ReportCallError(ctx, reply.error());
  const nlohmann::json& ui = *reply;
  if (as_json) {
    *ctx.out << ui.dump(2) << "\n";
    return kExitOk;
  }
  if (ui.contains("url")) {
    *ctx.out << "Open in a browser on this machine (the address carries your token; keep it private):\n  "
             << ui["url"].get<std::string>() << "\n";
  } else {
    *ctx.out << "This torchxd serves its page on a Unix socket only, which a browser cannot open: start it with\n"
                "--ui-listen 127.0.0.1:8080 for a browser on this machine, or forward the socket.\n";
  }
  if (ui.contains("ssh")) {
    *ctx.out << "From another machine, forward the page's socket and open " << ui.value("ssh_url", "") << ":\n  "
             << ui["ssh"].get<std::string>() << "\n";
  }
  return kExitOk;
}

}  // namespace torchxd::cli
