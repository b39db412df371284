// A user's bounds on what the daemon holds for them: apps waiting to start
// (by count and bytes), the environment and arguments an app's replicas start
// with, and the backlog of a `log -f` follower that stopped reading.
#include <sys/socket.h>

#include <gmock/gmock.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "core/protocol.h"
#include "tests/daemon/hardening_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A user's apps waiting to start are bounded by count and by size: a flood
// of queued apps is refused past either limit, naming it, and leaves no
// trace; another user's submits and this user's running apps are untouched.
TEST_F(HardeningTest, AUsersWaitingAppsAreBoundedByCountAndBytes) {
  fs::path topology = dir_ / "one.json";
  std::ofstream(topology) << R"({"gpus": [{"index": 0, "uuid": "GPU-0", "numa_node": 0}]})";
  StartDaemon({"--gpu-topology", topology.string(), "--max-pending-per-user", "3",
               "--max-pending-bytes-per-user", "256K"});
  json gpu_role = ShRole("r", "sleep 60");
  gpu_role["resource"] = {{"gpu", 1}};
  auto holder = Call("run", RunParams(App("holder", {gpu_role})));
  ASSERT_TRUE(holder.has_value()) << holder.error().message;
  std::vector<std::string> queued;
  for (int i = 0; i < 3; ++i) {
    auto r = Call("run", RunParams(App("q", {gpu_role})));
    ASSERT_TRUE(r.has_value()) << r.error().message;
    queued.push_back((*r)["app_handle"]);
  }
  size_t apps = AppCount();
  auto fourth = Call("run", RunParams(App("q", {gpu_role})));
  ASSERT_FALSE(fourth.has_value());
  EXPECT_EQ(fourth.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(fourth.error().message, HasSubstr("already has 3 apps waiting to start"));
  EXPECT_THAT(fourth.error().message, HasSubstr("--max-pending-per-user 3"));
  EXPECT_EQ(AppCount(), apps) << "a refused run leaves no app behind";
  CallOk("cancel", {{"app_handle", queued[0]}});
  // By size: one waiting app of about 200 KiB (its env in the AppDef and in its
  // replica's request) fits under 256 KiB with the two small ones, a second does not.
  json big = App("big", {gpu_role});
  big["roles"][0]["env"] = {{"BIG", std::string(100 * 1024, 'x')}};
  auto first_big = Call("run", RunParams(big));
  ASSERT_TRUE(first_big.has_value()) << first_big.error().message;
  CallOk("cancel", {{"app_handle", queued[1]}});
  auto second_big = Call("run", RunParams(big));
  ASSERT_FALSE(second_big.has_value());
  EXPECT_THAT(second_big.error().message, HasSubstr("(--max-pending-bytes-per-user 256 KiB)"));
  EXPECT_THAT(second_big.error().message, HasSubstr("apps waiting to start would take"));
  EXPECT_THAT(second_big.error().message, HasSubstr("wait for some to start or cancel some"));
  // One that could never wait here, however many end, is told so, not to wait.
  json huge = App("huge", {gpu_role});
  huge["roles"][0]["env"] = {{"BIG1", std::string(100 * 1024, 'x')}, {"BIG2", std::string(100 * 1024, 'x')},
                             {"BIG3", std::string(100 * 1024, 'x')}};
  auto alone = Call("run", RunParams(huge));
  ASSERT_FALSE(alone.has_value());
  EXPECT_THAT(alone.error().message, HasSubstr("this app alone would take"));
  EXPECT_THAT(alone.error().message, HasSubstr("(--max-pending-bytes-per-user 256 KiB); make it smaller"));
  EXPECT_THAT(alone.error().message, Not(HasSubstr("wait for some")));
  CallOk("cancel", {{"app_handle", (*holder)["app_handle"]}, {"grace_period", 0}});
}

// A user's scales start or stop at most 256 replicas a second (1024 at
// once), all of their apps together: a scale loop is refused, saying so and
// when to try again, and nothing of the refused scale is applied. The app
// waits for a GPU here, so no replica starts while it is scaled.
TEST_F(HardeningTest, AUsersScalesChangeABoundedNumberOfReplicasASecond) {
  fs::path topology = dir_ / "one.json";
  std::ofstream(topology) << R"({"gpus": [{"index": 0, "uuid": "GPU-0", "numa_node": 0}]})";
  StartDaemon({"--gpu-topology", topology.string()});
  json gpu_role = ShRole("r", "sleep 60");
  gpu_role["resource"] = {{"gpu", 1}};
  auto holder = Call("run", RunParams(App("holder", {gpu_role})));
  ASSERT_TRUE(holder.has_value()) << holder.error().message;
  json wide = ShRole("w", "sleep 60", 1000);
  wide["min_replicas"] = 1;
  wide["resource"] = {{"gpu", 1}};
  auto app = Call("run", RunParams(App("wide", {wide})));
  ASSERT_TRUE(app.has_value()) << app.error().message;
  std::string handle = (*app)["app_handle"];
  auto down = Call("scale", {{"app_handle", handle}, {"scale", {{"w", 1}}}});  // 999 of the 1024
  ASSERT_TRUE(down.has_value()) << down.error().message;
  auto up = Call("scale", {{"app_handle", handle}, {"scale", {{"w", 1000}}}});
  ASSERT_FALSE(up.has_value()) << "a second scale of 999 replicas at once was taken";
  EXPECT_EQ(up.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(up.error().message, HasSubstr("may start or stop at most 256 replicas a second by scale"));
  EXPECT_THAT(up.error().message, HasSubstr("this scale changes 999: try again in"));
  auto small = Call("scale", {{"app_handle", handle}, {"scale", {{"w", 2}}}});
  EXPECT_TRUE(small.has_value()) << "one replica more fits: " << small.error().message;
  CallOk("cancel", {{"app_handle", handle}, {"grace_period", 0}});
  CallOk("cancel", {{"app_handle", (*holder)["app_handle"]}, {"grace_period", 0}});
}

// An app's replicas together start with at most --max-expanded-bytes-per-app
// of environment and arguments: a big environment times many replicas is
// refused at submit with the figures, before anything is stored.
TEST_F(HardeningTest, AnAppsEnvironmentTimesItsReplicasIsBounded) {
  StartDaemon({"--max-expanded-bytes-per-app", "2M"});
  json app = App("wide", {ShRole("r", "true", 64)});
  app["roles"][0]["env"] = {{"BIG", std::string(64 * 1024, 'x')}};  // 64 KiB x 64 replicas = 4 MiB
  size_t apps = AppCount();
  auto refused = Call("run", RunParams(app));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(refused.error().message, HasSubstr("64 replicas would start with up to 4.1 MiB of environment and arguments together (about 65 KiB each"));
  EXPECT_THAT(refused.error().message, HasSubstr("--max-expanded-bytes-per-app 2 MiB"));
  EXPECT_EQ(AppCount(), apps);
  // The client's environment counts once per replica too.
  json params = RunParams(App("client", {ShRole("r", "true", 64)}));
  params["env"]["BIG"] = std::string(64 * 1024, 'y');
  auto client = Call("run", params);
  ASSERT_FALSE(client.has_value());
  EXPECT_THAT(client.error().message, HasSubstr("--max-expanded-bytes-per-app"));
  // Under the bound it runs, each replica with its whole environment.
  params = RunParams(App("fits", {ShRole("r", "test ${#BIG} -eq 65536", 16)}));
  params["env"]["BIG"] = std::string(64 * 1024, 'z');
  auto fits = Call("run", params);
  ASSERT_TRUE(fits.has_value()) << fits.error().message;
  EXPECT_EQ(Wait((*fits)["app_handle"])["state"], "SUCCEEDED");
}

// Macros are counted before they are substituted: "$img_root" is 9 bytes
// of AppDef and a path of hundreds once substituted, for every replica. A
// request whose substitution would come to gigabytes is refused from its
// counts, without the daemon building any of it; under the bound, the
// replicas get every byte.
TEST_F(HardeningTest, MacrosThatWouldGrowAThousandfoldAreRefusedBeforeAnyIsSubstituted) {
  StartDaemon({"--max-expanded-bytes-per-app", "8M"});
  fs::path image = dir_;
  for (int i = 0; i < 4; ++i) image /= std::string(200, 'd');
  fs::create_directories(image);
  std::string macros;
  for (int i = 0; i < 100000; ++i) macros += "$img_root";  // 900 KB here, 80 MB once substituted
  json role = {{"name", "r"}, {"entrypoint", "true"}, {"image", image.string()}, {"args", {macros}},
               {"num_replicas", 16}};
  json params = RunParams(App("grows", {role}), {{"scheduler", "local_dir"}});
  size_t before = PeakRssKb();
  size_t apps = AppCount();
  auto refused = Call("run", params);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(refused.error().message, HasSubstr("16 replicas would start with up to 1.3 GiB"));
  EXPECT_THAT(refused.error().message, HasSubstr("macros such as ${img_root} counted at their longest"));
  EXPECT_EQ(AppCount(), apps);
  size_t after = PeakRssKb();
  // Under the bound the same macros run, substituted whole.
  role["args"] = {"-c", "test ${#0} -eq " + std::to_string(image.string().size() * 100), macros.substr(0, 900)};
  role["entrypoint"] = "/bin/sh";
  role["num_replicas"] = 2;
  auto fits = Call("run", RunParams(App("fits", {role}), {{"scheduler", "local_dir"}}));
  ASSERT_TRUE(fits.has_value()) << fits.error().message;
  EXPECT_EQ(Wait((*fits)["app_handle"])["state"], "SUCCEEDED");
  if (kSanitized) GTEST_SKIP() << "resident sizes are not measured under AddressSanitizer";
  EXPECT_LT(after, before + 32 * 1024) << "peak RSS " << before << " KiB -> " << after << " KiB";
}

// A big app is expanded off the loop, and the user's bounds are checked
// again when it is stored: of two big apps sent at once by a user who may
// have one waiting, one waits and then runs with every byte, the other is
// refused naming the limit, whichever arrived first; nothing of it is kept.
TEST_F(HardeningTest, TwoBigAppsSentAtOnceAreCheckedAgainstTheBoundsWhenStored) {
  fs::path topology = dir_ / "one.json";
  std::ofstream(topology) << R"({"gpus": [{"index": 0, "uuid": "GPU-0", "numa_node": 0}]})";
  StartDaemon({"--gpu-topology", topology.string(), "--max-pending-per-user", "1"});
  json gpu_role = ShRole("r", "sleep 60");
  gpu_role["resource"] = {{"gpu", 1}};
  auto holder = Call("run", RunParams(App("holder", {gpu_role})));
  ASSERT_TRUE(holder.has_value()) << holder.error().message;
  auto params = [&](const std::string& name) {
    // 16 variables of 64 KiB (one string of a process is at most 128 KiB): expanded off the loop.
    std::string all;
    for (int i = 0; i < 16; ++i) all += "$B" + std::to_string(i);
    json role = ShRole("r", "test \"$(printf %s \"" + all + "\" | wc -c)\" -eq 1048576");
    role["resource"] = {{"gpu", 1}};
    json p = RunParams(App(name, {role}));
    for (int i = 0; i < 16; ++i) p["env"]["B" + std::to_string(i)] = std::string(64 * 1024, 'b');
    return p;
  };
  size_t apps = AppCount();
  Result<json> first, second;
  std::thread other([&] { second = Call("run", params("second")); });
  first = Call("run", params("first"));
  other.join();
  ASSERT_NE(first.has_value(), second.has_value()) << "exactly one of the two is taken";
  const Result<json>& taken = first ? first : second;
  const Result<json>& refused = first ? second : first;
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(refused.error().message, HasSubstr("--max-pending-per-user 1"));
  EXPECT_EQ(AppCount(), apps + 1) << "a refused run leaves no app behind";
  std::string h = (*taken)["app_handle"];
  EXPECT_EQ(Status(h)["state"], "PENDING");
  CallOk("cancel", {{"app_handle", (*holder)["app_handle"]}, {"grace_period", 0}});
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED") << "its one replica got the whole environment";
}

// `log -f` followers that never read cost at most about 1 MiB each while they
// stay (the rest is read from disk when they catch up), and that memory goes
// back once they close.
TEST_F(HardeningTest, FollowersThatNeverReadCostAboutOneMebibyteEach) {
  StartDaemon();
  std::string h = Run(App("spew", {FakeRole("r", {"--spew-mb", "64", "--sleep", "60"})}));
  auto stdout_bytes = [&] {
    uintmax_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(LogDirOf(h) + "/r/0", ec)) {
      if (e.path().filename().string().rfind("stdout", 0) == 0) n += e.file_size(ec);
    }
    return n;
  };
  ASSERT_TRUE(WaitUntil([&] { return stdout_bytes() >= (64u << 20); }, 60));
  size_t before = RssKb();
  constexpr int kFollowers = 40;
  std::vector<UniqueFd> followers;
  for (int i = 0; i < kFollowers; ++i) {
    UniqueFd fd = Raw();
    int small = 4096;  // the kernel holds little for it: the daemon's own buffer is what is measured
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    std::string frame = protocol::EncodeRequest({1, "log", {{"app_handle", h}, {"follow", true}}});
    ASSERT_TRUE(SendAll(fd.get(), frame));
    followers.push_back(std::move(fd));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // each reads until it is paused
  size_t held = RssKb();
  EXPECT_TRUE(Answers());
  followers.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  size_t after = RssKb();
  CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
  if (kSanitized) GTEST_SKIP() << "resident sizes are not measured under AddressSanitizer";
  EXPECT_LT(held, before + kFollowers * 2 * 1024 + 16 * 1024) << "RSS " << before << " KiB -> " << held << " KiB";
  EXPECT_LT(after, before + 16 * 1024) << "RSS " << before << " KiB -> " << held << " KiB -> " << after << " KiB";
}

}  // namespace
}  // namespace torchxd::testing
