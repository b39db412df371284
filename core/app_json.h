// The AppDef JSON format (docs/appdef-json.md): what `torchx run ./job.json`
// takes, what `torchx describe --json` prints, and what the daemon stores.
//
// Keys are TorchX's field names; omitted fields take TorchX's defaults. A
// role's `resource` may also be the name of a named resource ("cpu.small"),
// resolved through `lookup`, and a mount may be a TorchX mount string.
// Decoding rejects wrong types and unknown fields; validation then checks the
// value rules. Every error names the JSON path and the rule, e.g.
//   roles[1].num_replicas: must be > 0, got 0
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_APP_JSON_H_
#define TORCHXD_CORE_APP_JSON_H_

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/app_def.h"
#include "core/result.h"

namespace torchxd::core {

using NamedResourceLookup = std::function<Result<Resource>(std::string_view name)>;

nlohmann::json ResourceToJson(const Resource& resource);
nlohmann::json MountToJson(const Mount& mount);
nlohmann::json RoleToJson(const Role& role);
nlohmann::json AppDefToJson(const AppDef& app);

// A resource object {"cpu", "gpu", "memMB", "capabilities", "devices", "tags"};
// `path` prefixes error messages.
[[nodiscard]] Result<Resource> ResourceFromJson(const nlohmann::json& json,
                                                const std::string& path);

struct AppDefDecodeOptions {
  NamedResourceLookup lookup;  // for "resource": "<name>"; unset = such roles are an error
  std::string home;            // expands '~' in bind mount strings
  bool validate = true;        // false: decode only (a record this daemon stored itself)
};

// Decodes and validates.
[[nodiscard]] Result<AppDef> AppDefFromJson(const nlohmann::json& json,
                                            const AppDefDecodeOptions& options = {});
// Parses text (syntax errors name the line and column), then AppDefFromJson.
[[nodiscard]] Result<AppDef> ParseAppDefJson(std::string_view text,
                                             const AppDefDecodeOptions& options = {});

// The value rules, for AppDefs built in code (components) as well as decoded ones.
[[nodiscard]] Result<void> ValidateAppDef(const AppDef& app);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_APP_JSON_H_
