#include "net/curl_api.h"

#include <mutex>
#include <string>

#include "core/dl_symbols.h"

namespace torchxd::net {

Result<const CurlApi*> LoadCurl() {
  static CurlApi api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = DlOpen("libcurl.so.4", "libcurl4", error);
    if (lib == nullptr) return;
    std::string missing;
    bool ok = DlSymbol(lib, "curl_global_init", api.global_init, missing) &&
              DlSymbol(lib, "curl_easy_init", api.easy_init, missing) &&
              DlSymbol(lib, "curl_easy_setopt", api.easy_setopt, missing) &&
              DlSymbol(lib, "curl_easy_getinfo", api.easy_getinfo, missing) &&
              DlSymbol(lib, "curl_easy_cleanup", api.easy_cleanup, missing) &&
              DlSymbol(lib, "curl_easy_strerror", api.easy_strerror, missing) &&
              DlSymbol(lib, "curl_slist_append", api.slist_append, missing) &&
              DlSymbol(lib, "curl_slist_free_all", api.slist_free_all, missing) &&
              DlSymbol(lib, "curl_multi_init", api.multi_init, missing) &&
              DlSymbol(lib, "curl_multi_setopt", api.multi_setopt, missing) &&
              DlSymbol(lib, "curl_multi_add_handle", api.multi_add_handle, missing) &&
              DlSymbol(lib, "curl_multi_remove_handle", api.multi_remove_handle, missing) &&
              DlSymbol(lib, "curl_multi_socket_action", api.multi_socket_action, missing) &&
              DlSymbol(lib, "curl_multi_info_read", api.multi_info_read, missing) &&
              DlSymbol(lib, "curl_multi_cleanup", api.multi_cleanup, missing);
    if (!ok) {
      error = "libcurl.so.4 has no " + missing + " (too old a libcurl)";
      return;
    }
    api.global_init(CURL_GLOBAL_DEFAULT);
  });
  if (!error.empty()) return Fail(Error::Unavailable(error));
  return &api;
}

}  // namespace torchxd::net
