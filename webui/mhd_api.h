// MhdApi: libmicrohttpd's entry points, loaded with dlopen when the first
// browser connects.
//
// Why not link it: Debian's libmicrohttpd12 brings GnuTLS and seven more
// libraries, about 3 MiB of resident memory in every daemon from its start,
// although most daemons never see a browser. The headers (types, constants)
// are libmicrohttpd's own.
//
// Thread contract: LoadMhd() is thread-safe (once); the functions are
// libmicrohttpd's, with its rules.
#ifndef TORCHXD_WEBUI_MHD_API_H_
#define TORCHXD_WEBUI_MHD_API_H_

#include <microhttpd.h>

#include "core/result.h"

namespace torchxd::webui {

struct MhdApi {
  MHD_Daemon* (*start_daemon)(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc, void* apc_cls,
                              MHD_AccessHandlerCallback dh, void* dh_cls, ...);
  void (*stop_daemon)(MHD_Daemon* daemon);
  MHD_Result (*run)(MHD_Daemon* daemon);
  MHD_Result (*get_timeout)(MHD_Daemon* daemon, MHD_UNSIGNED_LONG_LONG* timeout);
  const MHD_DaemonInfo* (*get_daemon_info)(MHD_Daemon* daemon, MHD_DaemonInfoType info_type, ...);
  const MHD_ConnectionInfo* (*get_connection_info)(MHD_Connection* connection, MHD_ConnectionInfoType info_type,
                                                   ...);
  int (*get_connection_values)(MHD_Connection* connection, MHD_ValueKind kind, MHD_KeyValueIterator iterator,
                               void* iterator_cls);
  void (*suspend_connection)(MHD_Connection* connection);
  void (*resume_connection)(MHD_Connection* connection);
  MHD_Response* (*create_response_from_buffer)(size_t size, void* buffer, MHD_ResponseMemoryMode mode);
  MHD_Response* (*create_response_from_callback)(uint64_t size, size_t block_size, MHD_ContentReaderCallback crc,
                                                 void* crc_cls, MHD_ContentReaderFreeCallback crfc);
  MHD_Result (*add_response_header)(MHD_Response* response, const char* header, const char* content);
  MHD_Result (*queue_response)(MHD_Connection* connection, unsigned int status_code, MHD_Response* response);
  void (*destroy_response)(MHD_Response* response);
  MHD_Result (*add_connection)(MHD_Daemon* daemon, MHD_socket client_socket, const struct sockaddr* addr,
                               socklen_t addrlen);
};

// libmicrohttpd.so.12, loaded once; Unavailable naming the library when it is missing.
[[nodiscard]] Result<const MhdApi*> LoadMhd();

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_MHD_API_H_
