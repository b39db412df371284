#include "core/text.h"

#include <algorithm>
#include <cctype>

namespace torchxd::core {
namespace {

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

bool IsShellSafe(char c) {
  auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) != 0 || c == '_' || c == '@' || c == '%' || c == '+' || c == '=' ||
         c == ':' || c == ',' || c == '.' || c == '/' || c == '-';
}

// Longest common subsequence length: the matching-characters count of the
// similarity ratio 2*M/T that difflib reports.
size_t CommonLength(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
  for (char ca : a) {
    for (size_t j = 0; j < b.size(); ++j) {
      cur[j + 1] = ca == b[j] ? prev[j] + 1 : std::max(prev[j + 1], cur[j]);
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && IsSpace(s[b])) ++b;
  while (e > b && IsSpace(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string UrlEscape(std::string_view s, std::string_view keep) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    bool plain = std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~';
    if (plain || keep.find(static_cast<char>(c)) != std::string_view::npos) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string ToUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string ShellQuote(std::string_view s) {
  if (s.empty()) return "''";
  if (std::all_of(s.begin(), s.end(), IsShellSafe)) return std::string(s);
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\"'\"'";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::string CamelToSnake(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (i > 0 && std::isupper(c) != 0) {
      auto p = static_cast<unsigned char>(name[i - 1]);
      if (std::islower(p) != 0 || std::isdigit(p) != 0) out += '_';
    }
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  double best = 0.6;
  std::optional<std::string> match;
  for (const auto& c : candidates) {
    size_t total = word.size() + c.size();
    if (total == 0) continue;
    double ratio = 2.0 * static_cast<double>(CommonLength(word, c)) / static_cast<double>(total);
    if (ratio >= best) {
      if (!match || ratio > best) match = c;
      best = ratio;
    }
  }
  return match;
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  auto match = ClosestMatch(word, candidates);
  return match ? " Did you mean `" + *match + "`?" : "";
}

std::string PyRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == '\\' || c == quote) out += '\\';
    out += c;
  }
  out += quote;
  return out;
}

}  // namespace torchxd::core
