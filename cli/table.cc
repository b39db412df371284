#include "cli/table.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace torchxd::cli {
namespace {

// Columns on a terminal: one per UTF-8 code point (the tables hold no wide characters).
size_t DisplayWidth(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// The first `n` code points of `s`, with "…" for what was cut.
std::string Cut(const std::string& s, size_t n) {
  if (DisplayWidth(s) <= n) return s;
  std::string out;
  size_t points = 0;
  for (char c : s) {
    bool starts = (c & 0xC0) != 0x80;
    if (starts && ++points > n - 1) break;
    out += c;
  }
  return out + "\u2026";
}

constexpr size_t kGap = 2;
constexpr size_t kNarrowest = 8;  // a column is cut below this only when all are this narrow
constexpr size_t kTightest = 3;   // "ab…"

}  // namespace

size_t TerminalColumns(const std::map<std::string, std::string>& env) {
  if (auto it = env.find("COLUMNS"); it != env.end()) {
    char* end = nullptr;
    long n = std::strtol(it->second.c_str(), &end, 10);
    if (!it->second.empty() && *end == '\0' && n > 0 && n < 100000) return static_cast<size_t>(n);
  }
  struct winsize ws {};
  if (::isatty(STDOUT_FILENO) == 1 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 0;
}

void PrintTable(std::ostream& out, std::vector<std::vector<std::string>> rows, size_t max_width) {
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], DisplayWidth(r[i]));
  }
  // Too wide for the terminal: the widest column gives way first, down to kNarrowest.
  if (max_width > 0) {
    auto total = [&] {
      size_t t = 0;
      for (size_t w : width) t += w;
      return t + kGap * (width.empty() ? 0 : width.size() - 1);
    };
    // Down to kNarrowest each; on a very narrow terminal, further (lines are cut last).
    for (size_t floor : {kNarrowest, kTightest}) {
      while (total() > max_width) {
        size_t widest = static_cast<size_t>(std::max_element(width.begin(), width.end()) - width.begin());
        if (width[widest] <= floor) break;
        width[widest] -= 1;  // a column at a time: the widest ones end up level
      }
    }
    for (auto& r : rows) {
      for (size_t i = 0; i < r.size(); ++i) r[i] = Cut(r[i], width[i]);
    }
  }
  std::string text;
  auto line = [&](const std::vector<std::string>& r) {
    size_t start = text.size();
    for (size_t i = 0; i < r.size(); ++i) {
      text += r[i];
      if (i + 1 < r.size()) text.append(width[i] - DisplayWidth(r[i]) + kGap, ' ');
    }
    while (text.size() > start && text.back() == ' ') text.pop_back();
    // What still does not fit the terminal is cut: a line never wraps.
    if (max_width > 0) {
      std::string_view this_line = std::string_view(text).substr(start);
      if (DisplayWidth(this_line) > max_width) {
        std::string cut = Cut(std::string(this_line), max_width);
        text.resize(start);
        text += cut;
      }
    }
    text += '\n';
  };
  line(rows[0]);
  std::vector<std::string> dashes;
  for (size_t w : width) dashes.push_back(std::string(w, '-'));
  line(dashes);
  for (size_t i = 1; i < rows.size(); ++i) line(rows[i]);
  out << text;
}

}  // namespace torchxd::cli
