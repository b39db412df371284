#include "core/mounts.h"

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

TEST(MountsTest, ParsesEachTypeWithAliases) {
  auto mounts = ParseMounts({"type=bind", "src=/host", "dst=/container", "readonly",
                             "type=volume", "source=myvol", "target=/data",
                             "type=device", "src=/dev/fuse", "type=device", "src=/dev/x",
                             "destination=/dev/y", "perm=rw", "type=bind", "src=~/code",
                             "dst=/code", "read_only=whatever"},
                            "/home/u");
  ASSERT_TRUE(mounts.has_value()) << mounts.error().message;
  ASSERT_EQ(mounts->size(), 5u);
  EXPECT_EQ(std::get<BindMount>((*mounts)[0]), (BindMount{"/host", "/container", true}));
  EXPECT_EQ(std::get<VolumeMount>((*mounts)[1]), (VolumeMount{"myvol", "/data", false}));
  EXPECT_EQ(std::get<DeviceMount>((*mounts)[2]), (DeviceMount{"/dev/fuse", "/dev/fuse", "rwm"}));
  EXPECT_EQ(std::get<DeviceMount>((*mounts)[3]), (DeviceMount{"/dev/x", "/dev/y", "rw"}));
  EXPECT_EQ(std::get<BindMount>((*mounts)[4]), (BindMount{"/home/u/code", "/code", true}));
}

TEST(MountsTest, ParsesAMountString) {
  auto mounts = ParseMountString("type=bind, src=/a, dst=/b", "/h");
  ASSERT_TRUE(mounts.has_value());
  EXPECT_EQ(std::get<BindMount>((*mounts)[0]), (BindMount{"/a", "/b", false}));
}

TEST(MountsTest, RejectsTorchxErrorCases) {
  struct Case {
    const char* name;
    std::vector<std::string> tokens;
    const char* message;
  };
  const Case cases[] = {
      {"type not first", {"src=/a", "type=bind"}, "type must be specified first"},
      {"unknown key",
       {"type=bind", "blah=1"},
       "unknown mount option blah, must be one of ['type', 'destination', 'dst', 'target', "
       "'read_only', 'readonly', 'source', 'src', 'perm']"},
      {"bad type", {"type=foo", "src=/a"},
       "invalid mount type 'foo', must be one of ['bind', 'volume', 'device']"},
      {"missing src", {"type=bind", "dst=/b"}, "mount type=bind is missing required option 'src'"},
      {"missing dst", {"type=volume", "src=v"}, "mount type=volume is missing required option 'dst'"},
      {"bad perm", {"type=device", "src=/dev/x", "perm=rwx"},
       "x is not a valid permission flags must one of r,w,m"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto mounts = ParseMounts(c.tokens, "/h");
    ASSERT_FALSE(mounts.has_value());
    EXPECT_EQ(mounts.error().message, c.message);
  }
}

}  // namespace
}  // namespace torchxd::core
