#include "supervisor/shim_files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

Result<std::optional<int>> GetOptionalInt(const json& j, const char* key, const char* file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<int>();
  auto v = Get<int>(j, key, file);
  if (!v) return Fail(v.error());
  return std::optional<int>(*v);
}

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
  return Dump(json{{"version", kShimFilesVersion}, {"shim_pid", s.shim_pid}, {"shim_start", s.shim_start},
                   {"child_pid", s.child_pid}, {"child_start", s.child_start}, {"boot_id", s.boot_id},
                   {"attempt", s.attempt}, {"started_ms", s.started_ms}});
}

Result<ShimState> DecodeShimState(std::string_view text) {
  const char* file = kShimStateFile;
  auto j = ParseObject(text, file);
  if (!j) return Fail(j.error());
  ShimState s;
  auto shim_pid = Get<int64_t>(*j, "shim_pid", file);
  auto shim_start = Get<uint64_t>(*j, "shim_start", file);
  auto child_pid = Get<int64_t>(*j, "child_pid", file);
  auto child_start = Get<uint64_t>(*j, "child_start", file);
  auto boot_id = Get<std::string>(*j, "boot_id", file);
  auto attempt = Get<int>(*j, "attempt", file);
  auto started = Get<int64_t>(*j, "started_ms", file);
  for (const Error* e : {shim_pid ? nullptr : &shim_pid.error(), shim_start ? nullptr : &shim_start.error(),
                         child_pid ? nullptr : &child_pid.error(), child_start ? nullptr : &child_start.error(),
                         boot_id ? nullptr : &boot_id.error(), attempt ? nullptr : &attempt.error(),
                         started ? nullptr : &started.error()}) {
    if (e != nullptr) return Fail(*e);
  }
  s.shim_pid = *shim_pid;
  s.shim_start = *shim_start;
  s.child_pid = *child_pid;
  s.child_start = *child_start;
  s.boot_id = *boot_id;
  s.attempt = *attempt;
  s.started_ms = *started;
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
  return Dump(j);
}

Result<ShimExit> DecodeShimExit(std::string_view text) {
  const char* file = kShimExitFile;
  auto j = ParseObject(text, file);
  if (!j) return Fail(j.error());
  ShimExit e;
  auto attempt = Get<int>(*j, "attempt", file);
  auto pid = Get<int64_t>(*j, "pid", file);
  auto code = GetOptionalInt(*j, "exit_code", file);
  auto signal = GetOptionalInt(*j, "signal", file);
  auto core = Get<bool>(*j, "core_dumped", file);
  auto reason = Get<std::string>(*j, "reason", file);
  auto message = Get<std::string>(*j, "message", file);
  auto started = Get<int64_t>(*j, "started_ms", file);
  auto ended = Get<int64_t>(*j, "ended_ms", file);
  auto out = Get<uint64_t>(*j, "stdout_bytes", file);
  auto err = Get<uint64_t>(*j, "stderr_bytes", file);
  auto disk = Get<uint64_t>(*j, "log_disk_bytes", file);
  auto lost = Get<uint64_t>(*j, "log_lost_bytes", file);
  for (const Error* x : {attempt ? nullptr : &attempt.error(), pid ? nullptr : &pid.error(),
                         code ? nullptr : &code.error(), signal ? nullptr : &signal.error(),
                         core ? nullptr : &core.error(), reason ? nullptr : &reason.error(),
                         message ? nullptr : &message.error(), started ? nullptr : &started.error(),
                         ended ? nullptr : &ended.error(), out ? nullptr : &out.error(), err ? nullptr : &err.error(),
                         disk ? nullptr : &disk.error(), lost ? nullptr : &lost.error()}) {
    if (x != nullptr) return Fail(*x);
  }
  bool known = false;
  for (size_t i = 0; i < std::size(kReasons); ++i) {
    if (*reason == kReasons[i]) {
      e.reason = static_cast<ShimExitReason>(i);
      known = true;
    }
  }
  if (!known) return Fail(Error::InvalidArgument("exit.json: unknown reason `" + reason->substr(0, 32) + "`"));
  e.attempt = *attempt;
  e.pid = *pid;
  e.exit_code = *code;
  e.signal = *signal;
  e.core_dumped = *core;
  e.message = message->substr(0, 4096);
  e.started_ms = *started;
  e.ended_ms = *ended;
  e.stdout_bytes = *out;
  e.stderr_bytes = *err;
  e.log_disk_bytes = *disk;
  e.log_lost_bytes = *lost;
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
  ::unlinkat(dir_fd, tmp.c_str(), 0);
  int fd = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Fail(Error::Io("create " + tmp + ": " + strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlinkat(dir_fd, tmp.c_str(), 0);
      return Fail(Error::Io("write " + tmp + ": " + strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
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
  int fd = ::openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return Fail(Error::NotFound(std::string(name) + " is absent"));
    return Fail(Error::Io(std::string("open ") + name + ": " + strerror(e)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Fail(Error::InvalidArgument(std::string(name) + " is not a regular file"));
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxShimFileBytes) {
      ::close(fd);
      return Fail(Error::InvalidArgument(std::string(name) + " is larger than " + std::to_string(kMaxShimFileBytes) + " bytes"));
    }
  }
  ::close(fd);
  return out;
}

}  // namespace torchxd::supervisor
