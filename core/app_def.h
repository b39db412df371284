// The TorchX job model: AppDef, Role, Resource, mounts, RetryPolicy, AppState.
//
// Field names, defaults and enum values are TorchX's (torchx/specs/api.py), so
// a TorchX user recognises every noun. JSON encoding lives in app_json.h,
// validation rules there too. These are plain values.
//
// Thread contract: plain values, safe to use from any thread.
#ifndef TORCHXD_CORE_APP_DEF_H_
#define TORCHXD_CORE_APP_DEF_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace torchxd::core {

// TorchX sentinels.
inline constexpr std::string_view kMissing = "<MISSING>";
inline constexpr std::string_view kNone = "<NONE>";

// AppState ints are wire-compatible with TorchX (0-7). ReplicaState = AppState.
enum class AppState {
  kUnsubmitted = 0,
  kSubmitted = 1,
  kPending = 2,
  kRunning = 3,
  kSucceeded = 4,
  kFailed = 5,
  kCancelled = 6,
  kUnknown = 7,
};
using ReplicaState = AppState;

std::string_view AppStateName(AppState state);  // "RUNNING"
std::optional<AppState> AppStateFromName(std::string_view name);
std::optional<AppState> AppStateFromInt(int value);
bool IsTerminal(AppState state);  // SUCCEEDED, FAILED, CANCELLED
bool IsStarted(AppState state);   // terminal or RUNNING

enum class RetryPolicy { kReplica, kApplication, kRole };
std::string_view RetryPolicyName(RetryPolicy policy);  // "REPLICA", "APPLICATION", "ROLE"
std::optional<RetryPolicy> RetryPolicyFromName(std::string_view name);

// Resource.cpu/gpu/memMB of -1 mean "not set" (TorchX's NULL_RESOURCE).
struct Resource {
  int cpu = -1;
  int gpu = -1;
  int mem_mb = -1;  // "memMB" in JSON
  nlohmann::json capabilities = nlohmann::json::object();
  std::map<std::string, int> devices;
  nlohmann::json tags = nlohmann::json::object();

  bool IsNull() const { return cpu == -1 && gpu == -1 && mem_mb == -1; }
  bool operator==(const Resource&) const = default;
};

struct BindMount {
  std::string src_path;
  std::string dst_path;
  bool read_only = false;
  bool operator==(const BindMount&) const = default;
};
struct VolumeMount {
  std::string src;  // named volume / PVC claim name
  std::string dst_path;
  bool read_only = false;
  bool operator==(const VolumeMount&) const = default;
};
struct DeviceMount {
  std::string src_path;
  std::string dst_path;
  std::string permissions = "rwm";
  bool operator==(const DeviceMount&) const = default;
};
using Mount = std::variant<BindMount, VolumeMount, DeviceMount>;

// The most retries a role may ask for: a replica that fails faster than
// that many restarts is broken, and each restart costs the box.
inline constexpr int kMaxRetries = 1000;
// A role's entrypoint and image are shorter than this (PATH_MAX).
inline constexpr size_t kMaxPathBytes = 4096;
// The most devices of one kind (resource.devices) a replica may ask for.
inline constexpr int kMaxDevicesPerKind = 1024;

struct Role {
  std::string name;
  std::string image;
  std::optional<int> min_replicas;
  std::string entrypoint = std::string(kMissing);
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  int num_replicas = 1;
  int max_retries = 0;  // at most kMaxRetries
  RetryPolicy retry_policy = RetryPolicy::kApplication;
  Resource resource;
  std::map<std::string, int> port_map;
  nlohmann::json metadata = nlohmann::json::object();
  std::vector<Mount> mounts;

  int gpu_count() const { return resource.gpu > 0 ? resource.gpu : 0; }
  bool operator==(const Role&) const = default;
};

struct AppDef {
  std::string name;
  std::vector<Role> roles;
  std::map<std::string, std::string> metadata;

  bool operator==(const AppDef&) const = default;
};

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_APP_DEF_H_
