#include "core/curl_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace torchxd {
namespace {

template <class Fn>
bool Resolve(void* lib, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (out == nullptr) missing = name;
  return out != nullptr;
}

}  // namespace

Result<const CurlApi*> LoadCurl() {
  static CurlApi api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = ::dlerror();
      error = std::string("cannot load libcurl.so.4 (") + (why ? why : "?") + "); install libcurl4";
      return;
    }
    std::string missing;
    bool ok = Resolve(lib, "curl_global_init", api.global_init, missing) &&
              Resolve(lib, "curl_easy_init", api.easy_init, missing) &&
              Resolve(lib, "curl_easy_setopt", api.easy_setopt, missing) &&
              Resolve(lib, "curl_easy_getinfo", api.easy_getinfo, missing) &&
              Resolve(lib, "curl_easy_cleanup", api.easy_cleanup, missing) &&
              Resolve(lib, "curl_easy_strerror", api.easy_strerror, missing) &&
              Resolve(lib, "curl_slist_append", api.slist_append, missing) &&
              Resolve(lib, "curl_slist_free_all", api.slist_free_all, missing) &&
              Resolve(lib, "curl_multi_init", api.multi_init, missing) &&
              Resolve(lib, "curl_multi_setopt", api.multi_setopt, missing) &&
              Resolve(lib, "curl_multi_add_handle", api.multi_add_handle, missing) &&
              Resolve(lib, "curl_multi_remove_handle", api.multi_remove_handle, missing) &&
              Resolve(lib, "curl_multi_socket_action", api.multi_socket_action, missing) &&
              Resolve(lib, "curl_multi_info_read", api.multi_info_read, missing) &&
              Resolve(lib, "curl_multi_cleanup", api.multi_cleanup, missing);
    if (!ok) {
      error = "libcurl.so.4 has no " + missing + " (too old a libcurl)";
      return;
    }
    api.global_init(CURL_GLOBAL_DEFAULT);
  });
  if (!error.empty()) return Fail(Error::Unavailable(error));
  return &api;
}

}  // namespace torchxd
