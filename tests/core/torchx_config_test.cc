#include "core/torchx_config.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/scheduler_opts.h"

namespace torchxd::core {
namespace {

namespace fs = std::filesystem;

class TorchxConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("torchx_config_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "home");
    fs::create_directories(dir_ / "work");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  fs::path dir_;
};

TEST_F(TorchxConfigTest, EarlierFileWinsAndCfgBeatsBoth) {
  Write(dir_ / "home/.torchxconfig", "[local_cwd]\nlog_dir = /from/home\nprepend_cwd = true\n");
  Write(dir_ / "work/.torchxconfig",
        "# project defaults\n[local_cwd]\nlog_dir = /from/work\nstopOnFailure = false\n"
        "auto_set_cuda_visible_devices: None\n[component:dist.ddp]\nj = 2x1\n");
  auto config = TorchxConfig::Load(MapEnv({{"HOME", (dir_ / "home").string()}}),
                                   (dir_ / "work").string());
  ASSERT_TRUE(config.has_value()) << config.error().message;
  ASSERT_EQ(config->files().size(), 2u);
  const RunOpts& opts = **SchedulerRunOpts("local_cwd");
  Cfg cfg = {{"prepend_cwd", false}};  // from -cfg
  std::vector<std::string> warnings;
  ASSERT_TRUE(config->ApplySchedulerDefaults("local_cwd", opts, cfg, warnings).has_value());
  EXPECT_EQ(cfg.at("log_dir"), CfgValue{std::string("/from/home")});
  EXPECT_EQ(cfg.at("prepend_cwd"), CfgValue{false});
  EXPECT_EQ(cfg.at("stop_on_failure"), CfgValue{false});
  EXPECT_EQ(cfg.at("auto_set_cuda_visible_devices"), CfgValue{});  // None
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(config->ComponentDefaults("dist.ddp").at("j"), "2x1");
}

TEST_F(TorchxConfigTest, TorchxconfigEnvSelectsOnlyThatFile) {
  Write(dir_ / "home/.torchxconfig", "[local_cwd]\nlog_dir = /from/home\n");
  Write(dir_ / "only.ini", "[local_cwd]\nlog_dir = /only\nlogdri = x\n");
  auto config = TorchxConfig::Load(
      MapEnv({{"HOME", (dir_ / "home").string()}, {"TORCHXCONFIG", (dir_ / "only.ini").string()}}),
      (dir_ / "work").string());
  ASSERT_TRUE(config.has_value());
  Cfg cfg;
  std::vector<std::string> warnings;
  ASSERT_TRUE(config->ApplySchedulerDefaults("local_cwd", **SchedulerRunOpts("local_cwd"), cfg,
                                             warnings)
                  .has_value());
  EXPECT_EQ(cfg.at("log_dir"), CfgValue{std::string("/only")});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("unknown run option `logdri`"), std::string::npos);

  auto none = TorchxConfig::Load(MapEnv({{"HOME", (dir_ / "home").string()}, {"TORCHXCONFIG", ""}}),
                                 (dir_ / "work").string());
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->files().empty());

  auto missing = TorchxConfig::Load(MapEnv({{"TORCHXCONFIG", (dir_ / "nope.ini").string()}}),
                                    (dir_ / "work").string());
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST_F(TorchxConfigTest, BadValuesAndSyntaxAreErrorsNamingTheFile) {
  Write(dir_ / "bad.ini", "[local_cwd]\nprepend_cwd = maybe\n");
  auto config = TorchxConfig::Load(MapEnv({{"TORCHXCONFIG", (dir_ / "bad.ini").string()}}), "/");
  ASSERT_TRUE(config.has_value());
  Cfg cfg;
  std::vector<std::string> warnings;
  auto applied =
      config->ApplySchedulerDefaults("local_cwd", **SchedulerRunOpts("local_cwd"), cfg, warnings);
  ASSERT_FALSE(applied.has_value());
  EXPECT_NE(applied.error().message.find("bad.ini: [local_cwd]"), std::string::npos);

  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"key = v\n", "before any [section]"},
      {"[a\n", "unclosed section header"},
      {"[a]\nnovalue\n", "expected `key = value`"},
      {"[a]\nk=1\nk=2\n", "appears twice"},
      {"[a]\n[a]\n", "appears twice"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto ini = ParseIni(c.text, "f.ini");
    ASSERT_FALSE(ini.has_value());
    EXPECT_NE(ini.error().message.find(c.needle), std::string::npos) << ini.error().message;
  }
}

TEST(IniTest, ContinuationLinesAndCommentsAndColonSeparator) {
  auto ini = ParseIni("; c\n[s]\nk = a\n  b\nx: 1\n", "f");
  ASSERT_TRUE(ini.has_value());
  ASSERT_EQ(ini->sections.size(), 1u);
  EXPECT_EQ(ini->sections[0].second[0], (std::pair<std::string, std::string>{"k", "a\nb"}));
  EXPECT_EQ(ini->sections[0].second[1], (std::pair<std::string, std::string>{"x", "1"}));
}

}  // namespace
}  // namespace torchxd::core
