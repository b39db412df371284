// .torchxconfig: INI files with scheduler defaults ([local_cwd] log_dir = ...)
// and component argument defaults ([component:dist.ddp] j = 2x1).
//
// Lookup as TorchX: if $TORCHXCONFIG is set, only that file (empty = none; a
// missing file is an error); else $HOME/.torchxconfig then ./.torchxconfig.
// Precedence: -cfg > earlier file > later file > option defaults. Values are
// cast with the option's type; the literal `None` means unset; unknown keys
// warn and are dropped.
//
// Thread contract: a loaded TorchxConfig is immutable; safe from any thread.
#ifndef TORCHXD_CORE_TORCHX_CONFIG_H_
#define TORCHXD_CORE_TORCHX_CONFIG_H_

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/environment.h"
#include "core/result.h"
#include "core/runopts.h"

namespace torchxd::core {

// One INI file: sections in order, each with its key/value pairs in order.
struct IniFile {
  std::string path;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> sections;
};
// Parses INI text (configparser's basics: [section], `key = value` or
// `key: value`, # and ; comment lines, indented continuation lines).
[[nodiscard]] Result<IniFile> ParseIni(std::string_view text, std::string path);

class TorchxConfig {
 public:
  // Finds and parses the files for this environment and working directory.
  [[nodiscard]] static Result<TorchxConfig> Load(const EnvLookup& env, const std::string& cwd);
  static TorchxConfig FromFiles(std::vector<IniFile> files);

  const std::vector<IniFile>& files() const { return files_; }

  // Adds the [scheduler] defaults to `cfg` for keys it does not set yet.
  [[nodiscard]] Result<void> ApplySchedulerDefaults(std::string_view scheduler,
                                                    const RunOpts& opts, Cfg& cfg,
                                                    std::vector<std::string>& warnings) const;
  // [component:NAME] key -> value (string form, as a CLI argument).
  std::map<std::string, std::string> ComponentDefaults(std::string_view component) const;
  // Any section by its full name ("cli:run"), the earlier file winning per key;
  // each value with the file it came from.
  struct Value {
    std::string value;
    std::string file;
  };
  std::map<std::string, Value> Section(std::string_view name) const;

 private:
  std::vector<IniFile> files_;
};

// What `torchx configure` writes, as TorchX's config.dump: a [scheduler]
// section per scheduler, required options as `#FIXME:(type) help` (cut at 60
// characters), with `all` also the optional ones at their defaults (lists
// joined by `;`, maps `k:v;k2:v2`, unset `None`). InvalidArgument for an
// unknown scheduler.
[[nodiscard]] Result<std::string> ConfigTemplate(const std::vector<std::string>& schedulers, bool all);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_TORCHX_CONFIG_H_
