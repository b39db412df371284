#include "daemon/config.h"
#include "daemon/heap_tunables.h"

#include <sys/vfs.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

namespace torchxd::daemon {
namespace {

ParsedArgs Parse(std::vector<std::string> args, std::map<std::string, std::string> env) {
  args.insert(args.begin(), "torchxd");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ParseDaemonArgs(static_cast<int>(argv.size()), argv.data(), core::MapEnv(std::move(env)));
}

TEST(DaemonConfigTest, UserModeDefaultsFollowXdg) {
  auto p = Parse({}, {{"XDG_RUNTIME_DIR", "/run/user/7"}, {"XDG_STATE_HOME", "/s"}, {"HOME", "/h"}});
  ASSERT_TRUE(p.config.has_value());
  EXPECT_EQ(p.config->socket, "/run/user/7/torchxd/torchxd.sock");
  EXPECT_EQ(p.config->state_dir, "/s/torchxd");
  EXPECT_EQ(p.config->log_dir, "/s/torchxd/logs");
  auto bare = Parse({}, {{"HOME", "/h"}});
  EXPECT_EQ(bare.config->socket, "/tmp/torchxd-" + std::to_string(::getuid()) + "/torchxd.sock");
  EXPECT_EQ(bare.config->state_dir, "/h/.local/state/torchxd");
}

TEST(DaemonConfigTest, TheWebListenerComesFromTheFlagElseTheEnvironment) {
  EXPECT_EQ(Parse({}, {{"HOME", "/h"}}).config->ui_listen, "");
  EXPECT_EQ(Parse({}, {{"HOME", "/h"}, {"TORCHXD_UI_LISTEN", "127.0.0.1:8080"}}).config->ui_listen, "127.0.0.1:8080");
  EXPECT_EQ(Parse({"--ui-listen", "127.0.0.1:9"}, {{"HOME", "/h"}, {"TORCHXD_UI_LISTEN", "127.0.0.1:8080"}}).config->ui_listen,
            "127.0.0.1:9");
}

TEST(DaemonConfigTest, TheWebSocketGoesBesideTheProtocolSocket) {
  EXPECT_EQ(DefaultUiSocket("/run/torchxd/torchxd.sock"), "/run/torchxd/ui.sock");
  EXPECT_EQ(DefaultUiSocket("/tmp/t/x.sock"), "/tmp/t/x.ui.sock");
  EXPECT_EQ(DefaultUiSocket("/tmp/t/plain"), "/tmp/t/plain.ui.sock");
}

TEST(DaemonConfigTest, SystemModePaths) {
  auto p = Parse({"--system"}, {{"XDG_RUNTIME_DIR", "/run/user/7"}});
  EXPECT_EQ(p.config->socket, "/run/torchxd/torchxd.sock");
  EXPECT_EQ(p.config->state_dir, "/var/lib/torchxd");
}

TEST(DaemonConfigTest, TheRunDirGoesBesideASocketOnATmpfsElseIntoTheStateDir) {
  struct statfs st;
  if (::statfs("/dev/shm", &st) != 0 || st.f_type != 0x01021994) GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  // A tmpfs socket dir that does not exist yet counts by the filesystem it will be on.
  EXPECT_EQ(DefaultRunDir("/dev/shm/not-yet/a/d.sock", "/s"), "/dev/shm/not-yet/a/d.shims");
  EXPECT_EQ(Parse({"--socket", "/dev/shm/x/torchxd.sock", "--state-dir", "/s"}, {}).config->run_dir,
            "/dev/shm/x/torchxd.shims");
  if (::statfs("/", &st) == 0 && st.f_type != 0x01021994) {
    EXPECT_EQ(DefaultRunDir("/var/x/d.sock", "/s"), "/s/shims");
  }
  EXPECT_EQ(Parse({"--socket", "/dev/shm/x/torchxd.sock", "--run-dir", "/r"}, {}).config->run_dir, "/r");
}

TEST(DaemonConfigTest, ConfigFileIsReadAndFlagsBeatIt) {
  std::string file = "/tmp/torchxd_config_test_" + std::to_string(::getpid()) + ".ini";
  std::ofstream(file) << "grace-period = 2.5\ncache-size = 7\nlog-level = debug\n";
  auto p = Parse({"--config", file, "--cache-size", "9"}, {{"HOME", "/h"}});
  std::remove(file.c_str());
  ASSERT_TRUE(p.config.has_value());
  EXPECT_DOUBLE_EQ(p.config->grace_period, 2.5);
  EXPECT_EQ(p.config->cache_size, 9u);
  EXPECT_EQ(p.config->log_level, "debug");
}

TEST(DaemonConfigTest, BadFlagsExitTwo) {
  EXPECT_EQ(Parse({"--cache-size", "0"}, {}).exit_code, 2);
  EXPECT_EQ(Parse({"--grace-period", "soon"}, {}).exit_code, 2);
  EXPECT_EQ(Parse({"--log-max-bytes", "12Q"}, {}).exit_code, 2);
  EXPECT_EQ(Parse({"--log-level", "loud"}, {}).exit_code, 2);
  EXPECT_EQ(Parse({"--output-max-bytes", "64Q"}, {}).exit_code, 2);
  EXPECT_EQ(Parse({"--output-max-bytes", "-1"}, {}).exit_code, 2);
}

TEST(DaemonConfigTest, TheGpuSamplePeriodIsZeroOrATenthOfASecondToAnHour) {
  EXPECT_EQ(Parse({}, {{"HOME", "/h"}}).config->gpu_sample_period, 1.0);
  EXPECT_EQ(Parse({"--gpu-sample-period", "0"}, {}).config->gpu_sample_period, 0.0);
  EXPECT_EQ(Parse({"--gpu-sample-period", "0.1"}, {}).config->gpu_sample_period, 0.1);
  EXPECT_EQ(Parse({"--gpu-sample-period", "3600"}, {}).config->gpu_sample_period, 3600.0);
  EXPECT_EQ(Parse({}, {{"HOME", "/h"}}).config->gpu_idle_after, 600);
  EXPECT_EQ(Parse({"--gpu-idle-after", "5"}, {}).config->gpu_idle_after, 5);
  EXPECT_FALSE(Parse({"--gpu-idle-after", "0"}, {}).config);
  EXPECT_FALSE(Parse({"--gpu-idle-after", "99999999999999999999"}, {}).config);
  EXPECT_EQ(Parse({}, {{"HOME", "/h"}}).config->gpu_ecc_limit, 1);
  EXPECT_EQ(Parse({"--gpu-ecc-limit", "0"}, {}).config->gpu_ecc_limit, 0);
  EXPECT_FALSE(Parse({"--gpu-ecc-limit", "-1"}, {}).config);
  for (const char* bad : {"0.05", "-1", "3601", "soon", "1e9", "nan"}) {
    EXPECT_EQ(Parse({"--gpu-sample-period", bad}, {}).exit_code, 2) << bad;
  }
}


TEST(HeapTunablesTest, HugePagesAreAddedToWhatTheUserSetAndAUsersOwnChoiceIsKept) {
  EXPECT_EQ(HugeHeapTunables(nullptr), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(HugeHeapTunables(""), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(HugeHeapTunables("glibc.malloc.arena_max=2"), "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  // Named already (by the user, or by this daemon before it ran itself again): no second run.
  EXPECT_EQ(HugeHeapTunables("glibc.malloc.hugetlb=1"), std::nullopt);
  EXPECT_EQ(HugeHeapTunables("glibc.malloc.hugetlb=0"), std::nullopt);
  EXPECT_EQ(HugeHeapTunables("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"), std::nullopt);
  // A name that only starts like it is another tunable.
  EXPECT_EQ(HugeHeapTunables("glibc.malloc.hugetlbx=0"), "glibc.malloc.hugetlbx=0:glibc.malloc.hugetlb=1");
}

}  // namespace
}  // namespace torchxd::daemon
