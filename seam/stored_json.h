// Reading a stored record's fields. A store holds what this daemon wrote, but
// also what an older build wrote, a hand edit, or a bug: each field is read as
// hostile input. A value of another JSON type, or an integer outside the
// field's range, is an error (StoredFieldError, named by its key), never
// cut to fit or taken for a default: the caller sets the record aside.
//
// Thread contract: pure; any thread.
#ifndef TORCHXD_SEAM_STORED_JSON_H_
#define TORCHXD_SEAM_STORED_JSON_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace torchxd::seam {

class StoredFieldError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace stored_detail {

[[noreturn]] inline void Bad(const std::string& where, const char* want, const nlohmann::json& v) {
  std::string seen = v.is_null() ? "null" : v.type_name();
  throw StoredFieldError(where + ": " + want + " expected, found " + seen);
}

template <class T>
T As(const nlohmann::json& v, const std::string& where);

template <class T>
T Integer(const nlohmann::json& v, const std::string& where) {
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) Bad(where, "an integer in range", v);
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    auto i = v.get<int64_t>();
    if (std::is_unsigned_v<T> ? i < 0 : i < static_cast<int64_t>(std::numeric_limits<T>::min())) {
      Bad(where, "an integer in range", v);
    }
    if (!std::is_unsigned_v<T> && i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      Bad(where, "an integer in range", v);
    }
    return static_cast<T>(i);
  }
  Bad(where, "an integer", v);
}

template <class T>
struct Reader {
  static T Read(const nlohmann::json& v, const std::string& where) {
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) Bad(where, "a boolean", v);
      return v.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      return Integer<T>(v, where);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) Bad(where, "a number", v);
      return v.get<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) Bad(where, "a string", v);
      return v.get<std::string>();
    } else {
      static_assert(sizeof(T) == 0, "no stored reader for this type");
    }
  }
};

template <class V>
struct Reader<std::vector<V>> {
  static std::vector<V> Read(const nlohmann::json& v, const std::string& where) {
    if (!v.is_array()) Bad(where, "an array", v);
    std::vector<V> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) out.push_back(Reader<V>::Read(v[i], where + "[" + std::to_string(i) + "]"));
    return out;
  }
};

template <class V>
struct Reader<std::map<std::string, V>> {
  static std::map<std::string, V> Read(const nlohmann::json& v, const std::string& where) {
    if (!v.is_object()) Bad(where, "an object", v);
    std::map<std::string, V> out;
    for (const auto& [k, x] : v.items()) out.emplace(k, Reader<V>::Read(x, where + "." + k));
    return out;
  }
};

}  // namespace stored_detail

// Field `key` of the object `j` as T; `fallback` when absent (a record of an
// older build may lack it). Throws StoredFieldError otherwise.
template <class T>
T Stored(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  return stored_detail::Reader<T>::Read(*it, key);
}
// The same for a field that may be null (std::nullopt when null or absent).
template <class T>
std::optional<T> StoredOptional(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return stored_detail::Reader<T>::Read(*it, key);
}
// Field `key` as T; absent is an error too.
template <class T>
T StoredRequired(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) throw StoredFieldError(std::string(key) + ": missing");
  return stored_detail::Reader<T>::Read(*it, key);
}

// The latest time a stored record may hold, in unix ms (year 30000): a
// stored time is what a clock said, never past what a sum with a duration
// (at most a year) or a difference of two could overflow.
inline constexpr int64_t kLatestStoredMs = 884541340800000;
// Throws StoredFieldError naming `what` unless each time given is between 1970 and kLatestStoredMs.
inline void CheckStoredTimes(const char* what, std::initializer_list<std::optional<int64_t>> times) {
  for (const auto& t : times) {
    if (t && (*t < 0 || *t > kLatestStoredMs)) {
      throw StoredFieldError(std::string(what) + ": a time before 1970 or after year 30000");
    }
  }
}

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_STORED_JSON_H_
