// UvHandle<T>: the one owner of a heap-allocated libuv handle. Destroying it
// detaches the handle from its owner (data = nullptr, so late callbacks see
// no owner) and uv_close()s it; the memory is freed in the close callback, as
// libuv requires. Never delete a live handle directly.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_CORE_UV_HANDLE_H_
#define TORCHXD_CORE_UV_HANDLE_H_

#include <uv.h>

#include <memory>
#include <string>

namespace torchxd {

template <class T>
void CloseUvHandle(T* handle) {
  if (handle == nullptr) return;
  auto* h = reinterpret_cast<uv_handle_t*>(handle);
  h->data = nullptr;
  if (uv_is_closing(h) == 0) {
    uv_close(h, [](uv_handle_t* closed) { delete reinterpret_cast<T*>(closed); });
  }
}

template <class T>
struct UvHandleCloser {
  void operator()(T* handle) const { CloseUvHandle(handle); }
};

template <class T>
using UvHandle = std::unique_ptr<T, UvHandleCloser<T>>;

template <class T>
UvHandle<T> NewUvHandle(void* data) {
  auto* h = new T{};
  h->data = data;
  return UvHandle<T>(h);
}

// "uv_spawn: ENOENT (no such file or directory)"
inline std::string UvError(const char* what, int code) {
  return std::string(what) + ": " + uv_err_name(code) + " (" + uv_strerror(code) + ")";
}

}  // namespace torchxd

#endif  // TORCHXD_CORE_UV_HANDLE_H_
