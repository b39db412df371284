#include "core/app_handle.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace torchxd::core
