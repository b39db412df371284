#include "webui/mhd_api.h"

#include <mutex>
#include <string>

#include "core/dl_symbols.h"

namespace torchxd::webui {

Result<const MhdApi*> LoadMhd() {
  static MhdApi api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = DlOpen("libmicrohttpd.so.12", "libmicrohttpd12", error);
    if (lib == nullptr) return;
    std::string missing;
    bool ok = DlSymbol(lib, "MHD_start_daemon", api.start_daemon, missing) &&
              DlSymbol(lib, "MHD_stop_daemon", api.stop_daemon, missing) &&
              DlSymbol(lib, "MHD_run", api.run, missing) &&
              DlSymbol(lib, "MHD_get_timeout", api.get_timeout, missing) &&
              DlSymbol(lib, "MHD_get_daemon_info", api.get_daemon_info, missing) &&
              DlSymbol(lib, "MHD_get_connection_info", api.get_connection_info, missing) &&
              DlSymbol(lib, "MHD_get_connection_values", api.get_connection_values, missing) &&
              DlSymbol(lib, "MHD_suspend_connection", api.suspend_connection, missing) &&
              DlSymbol(lib, "MHD_resume_connection", api.resume_connection, missing) &&
              DlSymbol(lib, "MHD_create_response_from_buffer", api.create_response_from_buffer, missing) &&
              DlSymbol(lib, "MHD_create_response_from_callback", api.create_response_from_callback, missing) &&
              DlSymbol(lib, "MHD_add_response_header", api.add_response_header, missing) &&
              DlSymbol(lib, "MHD_queue_response", api.queue_response, missing) &&
              DlSymbol(lib, "MHD_destroy_response", api.destroy_response, missing) &&
              DlSymbol(lib, "MHD_add_connection", api.add_connection, missing);
    if (!ok) error = "libmicrohttpd.so.12 has no " + missing + " (too old a libmicrohttpd)";
  });
  if (!error.empty()) return Fail(Error::Unavailable(error));
  return &api;
}

}  // namespace torchxd::webui
