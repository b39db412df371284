#include "core/user_db.h"

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

TEST(UserDbTest, RootIsKnownWithItsGroupFirst) {
  auto root = LookUpUser(0);
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->name, "root");
  EXPECT_EQ(UserName(0), "root");
  EXPECT_EQ(root->gid, 0u);
  auto groups = GroupsOf(*root);
  ASSERT_FALSE(groups.empty());
  EXPECT_EQ(groups.front(), 0u) << "the primary group comes first";
  EXPECT_EQ(PrimaryGidOf(0, 12345), 0u);
}

TEST(UserDbTest, AUidWithoutAnEntryHasNoneAndTheFallbackGroup) {
  uid_t nobody_known = 4000000123u;  // no passwd database names it
  EXPECT_FALSE(LookUpUser(nobody_known).has_value());
  EXPECT_EQ(PrimaryGidOf(nobody_known, 77), 77u);
  EXPECT_EQ(UserName(nobody_known), "4000000123") << "its digits, as ls -l shows it";
}

}  // namespace
}  // namespace torchxd::core
