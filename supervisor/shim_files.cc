#include "supervisor/shim_files.h"

#include "core/unique_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/json_parse.h"

namespace torchxd::supervisor {
namespace {

using nlohmann::json;

constexpr std::string_view kReasons[] = {"exited", "stopped", "spawn_failed", "daemon_lost"};

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

// Typed field readers: a missing or mistyped field is an error naming it.
template <class T>
Result<T> Get(const json& j, const char* key, const char* file) {
  auto it = j.find(key);
  auto wrong = [&] {
    return Fail(Error::InvalidArgument(std::string(file) + ": field `" + key + "` is missing or has the wrong type"));
  };
  if (it == j.end()) return wrong();
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return wrong();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return wrong();
  } else if constexpr (std::is_unsigned_v<T>) {
    if (!it->is_number_unsigned()) return wrong();
  } else {
    if (!it->is_number_integer()) return wrong();
    auto v = it->get<int64_t>();
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) || v > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return wrong();
    }
  }
  return it->get<T>();
}

// Reads fields one after the other and keeps the first error: one check at the end.
struct Fields {
  const json& j;
  const char* file;
  std::optional<Error> error;

  template <class T>
  T Take(const char* key) {
    auto v = Get<T>(j, key, file);
    if (v) return *v;
    if (!error) error = v.error();
    return T{};
  }
  std::optional<int> TakeOptionalInt(const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    return Take<int>(key);
  }
};

Result<json> ParseObject(std::string_view text, const char* file) {
  auto j = core::ParseJson(text, 4);
  if (!j) return Fail(Error::InvalidArgument(std::string(file) + ": " + j.error().message));
  if (!j->is_object()) return Fail(Error::InvalidArgument(std::string(file) + ": not a JSON object"));
  auto version = Get<int>(*j, "version", file);
  if (!version) return Fail(version.error());
  if (*version != kShimFilesVersion) {
    return Fail(Error::InvalidArgument(std::string(file) + ": version " + std::to_string(*version) +
                                       " is not one this torchxd reads (" + std::to_string(kShimFilesVersion) + ")"));
  }
  return j;
}

}  // namespace

std::string_view ShimExitReasonName(ShimExitReason reason) { return kReasons[static_cast<int>(reason)]; }

std::string EncodeShimState(const ShimState& s) {
  json j{{"version", kShimFilesVersion}, {"shim_pid", s.shim_pid}, {"child_pid", s.child_pid},
         {"boot_id", s.boot_id}, {"attempt", s.attempt}, {"started_ms", s.started_ms}};
  if (s.hosted) j["hosted"] = true;  // absent in the files of a monitor per attempt
  return Dump(j);
}

Result<ShimState> DecodeShimState(std::string_view text) {
  auto j = ParseObject(text, kShimStateFile);
  if (!j) return Fail(j.error());
  Fields f{*j, kShimStateFile, std::nullopt};
  ShimState s;
  s.shim_pid = f.Take<int64_t>("shim_pid");
  s.child_pid = f.Take<int64_t>("child_pid");
  s.boot_id = f.Take<std::string>("boot_id");
  s.attempt = f.Take<int>("attempt");
  s.started_ms = f.Take<int64_t>("started_ms");
  if (j->contains("hosted")) s.hosted = f.Take<bool>("hosted");
  if (f.error) return Fail(*f.error);
  if (s.shim_pid <= 0 || s.shim_pid > INT32_MAX) return Fail(Error::InvalidArgument("state.json: invalid shim_pid"));
  return s;
}

std::string EncodeShimExit(const ShimExit& e) {
  json j{{"version", kShimFilesVersion},
         {"attempt", e.attempt},
         {"pid", e.pid},
         {"exit_code", e.exit_code ? json(*e.exit_code) : json(nullptr)},
         {"signal", e.signal ? json(*e.signal) : json(nullptr)},
         {"core_dumped", e.core_dumped},
         {"reason", std::string(ShimExitReasonName(e.reason))},
         {"message", e.message},
         {"started_ms", e.started_ms},
         {"ended_ms", e.ended_ms},
         {"stdout_bytes", e.stdout_bytes},
         {"stderr_bytes", e.stderr_bytes},
         {"log_disk_bytes", e.log_disk_bytes},
         {"log_lost_bytes", e.log_lost_bytes}};
  if (e.group_killed) j["group_killed"] = true;  // absent in the files of a monitor per attempt
  return Dump(j);
}

Result<ShimExit> DecodeShimExit(std::string_view text) {
  auto j = ParseObject(text, kShimExitFile);
  if (!j) return Fail(j.error());
  Fields f{*j, kShimExitFile, std::nullopt};
  ShimExit e;
  e.attempt = f.Take<int>("attempt");
  e.pid = f.Take<int64_t>("pid");
  e.exit_code = f.TakeOptionalInt("exit_code");
  e.signal = f.TakeOptionalInt("signal");
  e.core_dumped = f.Take<bool>("core_dumped");
  std::string reason = f.Take<std::string>("reason");
  e.message = f.Take<std::string>("message").substr(0, 4096);
  e.started_ms = f.Take<int64_t>("started_ms");
  e.ended_ms = f.Take<int64_t>("ended_ms");
  e.stdout_bytes = f.Take<uint64_t>("stdout_bytes");
  e.stderr_bytes = f.Take<uint64_t>("stderr_bytes");
  e.log_disk_bytes = f.Take<uint64_t>("log_disk_bytes");
  e.log_lost_bytes = f.Take<uint64_t>("log_lost_bytes");
  if (j->contains("group_killed")) e.group_killed = f.Take<bool>("group_killed");
  if (f.error) return Fail(*f.error);
  auto known = std::find(std::begin(kReasons), std::end(kReasons), reason);
  if (known == std::end(kReasons)) {
    return Fail(Error::InvalidArgument("exit.json: unknown reason `" + reason.substr(0, 32) + "`"));
  }
  e.reason = static_cast<ShimExitReason>(known - std::begin(kReasons));
  if (e.reason != ShimExitReason::kSpawnFailed && e.exit_code.has_value() == e.signal.has_value()) {
    return Fail(Error::InvalidArgument("exit.json: exactly one of exit_code and signal must be set"));
  }
  if ((e.signal && (*e.signal <= 0 || *e.signal > 64)) || (e.exit_code && (*e.exit_code < 0 || *e.exit_code > 255))) {
    return Fail(Error::InvalidArgument("exit.json: exit_code or signal out of range"));
  }
  return e;
}

Result<void> WriteFileAtomically(int dir_fd, const char* name, std::string_view bytes) {
  std::string tmp = std::string(name) + ".tmp";
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  UniqueFd fd(::openat(dir_fd, tmp.c_str(), kFlags, 0600));
  if (!fd.valid() && errno == EEXIST) {  // one left by a writer that died
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    fd.reset(::openat(dir_fd, tmp.c_str(), kFlags, 0600));
  }
  if (!fd.valid()) return Fail(Error::Io("create " + tmp + ": " + strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      fd.reset();
      ::unlinkat(dir_fd, tmp.c_str(), 0);
      return Fail(Error::Io("write " + tmp + ": " + strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd.release()) != 0) {  // its error is the write's last word (NFS, quotas)
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return Fail(Error::Io("close " + tmp + ": " + strerror(errno)));
  }
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, name) != 0) {
    int e = errno;
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return Fail(Error::Io(std::string("rename ") + name + ": " + strerror(e)));
  }
  return {};
}

Result<std::string> ReadShimFile(int dir_fd, const char* name) {
  UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    int e = errno;
    if (e == ENOENT) return Fail(Error::NotFound(std::string(name) + " is absent"));
    if (e == EMFILE || e == ENFILE) return Fail(Error::Unavailable(std::string("open ") + name + ": " + strerror(e)));
    return Fail(Error::Io(std::string("open ") + name + ": " + strerror(e)));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Fail(Error::InvalidArgument(std::string(name) + " is not a regular file"));
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxShimFileBytes) {
      return Fail(Error::InvalidArgument(std::string(name) + " is larger than " + std::to_string(kMaxShimFileBytes) + " bytes"));
    }
  }
  return out;
}

}  // namespace torchxd::supervisor
