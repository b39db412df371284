#include "core/app_handle.h"

#include <algorithm>

namespace torchxd::core {

std::string AppHandle::ToString() const { return MakeAppHandle(scheduler, session, app_id); }

int CompareAppHandles(const AppHandleParts& a, const AppHandleParts& b) {
  size_t i = 0, j = 0, x = 0, y = 0;  // the part and the offset in it, on each side
  for (;;) {
    while (i < 5 && x == a.parts[i].size()) ++i, x = 0;
    while (j < 5 && y == b.parts[j].size()) ++j, y = 0;
    if (i == 5 || j == 5) return (i == 5 ? 0 : 1) - (j == 5 ? 0 : 1);
    size_t n = std::min(a.parts[i].size() - x, b.parts[j].size() - y);
    if (int c = a.parts[i].substr(x, n).compare(b.parts[j].substr(y, n)); c != 0) return c;
    x += n;
    y += n;
  }
}

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
