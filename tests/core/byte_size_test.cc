#include "core/byte_size.h"

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

TEST(ByteSizeTest, ParsesSuffixes) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("64K"), 65536u);
  EXPECT_EQ(*ParseByteSize("128M"), 128u << 20);
  EXPECT_EQ(*ParseByteSize("1G"), 1ull << 30);
  EXPECT_FALSE(ParseByteSize("M").has_value());
  EXPECT_FALSE(ParseByteSize("5T").has_value());
}

TEST(ByteSizeTest, RefusesWhatItCannotHoldNamingTheText) {
  auto big = ParseByteSize("99999999999G");
  ASSERT_FALSE(big.has_value());
  EXPECT_NE(big.error().message.find("99999999999G"), std::string::npos);
  EXPECT_FALSE(ParseByteSize("").has_value());
  EXPECT_FALSE(ParseByteSize("-1").has_value());
  EXPECT_FALSE(ParseByteSize("18446744073709551616").has_value());
}

}  // namespace
TEST(ByteSizeTest, FormatsSizesSoThatOnePastALimitNeverReadsAsIt) {
  EXPECT_EQ(FormatByteSize(0), "0 B");
  EXPECT_EQ(FormatByteSize(1023), "1023 B");
  EXPECT_EQ(FormatByteSize(64 * 1024), "64 KiB");
  EXPECT_EQ(FormatByteSize(64 * 1024 + 1), "65 KiB");
  EXPECT_EQ(FormatByteSize((1 << 20) + 1), "1.1 MiB");
  EXPECT_EQ(FormatByteSize(3 << 19), "1.5 MiB");
  EXPECT_EQ(FormatByteSize(256ull << 20), "256 MiB");
  EXPECT_EQ(FormatByteSize((10ull << 30) - 1), "10 GiB");
}

}  // namespace torchxd::core
