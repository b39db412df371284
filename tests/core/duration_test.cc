#include "core/duration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

using ::testing::HasSubstr;

TEST(DurationTest, ReadsUnitsFromDaysToSeconds) {
  struct Case {
    const char* text;
    int64_t ms;
  };
  for (const Case& c : {Case{"90s", 90000}, Case{"30m", 1800000}, Case{"2h", 7200000}, Case{"1d", 86400000},
                        Case{"1h30m", 5400000}, Case{"1d2h3m4s", 93784000}, Case{"365d", 365 * 86400000LL}}) {
    SCOPED_TRACE(c.text);
    auto ms = ParseDurationMs(c.text);
    ASSERT_TRUE(ms.has_value()) << ms.error().message;
    EXPECT_EQ(*ms, c.ms);
  }
}

TEST(DurationTest, RefusesWhatIsNotADurationSayingWhy) {
  struct Case {
    const char* text;
    const char* why;
  };
  for (const Case& c : {Case{"", "it is empty"}, Case{"90", "the number 90 has no unit"},
                        Case{"1x", "unknown unit `x`"}, Case{"2m1h", "from days to seconds, each once"},
                        Case{"1h1h", "from days to seconds, each once"}, Case{"h", "a number must come before"},
                        Case{"0s", "longer than 0"}, Case{"366d", "longer than 365 days"},
                        Case{"-5s", "a number must come before"}, Case{"1234567890s", "too long"},
                        Case{"1h 30m", "a number must come before"}}) {
    SCOPED_TRACE(c.text);
    auto ms = ParseDurationMs(c.text);
    ASSERT_FALSE(ms.has_value());
    EXPECT_THAT(ms.error().message, HasSubstr(c.why));
    EXPECT_THAT(ms.error().message, HasSubstr("write it as 90s, 30m, 2h, 1d or 1h30m"));
  }
}

TEST(DurationTest, FormatsTheShortestExactForm) {
  EXPECT_EQ(FormatDurationMs(5400000), "1h30m");
  EXPECT_EQ(FormatDurationMs(90000), "1m30s");
  EXPECT_EQ(FormatDurationMs(86400000 + 1000), "1d1s");
  EXPECT_EQ(FormatDurationMs(1999), "1s");
  EXPECT_EQ(FormatDurationMs(500), "0.5s");
  EXPECT_EQ(FormatDurationMs(0), "0s");
}

}  // namespace
}  // namespace torchxd::core
