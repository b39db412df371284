#include "core/local_ports.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

std::vector<ReplicaRequest> Requests(const std::string& arg) {
  ReplicaRequest r;
  r.role = "train";
  r.args = {"-c", arg};
  return {r, r};
}

AppDef Ddp() {
  Role role;
  role.name = "train";
  role.port_map = {{"c10d", 29500}};
  return AppDef{"train", {role}, {}};
}

TEST(LocalPortsTest, OnlyNamedPortsUsedAsEndpointsAreMoved) {
  auto requests = Requests("torchrun --rdzv_endpoint ${TORCHX_RANK0_HOST:=localhost}:29500 --steps 29500 x.py");
  EXPECT_THAT(EndpointPorts(Ddp(), requests), ElementsAre(Pair(29500, "c10d")));
  RemapEndpointPorts(requests, {{29500, 29501}});
  EXPECT_EQ(requests[1].args[1], "torchrun --rdzv_endpoint ${TORCHX_RANK0_HOST:=localhost}:29501 --steps 29500 x.py");
  // A single node asks torchelastic for a free port (:0): nothing to move.
  EXPECT_TRUE(EndpointPorts(Ddp(), Requests("torchrun --rdzv_endpoint localhost:0 x.py")).empty());
  EXPECT_TRUE(EndpointPorts(Ddp(), Requests("connect host:295001")).empty());
}

TEST(LocalPortsTest, TheFirstFreePortFromTheDeclaredOneWhichALoneAppKeeps) {
  auto all_free = [](int) { return true; };
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {}, all_free), ElementsAre(Pair(29500, 29500)));
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {29500, 29501}, all_free), ElementsAre(Pair(29500, 29502)));
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {}, [](int p) { return p > 29503; }), ElementsAre(Pair(29500, 29504)));
  // Two named ports of one app never get the same one.
  EXPECT_THAT(ChoosePorts({{29500, "a"}, {29501, "b"}}, {29501}, all_free),
              ElementsAre(Pair(29500, 29500), Pair(29501, 29502)));
}

TEST(LocalPortsTest, WhenTheWholeRangeIsTakenAPortFromElsewhereAndNeverATakenOne) {
  auto range_taken = [](int p) { return p < 29500 || p > 30500; };
  // Someone binds 29500-30500: the port comes from elsewhere (the kernel's offer), passing over what is taken there too.
  std::vector<int> offers = {30000, 0, 41000, 41001};
  size_t next = 0;
  auto elsewhere = [&] { return next < offers.size() ? offers[next++] : 0; };
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {41000}, range_taken, 7, elsewhere), ElementsAre(Pair(29500, 41001)));
  // Nothing free anywhere: none (0), never the declared port, whoever holds it.
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {}, [](int) { return false; }), ElementsAre(Pair(29500, 0)));
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {}, range_taken, 7, [] { return 29500; }), ElementsAre(Pair(29500, 0)));
  // Two named ports never get the same one from elsewhere.
  EXPECT_THAT(ChoosePorts({{29500, "a"}, {29501, "b"}}, {}, range_taken, 0, [] { return 50000; }),
              ElementsAre(Pair(29500, 50000), Pair(29501, 0)));
  // The kernel offers a real port.
  int offered = KernelFreePort();
  EXPECT_GT(offered, 0);
  EXPECT_LE(offered, 65535);
}

TEST(LocalPortsTest, ATakenPortIsReplacedFromWhereThisAppsDrawSaysNotTheNextOne) {
  auto all_free = [](int) { return true; };
  auto busy = [](int p) { return p != 29500; };  // what another daemon's job holds
  // The declared port, free, is kept whatever the draw.
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {}, all_free, 123456), ElementsAre(Pair(29500, 29500)));
  // Taken: the search starts at port+1+(draw % 999) and wraps within the 999 above it.
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {}, busy, 7), ElementsAre(Pair(29500, 29508)));
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {29508}, busy, 7), ElementsAre(Pair(29500, 29509)));
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {}, busy, 998), ElementsAre(Pair(29500, 30499)));
  EXPECT_THAT(ChoosePorts({{29500, "c10d"}}, {30499}, busy, 998), ElementsAre(Pair(29500, 29501)));
  // Two daemons that probed at once and drew differently hand their jobs different ports.
  EXPECT_NE(ChoosePorts({{29500, "c10d"}}, {}, busy, 11).at(29500), ChoosePorts({{29500, "c10d"}}, {}, busy, 500).at(29500));
  // Never past 65535.
  EXPECT_THAT(ChoosePorts({{65000, "c10d"}}, {}, [](int p) { return p != 65000; }, 600), ElementsAre(Pair(65000, 65001)));
}

TEST(LocalPortsTest, AClaimIsOneHoldersUntilItsDescriptorCloses) {
  // Below the kernel's ephemeral range (32768 and up here), where a connection could take the port
  // this test needs bindable at its end.
  int port = 0;
  for (int p = 31900 + static_cast<int>(::getpid() % 800); p < 32700 && port == 0; ++p) {
    if (PortIsFree(p)) port = p;
  }
  ASSERT_NE(port, 0);
  PortClaim mine = ClaimPort(port);
  ASSERT_TRUE(mine.fd.valid());
  EXPECT_FALSE(mine.taken);
  PortClaim second = ClaimPort(port);
  EXPECT_TRUE(second.taken);
  EXPECT_FALSE(second.fd.valid());
  // Claimed is not free (what --dryrun shows), though a server could bind it.
  EXPECT_FALSE(PortIsFree(port));
  EXPECT_TRUE(PortIsBindable(port));
  EXPECT_FALSE(ClaimPort(port + 1).taken);
  mine.fd.reset();
  EXPECT_TRUE(PortIsFree(port));
  EXPECT_TRUE(ClaimPort(port).fd.valid());
  EXPECT_TRUE(ClaimPort(0).taken);
  EXPECT_TRUE(ClaimPort(65536).taken);
}

}  // namespace
}  // namespace torchxd::core
