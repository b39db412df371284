#include "core/replica_key.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace torchxd::core {
namespace {

TEST(ReplicaKeyTest, WrittenAndReadAsRoleSlashReplica) {
  EXPECT_EQ((ReplicaKey{"trainer", 3}.String()), "trainer/3");
  EXPECT_EQ(ParseReplicaKey("trainer/3"), (ReplicaKey{"trainer", 3}));
  EXPECT_EQ(ParseReplicaKey("a/b/12"), (ReplicaKey{"a/b", 12}));  // the last '/' ends the role
  for (const char* bad : {"", "trainer", "/3", "trainer/", "trainer/-1", "trainer/x", "trainer/3x",
                          "trainer/99999999999"}) {
    EXPECT_FALSE(ParseReplicaKey(bad)) << bad;
  }
  EXPECT_LT((ReplicaKey{"a", 2}), (ReplicaKey{"a", 10}));  // by role, then by number
  EXPECT_LT((ReplicaKey{"a", 10}), (ReplicaKey{"b", 0}));
}

TEST(ReplicaKeyTest, AnEventsFieldsNameItsReplicaWhateverTheyHold) {
  using nlohmann::json;
  EXPECT_EQ(ReplicaKeyOf(json{{"role", "ps"}, {"replica", 1}}), (ReplicaKey{"ps", 1}));
  EXPECT_EQ(ReplicaKeyOf(json{{"role", 5}, {"replica", "1"}}), (ReplicaKey{"", 0}));
  EXPECT_EQ(ReplicaKeyOf(json{{"role", "ps"}, {"replica", -4}}), (ReplicaKey{"ps", 0}));
  EXPECT_EQ(ReplicaKeyOf(json{{"role", "ps"}, {"replica", 1ull << 40}}), (ReplicaKey{"ps", 0}));
  EXPECT_EQ(ReplicaKeyOf(json::array()), (ReplicaKey{"", 0}));
}

TEST(ReplicaKeyTest, ItsLogDirIsUnderTheAppsByRoleThenReplica) {
  EXPECT_EQ(AppLogDir("/var/log/torchxd/local_cwd", "torchx", "echo-x"), "/var/log/torchxd/local_cwd/torchx/echo-x");
  EXPECT_EQ(ReplicaLogDir("/var/log/torchxd/local_cwd/echo-x", {"echo", 0}), "/var/log/torchxd/local_cwd/echo-x/echo/0");
}

}  // namespace
}  // namespace torchxd::core
