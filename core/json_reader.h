// JsonReader: reads the fields of one JSON object and remembers the first
// error, named by its JSON path ("roles[1].num_replicas: must be > 0, got 0").
// Unknown fields are an error with a "did you mean" suggestion, so a typo in a
// hand-written AppDef never silently falls back to a default.
//
// Usage: construct over an object, call the typed getters (each returns a
// default after an error), then Finish() for the verdict.
//
// Thread contract: one instance per thread.
#ifndef TORCHXD_CORE_JSON_READER_H_
#define TORCHXD_CORE_JSON_READER_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace torchxd::core {

// "roles" + 1 -> "roles[1]"; "roles[1]" + "env" -> "roles[1].env".
std::string JsonPathIndex(std::string_view path, size_t index);
std::string JsonPathKey(std::string_view path, std::string_view key);
// "string", "number", "boolean", "array", "object", "null" (what the user wrote).
std::string JsonTypeName(const nlohmann::json& value);

// `value` as an integer in [lo, hi]; the error names `path` and the range
// (an integer past 64 bits, or any other number, is never cut to fit).
[[nodiscard]] Result<int64_t> IntInRange(const nlohmann::json& value, std::string_view path, int64_t lo, int64_t hi);

class JsonReader {
 public:
  // `known_keys` must outlive the reader (string literals, as every caller writes them).
  JsonReader(const nlohmann::json& node, std::string path, std::vector<std::string_view> known_keys);

  bool ok() const { return !error_.has_value(); }
  // Records an error at `path` (the first one wins).
  void SetError(std::string_view path, std::string_view rule);
  std::string PathOf(std::string_view key) const { return JsonPathKey(path_, key); }

  bool Has(std::string_view key) const;
  // The raw field (or nullptr when absent); marks it as read.
  const nlohmann::json* Field(std::string_view key);

  std::string String(std::string_view key, std::string_view fallback);
  std::optional<std::string> OptionalString(std::string_view key);
  int Int(std::string_view key, int fallback);
  std::optional<int> OptionalInt(std::string_view key);
  // An integer field in [lo, hi] (the error names the range).
  std::optional<int64_t> OptionalInt(std::string_view key, int64_t lo, int64_t hi);
  bool Bool(std::string_view key, bool fallback);
  std::vector<std::string> StringList(std::string_view key);
  std::map<std::string, std::string> StringMap(std::string_view key);
  std::map<std::string, int> IntMap(std::string_view key);
  nlohmann::json Object(std::string_view key);  // any JSON object, {} when absent

  // The verdict: the first error, or an unknown-field error.
  [[nodiscard]] Result<void> Finish();

 private:
  // `path` is built only for an error: stored records are read by the thousand.
  template <typename PathFn>
  std::optional<int> ToInt(const nlohmann::json& value, PathFn path);

  const nlohmann::json& node_;
  std::string path_;
  std::vector<std::string_view> known_keys_;
  std::vector<const std::string*> read_;  // keys of node_ read through Field()
  std::optional<Error> error_;
};

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_JSON_READER_H_
