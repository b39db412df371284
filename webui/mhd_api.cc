#include "webui/mhd_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace torchxd::webui {
namespace {

template <class Fn>
bool Resolve(void* lib, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (out == nullptr) missing = name;
  return out != nullptr;
}

}  // namespace

Result<const MhdApi*> LoadMhd() {
  static MhdApi api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = ::dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = ::dlerror();
      error = std::string("cannot load libmicrohttpd.so.12 (") + (why ? why : "?") + "); install libmicrohttpd12";
      return;
    }
    std::string missing;
    bool ok = Resolve(lib, "MHD_start_daemon", api.start_daemon, missing) &&
              Resolve(lib, "MHD_stop_daemon", api.stop_daemon, missing) &&
              Resolve(lib, "MHD_run", api.run, missing) &&
              Resolve(lib, "MHD_get_timeout", api.get_timeout, missing) &&
              Resolve(lib, "MHD_get_daemon_info", api.get_daemon_info, missing) &&
              Resolve(lib, "MHD_get_connection_info", api.get_connection_info, missing) &&
              Resolve(lib, "MHD_get_connection_values", api.get_connection_values, missing) &&
              Resolve(lib, "MHD_suspend_connection", api.suspend_connection, missing) &&
              Resolve(lib, "MHD_resume_connection", api.resume_connection, missing) &&
              Resolve(lib, "MHD_create_response_from_buffer", api.create_response_from_buffer, missing) &&
              Resolve(lib, "MHD_create_response_from_callback", api.create_response_from_callback, missing) &&
              Resolve(lib, "MHD_add_response_header", api.add_response_header, missing) &&
              Resolve(lib, "MHD_queue_response", api.queue_response, missing) &&
              Resolve(lib, "MHD_destroy_response", api.destroy_response, missing);
    if (!ok) error = "libmicrohttpd.so.12 has no " + missing + " (too old a libmicrohttpd)";
  });
  if (!error.empty()) return Fail(Error::Unavailable(error));
  return &api;
}

}  // namespace torchxd::webui
