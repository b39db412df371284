#include "core/ids.h"

#include <cctype>
#include <cstdio>
#include <random>

namespace torchxd::core {

std::string IdFromUint64(uint64_t value) {
  std::string out;
  while (value > 0) {
    std::string_view chars = out.empty() ? kIdStartChars : kIdEndChars;
    out += chars[value % chars.size()];
    value /= chars.size();
  }
  return out;
}

std::string RandomId() {
  // std::random_device reads the kernel's entropy (getrandom/urandom) on Linux.
  std::random_device device;
  uint64_t value = 0;
  while (value == 0) {
    value = (static_cast<uint64_t>(device()) << 32) | device();
  }
  return IdFromUint64(value);
}

std::string SessionUuid() {
  std::random_device rd;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%08x%04x", rd(), rd() & 0xffff,
                (rd() & 0x0fff) | 0x4000, (rd() & 0x3fff) | 0x8000, rd(), rd() & 0xffff);
  return buf;
}

std::string MakeUnique(std::string_view name) { return std::string(name) + "-" + RandomId(); }

std::string NormalizeStr(std::string_view s) {
  std::string out;
  for (char c : s) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool keep = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '-';
    if (keep && !(l == '-' && out.empty())) out += l;
  }
  return out;
}

}  // namespace torchxd::core
