// A table as TorchX prints one (tabulate's "simple" layout): a header row,
// dashes, then rows, columns two spaces apart, no trailing blanks.
//
// Thread contract: a pure function of its arguments.
#ifndef TORCHXD_CLI_TABLE_H_
#define TORCHXD_CLI_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

namespace torchxd::cli {

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_TABLE_H_
