#include "core/app_handle.h"

namespace torchxd::core {

std::string AppHandle::ToString() const { return MakeAppHandle(scheduler, session, app_id); }

std::string MakeAppHandle(std::string_view scheduler, std::string_view session,
                          std::string_view app_id) {
  std::string out(scheduler);
  out += "://";
  out += session;
  out += '/';
  out += app_id;
  return out;
}

Result<AppHandle> ParseAppHandle(std::string_view handle) {
  auto malformed = [&] {
    return Fail(Error::InvalidArgument(
        std::string(handle) +
        " is not of the form: <scheduler_backend>://<session_name>/<app_id>"));
  };
  // Python's '.' does not match a newline; the whole handle must be one line.
  if (handle.find('\n') != std::string_view::npos) return malformed();
  // Greedy `(.+)://`: the scheduler ends at the last "://" that still leaves a
  // '/' followed by a non-empty app id.
  size_t last_slash = handle.rfind('/');
  if (last_slash == std::string_view::npos || last_slash + 1 >= handle.size()) return malformed();
  for (size_t sep = handle.rfind("://"); sep != std::string_view::npos && sep > 0;
       sep = handle.rfind("://", sep - 1)) {
    size_t session_begin = sep + 3;
    if (session_begin > last_slash) continue;  // the '/' after the session must be after "://"
    return AppHandle{std::string(handle.substr(0, sep)),
                     std::string(handle.substr(session_begin, last_slash - session_begin)),
                     std::string(handle.substr(last_slash + 1))};
  }
  return malformed();
}

}  // namespace torchxd::core
