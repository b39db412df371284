#include "cli/table.h"

#include <algorithm>

namespace torchxd::cli {

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string text;
  auto line = [&](const std::vector<std::string>& r) {
    size_t start = text.size();
    for (size_t i = 0; i < r.size(); ++i) {
      text += r[i];
      if (i + 1 < r.size()) text.append(width[i] - r[i].size() + 2, ' ');
    }
    while (text.size() > start && text.back() == ' ') text.pop_back();
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
