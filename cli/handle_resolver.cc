#include "cli/handle_resolver.h"

#include <algorithm>

#include "cli/daemon_connection.h"

namespace torchxd::cli {

using nlohmann::json;

Result<std::string> ResolveHandle(const std::string& text, const std::string& socket, const CliContext& ctx) {
  if (text.find("://") != std::string::npos || text.empty()) return text;
  auto client = ConnectToDaemon({socket, true}, ctx);
  if (!client) return Fail(client.error());
  // Every app the caller may see: an exact app id wins, else the one whose id starts so.
  std::vector<std::pair<std::string, std::string>> exact, prefixed;  // app id, handle
  // The daemon sends only the apps whose id starts so (a daemon before that filter refuses it
  // as an unknown field: then every app, filtered here).
  json params = {{"app_id_prefix", text}};
  for (;;) {
    auto reply = client->Call("list", params);
    if (!reply && params.contains("app_id_prefix") &&
        reply.error().message.find("params.app_id_prefix: unknown field") != std::string::npos) {
      params.erase("app_id_prefix");
      continue;
    }
    if (!reply) return Fail(reply.error());
    for (const auto& row : (*reply)["apps"]) {
      std::string handle = row[0].get<std::string>(), app_id = row[1].get<std::string>();
      if (app_id == text) exact.emplace_back(app_id, handle);
      else if (app_id.rfind(text, 0) == 0) prefixed.emplace_back(app_id, handle);
    }
    if (!reply->contains("next")) break;
    params["after"] = (*reply)["next"];
  }
  const auto& found = exact.empty() ? prefixed : exact;
  if (found.size() == 1) return found[0].second;
  if (found.empty()) {
    // As TorchX says of a malformed handle, and what else it may be.
    return Fail(Error::InvalidArgument(text + " is not of the form: <scheduler_backend>://<session_name>/<app_id>, "
                                       "nor an app id or the start of one (`torchx list` shows them)"));
  }
  std::string which;
  for (size_t i = 0; i < found.size() && i < 10; ++i) which += "\n  " + found[i].second;
  if (found.size() > 10) which += "\n  (" + std::to_string(found.size() - 10) + " more)";
  return Fail(Error::InvalidArgument("`" + text + "` is the start of " + std::to_string(found.size()) +
                                     " apps' ids; say which:" + which));
}

}  // namespace torchxd::cli
