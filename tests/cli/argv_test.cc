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
      {"list takes it too", {"list", "-s", "kubernetes", "-cfg", "namespace=a"},
       {"list", "-s", "kubernetes", "--scheduler_args", "namespace=a"}},
      {"list with equals", {"list", "-cfg=namespace=a"}, {"list", "--scheduler_args=namespace=a"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(NormalizeArgs(c.in), c.want);
  }
}

TEST(ArgvTest, TakesWhatFollowsADoubleDashAmongRunsOptions) {
  std::vector<std::string> args = {"run", "-s", "local_cwd", "--", "utils.sh", "--", "sh", "-c", "x"};
  EXPECT_EQ(TakeRunRemainder(args), (std::vector<std::string>{"utils.sh", "--", "sh", "-c", "x"}));
  EXPECT_EQ(args, (std::vector<std::string>{"run", "-s", "local_cwd"}));
  // A `--` after COMPONENT is the component's: untouched.
  std::vector<std::string> component = {"run", "utils.sh", "--", "sh"};
  EXPECT_TRUE(TakeRunRemainder(component).empty());
  EXPECT_EQ(component.size(), 4u);
  // The value of an option is not COMPONENT: `--workspace ""` then `--`.
  std::vector<std::string> empty_value = {"run", "--workspace", "", "--", "--msg", "x"};
  EXPECT_EQ(TakeRunRemainder(empty_value), (std::vector<std::string>{"--msg", "x"}));
}

}  // namespace
}  // namespace torchxd::cli
