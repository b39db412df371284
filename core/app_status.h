// AppStatus / RoleStatus / ReplicaStatus, TorchX's status types, plus what
// torchxd adds per replica (pid, exit code or signal, attempt, start and end
// time, error message) and per app (its handle).
//
// AppStatusToJson is TorchX's AppStatus.to_json shape (app "state" a name,
// each replica's "state" the int) with the added fields; FormatAppStatus is
// TorchX's AppStatus.format() text with pid/exitcode/attempt on each replica
// line. Times are unix milliseconds here and RFC 3339 UTC in JSON.
//
// Thread contract: plain values and pure functions; safe from any thread.
#ifndef TORCHXD_CORE_APP_STATUS_H_
#define TORCHXD_CORE_APP_STATUS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/app_def.h"
#include "core/result.h"

namespace torchxd::core {

// A replica's error_message is cut here (the whole error.json stays in its
// log dir), so that a status with every replica failed still fits one frame.
inline constexpr size_t kMaxErrorMessageBytes = 4096;

// A GPU a replica holds: the index CUDA_VISIBLE_DEVICES names and its UUID ("" when unknown).
struct ReplicaGpu {
  int index = 0;
  std::string uuid;
  bool operator==(const ReplicaGpu&) const = default;
};

struct ReplicaStatus {
  int id = 0;
  ReplicaState state = ReplicaState::kUnknown;
  std::string role;
  std::string hostname;
  std::string structured_error_msg = std::string(kNone);
  // torchxd additions.
  std::optional<int> pid;
  std::optional<int> exit_code;
  std::optional<int> signal;
  int attempt = 0;
  std::optional<int64_t> start_time_ms;
  std::optional<int64_t> end_time_ms;
  std::string error_message;
  uint64_t log_bytes_lost = 0;  // output the daemon could not store (disk full)
  std::vector<ReplicaGpu> gpus;  // what admission gave it (local apps)

  bool operator==(const ReplicaStatus&) const = default;
};

struct RoleStatus {
  std::string role;
  std::vector<ReplicaStatus> replicas;
  bool operator==(const RoleStatus&) const = default;
};

struct AppStatus {
  AppState state = AppState::kUnknown;
  int num_restarts = 0;
  std::string msg;
  std::string structured_error_msg = std::string(kNone);
  std::optional<std::string> ui_url;
  std::vector<RoleStatus> roles;
  std::string app_handle;  // torchxd addition
  std::optional<std::string> page_url;  // torchxd: the app on the daemon's web page, when one is served

  bool IsTerminal() const { return core::IsTerminal(state); }
  bool operator==(const AppStatus&) const = default;
};

// "2026-11-22T11:48:52.123Z"; and back (accepts a zone offset too).
// Wall-clock time as unix milliseconds (for display and records, never for timeouts).
int64_t UnixNowMs();
std::string FormatRfc3339Utc(int64_t unix_ms);
std::optional<int64_t> ParseRfc3339(const std::string& text);
// "2021-08-09T20:57:01.479780331Z" (UTC, as kubelets and Docker engines stamp) -> ns since the epoch.
std::optional<int64_t> ParseRfc3339Nanos(std::string_view text);

nlohmann::json AppStatusToJson(const AppStatus& status);
// The same, dumped (byte for byte what AppStatusToJson(status) with each of
// `extra`'s members set on it would dump), built as text: no DOM of each replica.
std::string AppStatusToJsonText(const AppStatus& status, const nlohmann::json& extra = nlohmann::json::object());
[[nodiscard]] Result<AppStatus> AppStatusFromJson(const nlohmann::json& json);

// TorchX's AppStatus.format(); `filter_roles` empty = all roles. Where
// replicas failed, `*` marks them (TorchX marks each role's replica 0, as
// here when none failed); unless `verbose`, the app's structured error
// (the failed replica's reply file, a traceback of escaped JSON) is its
// message's first line; the UI URL is the page's when one is served.
std::string FormatAppStatus(const AppStatus& status, const std::vector<std::string>& filter_roles = {},
                            bool verbose = false);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_APP_STATUS_H_
