#include "core/json_parse.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace torchxd::core {

Result<void> CheckJsonDepth(std::string_view text, size_t max_depth) {
  return CheckJsonShape(text, max_depth, SIZE_MAX);
}

Result<void> CheckJsonShape(std::string_view text, size_t max_depth, size_t max_values) {
  size_t depth = 0;
  size_t values = 1;  // each ',' and each non-empty '[' or '{' starts one more
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{' || c == ',') {
      if (c != ',' && ++depth > max_depth) {
        return Fail(Error::InvalidArgument("JSON nested deeper than " + std::to_string(max_depth) +
                                           " levels (at byte " + std::to_string(i) + ")"));
      }
      if (++values > max_values) {
        return Fail(Error::InvalidArgument("JSON of more than " + std::to_string(max_values) +
                                           " values (at byte " + std::to_string(i) + ")"));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {};
}

size_t JsonDepth(const nlohmann::json& value) {
  // Iterative, so it is safe on any value.
  size_t deepest = 0;
  std::vector<std::pair<const nlohmann::json*, size_t>> todo{{&value, 0}};
  while (!todo.empty()) {
    auto [node, depth] = todo.back();
    todo.pop_back();
    if (!node->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const auto& child : *node) todo.emplace_back(&child, depth + 1);
  }
  return deepest;
}

Result<nlohmann::json> ParseJson(std::string_view text, size_t max_depth) {
  if (auto ok = CheckJsonDepth(text, max_depth); !ok) return Fail(ok.error());
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Fail(Error::InvalidArgument(std::string("not valid JSON: ") + e.what()));
  }
}

nlohmann::json ParseJsonOrDiscarded(std::string_view text, size_t max_depth) {
  if (!CheckJsonDepth(text, max_depth)) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

namespace {

bool Plain(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
}

}  // namespace

void AppendJsonString(std::string& out, std::initializer_list<std::string_view> parts) {
  if (!std::all_of(parts.begin(), parts.end(), Plain)) {
    std::string whole;
    for (std::string_view p : parts) whole += p;
    return AppendJsonString(out, whole);
  }
  out += '"';
  for (std::string_view p : parts) out += p;
  out += '"';
}

void AppendJsonString(std::string& out, std::string_view s) {
  if (!Plain(s)) {
    out += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

std::string DumpLikePython(const nlohmann::json& value) {
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out += ", ";
      first = false;
      out += nlohmann::json(key).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) + ": " + DumpLikePython(item);
    }
    return out + "}";
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + DumpLikePython(value[i]);
    return out + "]";
  }
  return value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

}  // namespace torchxd::core
