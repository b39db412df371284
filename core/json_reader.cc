#include "core/json_reader.h"

#include <algorithm>
#include <limits>

#include "core/text.h"

namespace torchxd::core {

std::string JsonPathIndex(std::string_view path, size_t index) {
  return std::string(path) + "[" + std::to_string(index) + "]";
}

std::string JsonPathKey(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return std::string(path) + "." + std::string(key);
}

std::string JsonTypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return "number";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::object:
      return "object";
    default:
      return "null";
  }
}

JsonReader::JsonReader(const nlohmann::json& node, std::string path,
                       std::vector<std::string_view> known_keys)
    : node_(node), path_(std::move(path)), known_keys_(std::move(known_keys)) {
  if (!node_.is_object()) {
    SetError(path_.empty() ? "(document)" : path_,
             "must be an object, got " + JsonTypeName(node_));
  }
}

void JsonReader::SetError(std::string_view path, std::string_view rule) {
  if (!error_) error_ = Error::InvalidArgument(std::string(path) + ": " + std::string(rule));
}

bool JsonReader::Has(std::string_view key) const {
  return node_.is_object() && node_.contains(key);
}

const nlohmann::json* JsonReader::Field(std::string_view key) {
  if (!ok() || !node_.is_object()) return nullptr;
  auto it = node_.find(key);
  if (it == node_.end()) return nullptr;
  read_.push_back(&it.key());
  return &it.value();
}

Result<int64_t> IntInRange(const nlohmann::json& value, std::string_view path, int64_t lo, int64_t hi) {
  auto range = [&] { return "an integer between " + std::to_string(lo) + " and " + std::to_string(hi); };
  if (!value.is_number_integer()) {
    return Fail(Error::InvalidArgument(std::string(path) + ": must be an integer, got " +
                                       (value.is_number() ? value.dump() : JsonTypeName(value))));
  }
  bool too_big = value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  int64_t v = too_big ? INT64_MAX : value.get<int64_t>();
  if (too_big || v < lo || v > hi) {
    return Fail(Error::InvalidArgument(std::string(path) + ": must be " + range() + ", got " + value.dump()));
  }
  return v;
}

template <typename PathFn>
std::optional<int> JsonReader::ToInt(const nlohmann::json& value, PathFn path) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned()) {
      if (auto u = value.get<uint64_t>(); u <= static_cast<uint64_t>(std::numeric_limits<int>::max())) {
        return static_cast<int>(u);
      }
    } else if (auto i = value.get<int64_t>();
               i >= std::numeric_limits<int>::min() && i <= std::numeric_limits<int>::max()) {
      return static_cast<int>(i);
    }
  }
  auto v = IntInRange(value, path(), std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  if (!v) {
    if (!error_) error_ = v.error();
    return std::nullopt;
  }
  return static_cast<int>(*v);
}

std::string JsonReader::String(std::string_view key, std::string_view fallback) {
  auto v = OptionalString(key);
  return v ? *v : std::string(fallback);
}

std::optional<std::string> JsonReader::OptionalString(std::string_view key) {
  const auto* v = Field(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) {
    SetError(PathOf(key), "must be a string, got " + JsonTypeName(*v));
    return std::nullopt;
  }
  return v->get<std::string>();
}

int JsonReader::Int(std::string_view key, int fallback) {
  auto v = OptionalInt(key);
  return v ? *v : fallback;
}

std::optional<int> JsonReader::OptionalInt(std::string_view key) {
  const auto* v = Field(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return ToInt(*v, [&] { return PathOf(key); });
}

std::optional<int64_t> JsonReader::OptionalInt(std::string_view key, int64_t lo, int64_t hi) {
  const auto* v = Field(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  auto n = IntInRange(*v, PathOf(key), lo, hi);
  if (!n) {
    if (!error_) error_ = n.error();
    return std::nullopt;
  }
  return *n;
}

bool JsonReader::Bool(std::string_view key, bool fallback) {
  const auto* v = Field(key);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_boolean()) {
    SetError(PathOf(key), "must be true or false, got " + JsonTypeName(*v));
    return fallback;
  }
  return v->get<bool>();
}

std::vector<std::string> JsonReader::StringList(std::string_view key) {
  std::vector<std::string> out;
  const auto* v = Field(key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_array()) {
    SetError(PathOf(key), "must be an array of strings, got " + JsonTypeName(*v));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const auto& item = (*v)[i];
    if (!item.is_string()) {
      SetError(JsonPathIndex(PathOf(key), i), "must be a string, got " + JsonTypeName(item));
      return {};
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> JsonReader::StringMap(std::string_view key) {
  std::map<std::string, std::string> out;
  const auto* v = Field(key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_object()) {
    SetError(PathOf(key), "must be an object of strings, got " + JsonTypeName(*v));
    return out;
  }
  for (const auto& [k, item] : v->items()) {
    if (!item.is_string()) {
      SetError(JsonPathKey(PathOf(key), k), "must be a string, got " + JsonTypeName(item));
      return {};
    }
    out[k] = item.get<std::string>();
  }
  return out;
}

std::map<std::string, int> JsonReader::IntMap(std::string_view key) {
  std::map<std::string, int> out;
  const auto* v = Field(key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_object()) {
    SetError(PathOf(key), "must be an object of integers, got " + JsonTypeName(*v));
    return out;
  }
  for (const auto& [k, item] : v->items()) {
    auto n = ToInt(item, [&, &k = k] { return JsonPathKey(PathOf(key), k); });
    if (!n) return {};
    out[k] = *n;
  }
  return out;
}

nlohmann::json JsonReader::Object(std::string_view key) {
  const auto* v = Field(key);
  if (v == nullptr || v->is_null()) return nlohmann::json::object();
  if (!v->is_object()) {
    SetError(PathOf(key), "must be an object, got " + JsonTypeName(*v));
    return nlohmann::json::object();
  }
  return *v;
}

Result<void> JsonReader::Finish() {
  if (ok() && node_.is_object()) {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string& key = it.key();
      if (std::find(read_.begin(), read_.end(), &key) != read_.end()) continue;
      if (std::find(known_keys_.begin(), known_keys_.end(), key) != known_keys_.end()) continue;
      SetError(PathOf(key), "unknown field." +
                                DidYouMean(key, std::vector<std::string>(known_keys_.begin(), known_keys_.end())));
      break;
    }
  }
  if (error_) return Fail(*error_);
  return {};
}

}  // namespace torchxd::core
