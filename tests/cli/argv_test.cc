#include "cli/argv.h"

#include <gtest/gtest.h>

namespace torchxd::cli {
namespace {

TEST(ArgvTest, MapsCfgBeforeTheComponentOnly) {
  struct Case {
    const char* name;
    std::vector<std::string> in;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {"cfg with value", {"run", "-cfg", "a=1", "utils.echo"},
       {"run", "--scheduler_args", "a=1", "utils.echo"}},
      {"cfg with equals", {"run", "-cfg=a=1", "utils.echo"},
       {"run", "--scheduler_args=a=1", "utils.echo"}},
      {"after scheduler", {"run", "-s", "local_dir", "-cfg", "a=1", "x"},
       {"run", "-s", "local_dir", "--scheduler_args", "a=1", "x"}},
      {"component args untouched", {"run", "utils.sh", "-cfg", "x"},
       {"run", "utils.sh", "-cfg", "x"}},
      {"flags then component", {"run", "--dryrun", "-cfg", "a=1", "utils.sh", "-cfg"},
       {"run", "--dryrun", "--scheduler_args", "a=1", "utils.sh", "-cfg"}},
      {"other commands untouched", {"builtins", "-cfg"}, {"builtins", "-cfg"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(NormalizeArgs(c.in), c.want);
  }
}

}  // namespace
}  // namespace torchxd::cli
