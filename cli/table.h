// A table as TorchX prints one (tabulate's "simple" layout): a header row,
// dashes, then rows, columns two spaces apart, no trailing blanks. Given a
// width (a terminal's), the widest column is cut with "…" until it fits.
//
// Thread contract: a pure function of its arguments.
#ifndef TORCHXD_CLI_TABLE_H_
#define TORCHXD_CLI_TABLE_H_

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace torchxd::cli {

// `max_width` 0: as wide as the cells. The rows are the table's to cut (move them in).
void PrintTable(std::ostream& out, std::vector<std::vector<std::string>> rows, size_t max_width = 0);
// The terminal's width: $COLUMNS, else stdout's when it is a terminal, else 0 (a pipe: never cut).
size_t TerminalColumns(const std::map<std::string, std::string>& env);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_TABLE_H_
