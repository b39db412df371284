// App handles: "{scheduler}://{session_name}/{app_id}" (TorchX's AppHandle).
//
// Parsing follows TorchX's regex `(.+)://(.*)/(.+)`: greedy, so the app id is
// what follows the LAST '/', the session may be empty ("local:///id"), and
// "my_session/my_app", "local://my_session/", "local://my_app" are malformed.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_APP_HANDLE_H_
#define TORCHXD_CORE_APP_HANDLE_H_

#include <string>
#include <string_view>

#include "core/result.h"

namespace torchxd::core {

inline constexpr std::string_view kDefaultSession = "torchx";

struct AppHandle {
  std::string scheduler;
  std::string session;
  std::string app_id;

  std::string ToString() const;
  bool operator==(const AppHandle&) const = default;
};

std::string MakeAppHandle(std::string_view scheduler, std::string_view session,
                          std::string_view app_id);

// A handle as the parts MakeAppHandle joins (or a whole one), so that handles
// compare without being built. The parts are views: they must outlive it.
struct AppHandleParts {
  AppHandleParts(std::string_view scheduler, std::string_view session, std::string_view app_id)
      : parts{scheduler, "://", session, "/", app_id} {}
  explicit AppHandleParts(std::string_view handle) : parts{handle, {}, {}, {}, {}} {}
  std::string_view parts[5];
};
// <0, 0 or >0 as std::string::compare of the two handles would say.
int CompareAppHandles(const AppHandleParts& a, const AppHandleParts& b);
[[nodiscard]] Result<AppHandle> ParseAppHandle(std::string_view handle);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_APP_HANDLE_H_
