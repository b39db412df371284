#include "core/names.h"

#include <filesystem>
#include <vector>

#include "core/json_reader.h"

namespace torchxd::core {

Result<void> ValidateName(std::string_view path, std::string_view name) {
  auto invalid = [&](const std::string& rule) {
    return Fail(Error::InvalidArgument(std::string(path) + ": " + rule + ", got " +
                                       nlohmann::json(std::string(name)).dump(-1, ' ', false,
                                                                              nlohmann::json::error_handler_t::replace)));
  };
  if (name.empty()) return Fail(Error::InvalidArgument(std::string(path) + ": must be a non-empty string"));
  if (name.size() > kMaxNameBytes) {
    return Fail(Error::InvalidArgument(std::string(path) + ": must be at most " + std::to_string(kMaxNameBytes) +
                                       " bytes, got " + std::to_string(name.size())));
  }
  if (name == "." || name == "..") return invalid("must not be \".\" or \"..\"");
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (c == '/') return invalid("must not contain '/'");
    if (u < 0x20 || u == 0x7f) return invalid("must not contain control characters");
  }
  auto space = [](char c) { return c == ' ' || c == '\t'; };
  if (space(name.front()) || space(name.back())) return invalid("must not start or end with whitespace");
  return {};
}

Result<void> RefuseNul(const nlohmann::json& value, const std::string& path) {
  // Iterative: the value may be as deep as the protocol allows.
  std::vector<std::pair<const nlohmann::json*, std::string>> todo{{&value, path}};
  auto has_nul = [](const std::string& s) { return s.find('\0') != std::string::npos; };
  auto fail = [](const std::string& at) {
    return Fail(Error::InvalidArgument((at.empty() ? std::string("(document)") : at) +
                                       ": must not contain a NUL character (\\u0000)"));
  };
  while (!todo.empty()) {
    auto [node, at] = std::move(todo.back());
    todo.pop_back();
    if (node->is_string()) {
      if (has_nul(node->get_ref<const std::string&>())) return fail(at);
    } else if (node->is_object()) {
      for (auto it = node->begin(); it != node->end(); ++it) {
        if (has_nul(it.key())) {
          std::string shown;
          for (char c : it.key()) shown += c == '\0' ? std::string("\\u0000") : std::string(1, c);
          return fail(JsonPathKey(at, shown));
        }
        todo.emplace_back(&it.value(), JsonPathKey(at, it.key()));
      }
    } else if (node->is_array()) {
      for (size_t i = 0; i < node->size(); ++i) todo.emplace_back(&(*node)[i], JsonPathIndex(at, i));
    }
  }
  return {};
}

bool PathIsUnder(const std::string& root, const std::string& path) {
  namespace fs = std::filesystem;
  fs::path r = fs::path(root).lexically_normal();
  fs::path p = fs::path(path).lexically_normal();
  if (!r.is_absolute() || !p.is_absolute()) return false;
  fs::path rel = p.lexically_relative(r);
  if (rel.empty()) return false;
  for (const auto& part : rel) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace torchxd::core
