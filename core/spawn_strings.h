// SpawnStrings: the NUL-terminated char* arrays posix_spawn, exec and
// uv_spawn take (argv, envp), over strings it owns, so a caller builds
// neither by hand.
//
// Thread contract: a value type; no shared state.
#ifndef TORCHXD_CORE_SPAWN_STRINGS_H_
#define TORCHXD_CORE_SPAWN_STRINGS_H_

#include <map>
#include <string>
#include <vector>

namespace torchxd {

class SpawnStrings {
 public:
  explicit SpawnStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {
    for (auto& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  // "KEY=value" for each variable of `env`.
  static SpawnStrings Env(const std::map<std::string, std::string>& env) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : env) kv.push_back(k + "=" + v);
    return SpawnStrings(std::move(kv));
  }
  SpawnStrings(const SpawnStrings&) = delete;
  SpawnStrings& operator=(const SpawnStrings&) = delete;
  SpawnStrings(SpawnStrings&& other) noexcept = default;  // the strings' buffers move with them

  char** data() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

}  // namespace torchxd

#endif  // TORCHXD_CORE_SPAWN_STRINGS_H_
