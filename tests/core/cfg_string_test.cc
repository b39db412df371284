#include "core/cfg_string.h"

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

TEST(CfgStringTest, SplitsLikeTorchxToDict) {
  struct Case {
    const char* in;
    KeyValues want;
  };
  const Case cases[] = {
      {"", {}},
      {"FOO=v1", {{"FOO", "v1"}}},
      {"FOO=''", {{"FOO", ""}}},
      {"FOO=\"\"", {{"FOO", ""}}},
      {"FOO=v1,v2", {{"FOO", "v1,v2"}}},
      {"FOO=v1;v2", {{"FOO", "v1;v2"}}},
      {"FOO=v1,v2,BAR=v3", {{"FOO", "v1,v2"}, {"BAR", "v3"}}},
      {"FOO=v1;v2,BAR=v3", {{"FOO", "v1;v2"}, {"BAR", "v3"}}},
      {"FOO=v1;v2;BAR=v3", {{"FOO", "v1;v2"}, {"BAR", "v3"}}},
      {"FOO=\"value with = and , and ;\"", {{"FOO", "value with = and , and ;"}}},
      {"A='x=1,y=2',B=3", {{"A", "x=1,y=2"}, {"B", "3"}}},
      {" queue = default , namespace = ns ", {{"queue", "default"}, {"namespace", "ns"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in);
    auto got = ParseKeyValues(c.in);
    ASSERT_TRUE(got.has_value()) << got.error().message;
    EXPECT_EQ(*got, c.want);
  }
}

TEST(CfgStringTest, RejectsMalformedStrings) {
  struct Case {
    const char* in;
    const char* message;
  };
  const Case cases[] = {
      {"FOO", "`FOO` does not have at least one `key=value` pair"},
      {"=", "`=` does not have at least one `key=value` pair"},
      {"FOO=v1BAR=v2", "`v1BAR` cannot be split into `val<delim>key` with delims=[',', ';'] "
                       "(in `FOO=v1BAR=v2`)"},
      {"FOO=v1,=v2", "`v1,` cannot be split into `val<delim>key` with delims=[',', ';'] "
                     "(in `FOO=v1,=v2`)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in);
    auto got = ParseKeyValues(c.in);
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error().message, c.message);
  }
}

TEST(CfgStringTest, ParseListStripsItems) {
  EXPECT_EQ(ParseList(""), std::vector<std::string>{});
  EXPECT_EQ(ParseList(" a, b ,c"), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace torchxd::core
