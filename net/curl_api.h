// CurlApi: libcurl's entry points, loaded with dlopen on first use.
//
// Why not link libcurl: its dependency tree (OpenSSL, GnuTLS via librtmp,
// Kerberos, LDAP, p11-kit, ...) is mapped and initialised at process start
// and costs an idle torchxd about 6 MiB of resident memory, although only
// the kubernetes and local_docker schedulers ever use HTTP. Loaded lazily,
// a daemon that runs local jobs only never pays for it. The headers (types,
// constants) are libcurl's own.
//
// Thread contract: LoadCurl() is thread-safe (once); the functions are
// libcurl's, with its rules.
#ifndef TORCHXD_NET_CURL_API_H_
#define TORCHXD_NET_CURL_API_H_

#include <curl/curl.h>

#include "core/result.h"

namespace torchxd::net {

struct CurlApi {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL* easy, CURLoption option, ...);
  CURLcode (*easy_getinfo)(CURL* easy, CURLINFO info, ...);
  void (*easy_cleanup)(CURL* easy);
  const char* (*easy_strerror)(CURLcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* text);
  void (*slist_free_all)(curl_slist* list);
  CURLM* (*multi_init)();
  CURLMcode (*multi_setopt)(CURLM* multi, CURLMoption option, ...);
  CURLMcode (*multi_add_handle)(CURLM* multi, CURL* easy);
  CURLMcode (*multi_remove_handle)(CURLM* multi, CURL* easy);
  CURLMcode (*multi_socket_action)(CURLM* multi, curl_socket_t s, int ev_bitmask, int* running_handles);
  CURLMsg* (*multi_info_read)(CURLM* multi, int* msgs_in_queue);
  CURLMcode (*multi_cleanup)(CURLM* multi);
};

// libcurl.so.4, loaded and initialised once; Unavailable naming the library when it is missing.
[[nodiscard]] Result<const CurlApi*> LoadCurl();

}  // namespace torchxd::net

#endif  // TORCHXD_NET_CURL_API_H_
