// DlSymbol: one entry point of a dlopen'ed library into a typed pointer, for
// the libraries torchxd loads on first use (net/curl_api.h, webui/mhd_api.h).
//
// Thread contract: as dlsym.
#ifndef TORCHXD_CORE_DL_SYMBOLS_H_
#define TORCHXD_CORE_DL_SYMBOLS_H_

#include <dlfcn.h>

#include <string>

namespace torchxd {

// Sets `out` to `name` in `lib`; false (and `missing` = name) when it is absent.
template <class Fn>
bool DlSymbol(void* lib, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (out == nullptr) missing = name;
  return out != nullptr;
}

// dlopen's RTLD_NOW | RTLD_LOCAL, or the message "cannot load SONAME (why); install PACKAGE".
inline void* DlOpen(const char* soname, const char* package, std::string& error) {
  void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    error = std::string("cannot load ") + soname + " (" + (why ? why : "?") + "); install " + package;
  }
  return lib;
}

}  // namespace torchxd

#endif  // TORCHXD_CORE_DL_SYMBOLS_H_
