#include "core/ids.h"

#include <set>

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

TEST(IdsTest, IdFromUint64UsesTorchxAlphabetAndBases) {
  // 0 in base 20 -> 'b'; then base 29 digits.
  EXPECT_EQ(IdFromUint64(1), "c");
  EXPECT_EQ(IdFromUint64(20), "bc");        // 20 = 0 + 20*1 -> 'b', then END[1] = 'c'
  EXPECT_EQ(IdFromUint64(19 + 20 * 28), "z9");  // last start char, last end char ('9', no '8')
  EXPECT_EQ(IdFromUint64(0), "");
}

TEST(IdsTest, RandomIdsStartWithALetterAndUseTheAlphabet) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    std::string id = RandomId();
    ASSERT_FALSE(id.empty());
    EXPECT_NE(kIdStartChars.find(id[0]), std::string_view::npos) << id;
    for (char c : id) EXPECT_NE(kIdEndChars.find(c), std::string_view::npos) << id;
    EXPECT_EQ(id.find('8'), std::string::npos);
    EXPECT_LE(id.size(), 14u);
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 200u);
}

TEST(IdsTest, MakeUniqueAppendsADashAndId) {
  std::string id = MakeUnique("echo");
  ASSERT_GT(id.size(), 5u);
  EXPECT_EQ(id.substr(0, 5), "echo-");
}

TEST(IdsTest, NormalizeStrMatchesTorchx) {
  EXPECT_EQ(NormalizeStr("My_Train.App-l7209zchwtrzgd"), "mytrainapp-l7209zchwtrzgd");
  EXPECT_EQ(NormalizeStr("--Foo-Bar"), "foo-bar");
  EXPECT_EQ(NormalizeStr("_-a"), "a");
  EXPECT_EQ(NormalizeStr("trainer_foo-0"), "trainerfoo-0");
  EXPECT_EQ(NormalizeStr(""), "");
}

}  // namespace
}  // namespace torchxd::core
