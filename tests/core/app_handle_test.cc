#include "core/app_handle.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace torchxd::core {
namespace {

TEST(AppHandleTest, ParsesValidHandles) {
  struct Case {
    const char* handle;
    AppHandle want;
  };
  const Case cases[] = {
      {"local_cwd://torchx/echo-bcdf12gh34jk5", {"local_cwd", "torchx", "echo-bcdf12gh34jk5"}},
      {"k8s://default/foo_bar", {"k8s", "default", "foo_bar"}},
      {"k8s:///foo_bar", {"k8s", "", "foo_bar"}},  // empty session is valid
      {"kubernetes://torchx/default:echo-rd9d4", {"kubernetes", "torchx", "default:echo-rd9d4"}},
      // Greedy: the app id is after the LAST '/', the session keeps the rest.
      {"local://a/b/c", {"local", "a/b", "c"}},
      {"a://b/c://d", {"a", "b/c:/", "d"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.handle);
    auto parsed = ParseAppHandle(c.handle);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
    EXPECT_EQ(*parsed, c.want);
  }
}

TEST(AppHandleTest, RejectsTorchxMalformedCases) {
  for (const char* bad : {"my_session/my_app", "local://my_session/", "local://my_app", "",
                          "://session/app", "local:///", "local://s/a\nb"}) {
    SCOPED_TRACE(bad);
    auto parsed = ParseAppHandle(bad);
    ASSERT_FALSE(parsed.has_value());
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(parsed.error().message,
              std::string(bad) +
                  " is not of the form: <scheduler_backend>://<session_name>/<app_id>");
  }
}

TEST(AppHandleTest, FormatRoundTrips) {
  AppHandle h{"local_cwd", "torchx", "echo-x7"};
  EXPECT_EQ(h.ToString(), "local_cwd://torchx/echo-x7");
  EXPECT_EQ(*ParseAppHandle(h.ToString()), h);
}

int Sign(int x) { return (x > 0) - (x < 0); }

TEST(AppHandleTest, HandlesCompareFromTheirPartsAsTheBuiltStringsDo) {
  // Short names from a small alphabet with ':' and '/', so prefixes and
  // separators meet in every way.
  std::mt19937 rng(7);
  auto name = [&] {
    static const char kChars[] = "ab:/-";
    std::string s(rng() % 4, 'a');
    for (char& c : s) c = kChars[rng() % 5];
    return s;
  };
  for (int i = 0; i < 20000; ++i) {
    std::string s1 = name(), e1 = name(), a1 = name(), s2 = name(), e2 = name(), a2 = name();
    std::string h1 = MakeAppHandle(s1, e1, a1), h2 = MakeAppHandle(s2, e2, a2);
    int want = Sign(h1.compare(h2));
    SCOPED_TRACE(h1 + " vs " + h2);
    ASSERT_EQ(Sign(CompareAppHandles(AppHandleParts(s1, e1, a1), AppHandleParts(s2, e2, a2))), want);
    ASSERT_EQ(Sign(CompareAppHandles(AppHandleParts(s1, e1, a1), AppHandleParts(h2))), want);
    ASSERT_EQ(Sign(CompareAppHandles(AppHandleParts(h1), AppHandleParts(s2, e2, a2))), want);
  }
}

}  // namespace
}  // namespace torchxd::core
