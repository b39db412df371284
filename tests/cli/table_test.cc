// PrintTable: TorchX's layout; on a terminal the widest column gives way,
// cut with "…", and no line is wider than the terminal.
#include "cli/table.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torchxd::cli {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

size_t Width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

const std::vector<std::vector<std::string>> kRows = {
    {"APP HANDLE", "STATE", "REASON"},
    {"local_cwd://torchx/a-rather-long-application-name", "PENDING", "1st in queue default, waiting for 2 GPUs"},
    {"local_cwd://torchx/b", "FAILED", "w/0 failed: exited with code 3"}};

TEST(TableTest, AsWideAsItsCellsWithoutATerminal) {
  std::ostringstream out;
  PrintTable(out, kRows);
  auto lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1].substr(0, 10), "----------");
  EXPECT_THAT(lines[2], ::testing::HasSubstr("a-rather-long-application-name  PENDING  1st in queue default"));
}

TEST(TableTest, TheWidestColumnGivesWayAndNoLineIsWiderThanTheTerminal) {
  for (size_t columns : {100u, 60u, 30u, 12u}) {
    std::ostringstream out;
    PrintTable(out, kRows, columns);
    for (const auto& line : Lines(out.str())) EXPECT_LE(Width(line), columns) << columns << ": " << line;
    if (columns == 60) {
      EXPECT_THAT(out.str(), ::testing::HasSubstr("…")) << out.str();
    }
  }
  // At 100 the state column is whole: the widest ones gave way.
  std::ostringstream out;
  PrintTable(out, kRows, 100);
  EXPECT_THAT(out.str(), ::testing::HasSubstr("PENDING"));
}

}  // namespace
}  // namespace torchxd::cli
