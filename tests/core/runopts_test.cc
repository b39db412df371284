#include "core/runopts.h"

#include <gtest/gtest.h>

#include "core/scheduler_opts.h"

namespace torchxd::core {
namespace {

RunOpts TestOpts() {
  RunOpts opts;
  opts.Add("queue", OptType::kStr, "Volcano queue to schedule job in.", {}, /*required=*/true);
  opts.Add("namespace", OptType::kStr, "Kubernetes namespace to schedule job in.",
           std::string("default"));
  opts.Add("cluster_name", OptType::kStr, "cluster");
  opts.Add("retries", OptType::kInt, "retries", int64_t{0});
  opts.Add("ratio", OptType::kFloat, "ratio", 0.5);
  opts.Add("privileged", OptType::kBool, "privileged", false);
  opts.Add("copy_env", OptType::kList, "env globs");
  opts.Add("labels", OptType::kMap, "labels");
  return opts;
}

TEST(RunOptsTest, CastsStringsWithTorchxRules) {
  RunOpts opts = TestOpts();
  struct Case {
    const char* key;
    const char* value;
    CfgValue want;
  };
  const Case cases[] = {
      {"queue", "q", std::string("q")},
      {"retries", "3", int64_t{3}},
      {"ratio", "1.5", 1.5},
      {"privileged", "TRUE", true},
      {"privileged", "yes", true},
      {"privileged", "On", true},
      {"privileged", "1", true},
      {"privileged", "off", false},
      {"privileged", "0", false},
      {"privileged", "No", false},
      {"copy_env", "a,b;", std::vector<std::string>{"a", "b"}},
      {"copy_env", "a;b;c", std::vector<std::string>{"a", "b", "c"}},
      {"labels", "a:1,b:2", std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}}},
      {"labels", "a:1;b:x:y", std::map<std::string, std::string>{{"a", "1"}, {"b", "x:y"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + "=" + c.value);
    auto got = opts.CastToType(*opts.Get(c.key), c.value);
    ASSERT_TRUE(got.has_value()) << got.error().message;
    EXPECT_EQ(*got, c.want);
  }
}

TEST(RunOptsTest, RejectsBadValues) {
  RunOpts opts = TestOpts();
  EXPECT_FALSE(opts.CastToType(*opts.Get("privileged"), "maybe").has_value());
  EXPECT_FALSE(opts.CastToType(*opts.Get("retries"), "three").has_value());
  EXPECT_FALSE(opts.CastToType(*opts.Get("ratio"), "1.5x").has_value());
  EXPECT_FALSE(opts.CastToType(*opts.Get("labels"), "novalue").has_value());
  auto err = opts.CastToType(*opts.Get("privileged"), "maybe").error().message;
  EXPECT_NE(err.find("`maybe` is not a valid bool literal"), std::string::npos) << err;
}

TEST(RunOptsTest, CfgFromStringCastsAndDropsUnknownKeysWithAWarning) {
  RunOpts opts = TestOpts();
  std::vector<std::string> warnings;
  auto cfg = opts.CfgFromString("queue=q,copy_env=A*,B*,clusterName=c,quee=x", warnings);
  ASSERT_TRUE(cfg.has_value()) << cfg.error().message;
  EXPECT_EQ(cfg->at("queue"), CfgValue{std::string("q")});
  EXPECT_EQ(cfg->at("copy_env"), (CfgValue{std::vector<std::string>{"A*", "B*"}}));
  EXPECT_EQ(cfg->at("cluster_name"), CfgValue{std::string("c")});  // camelCase alias
  EXPECT_EQ(cfg->count("quee"), 0u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "unknown run option passed to scheduler: quee=x. Did you mean `queue`?");
}

TEST(RunOptsTest, AListItemHoldingAnEqualsSignIsSplitAsTorchxSplitsItWithAHint) {
  RunOpts opts = TestOpts();
  std::vector<std::string> warnings;
  auto cfg = opts.CfgFromString("copy_env=A*;DEDICATED=ml*", warnings);
  ASSERT_TRUE(cfg.has_value()) << cfg.error().message;
  EXPECT_EQ(cfg->at("copy_env"), (CfgValue{std::vector<std::string>{"A*"}}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "unknown run option passed to scheduler: DEDICATED=ml*. If it was meant as an item of "
                         "`copy_env`, quote the whole value: copy_env=\"A*;DEDICATED=ml*\"");
  warnings.clear();
  cfg = opts.CfgFromString("copy_env=\"A*;DEDICATED=ml*\"", warnings);
  ASSERT_TRUE(cfg.has_value()) << cfg.error().message;
  EXPECT_EQ(cfg->at("copy_env"), (CfgValue{std::vector<std::string>{"A*", "DEDICATED=ml*"}}));
  EXPECT_TRUE(warnings.empty());
}

TEST(RunOptsTest, CfgFromStringRejectsConflictingSpellings) {
  RunOpts opts = TestOpts();
  std::vector<std::string> warnings;
  auto cfg = opts.CfgFromString("cluster_name=a,clusterName=b", warnings);
  ASSERT_FALSE(cfg.has_value());
  EXPECT_NE(cfg.error().message.find("passed under two spellings"), std::string::npos);
  EXPECT_TRUE(opts.CfgFromString("", warnings)->empty());
}

TEST(RunOptsTest, ResolveFillsDefaultsAndChecksRequired) {
  RunOpts opts = TestOpts();
  auto resolved = opts.Resolve({{"queue", std::string("q")}});
  ASSERT_TRUE(resolved.has_value());
  EXPECT_EQ(resolved->at("namespace"), CfgValue{std::string("default")});
  EXPECT_EQ(resolved->at("retries"), CfgValue{int64_t{0}});
  EXPECT_EQ(resolved->at("cluster_name"), CfgValue{});
  // None (JSON null) is the default, as in TorchX: never a value of no type.
  auto nulls = opts.Resolve({{"queue", std::string("q")}, {"namespace", CfgValue{}}, {"retries", CfgValue{}}});
  ASSERT_TRUE(nulls.has_value());
  EXPECT_EQ(nulls->at("namespace"), CfgValue{std::string("default")});
  EXPECT_EQ(nulls->at("retries"), CfgValue{int64_t{0}});

  auto missing = opts.Resolve({});
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().message,
            "Required run option: queue, must be provided and not `None`. Given: <EMPTY>");

  auto wrong = opts.Resolve({{"queue", std::string("q")}, {"retries", std::string("x")}});
  ASSERT_FALSE(wrong.has_value());
  EXPECT_EQ(wrong.error().message,
            "Run option: retries, must be of type: int, but was: x. Given: {'queue': 'q', "
            "'retries': 'x'}");
}

TEST(RunOptsTest, CfgFromJsonTypesValuesAndRejectsUnknownKeys) {
  RunOpts opts = TestOpts();
  auto cfg = opts.CfgFromJson({{"queue", "q"}, {"retries", 2}, {"ratio", 1}, {"labels", {{"a", "b"}}}});
  ASSERT_TRUE(cfg.has_value()) << cfg.error().message;
  EXPECT_EQ(cfg->at("retries"), CfgValue{int64_t{2}});
  EXPECT_EQ(cfg->at("ratio"), CfgValue{1.0});
  EXPECT_FALSE(opts.CfgFromJson({{"retries", "2"}}).has_value());
  EXPECT_FALSE(opts.CfgFromJson({{"nope", 1}}).has_value());
}

TEST(RunOptsTest, UsageMatchesTorchxRunoptsRepr) {
  RunOpts opts;
  opts.Add("queue", OptType::kStr, "Volcano queue to schedule job in.", {}, true);
  opts.Add("namespace", OptType::kStr, "Kubernetes namespace to schedule job in.",
           std::string("default"));
  EXPECT_EQ(opts.Usage(),
            "    usage:\n"
            "        queue=QUEUE,[namespace=NAMESPACE]\n"
            "\n"
            "    required arguments:\n"
            "        queue=QUEUE (str)\n"
            "            Volcano queue to schedule job in.\n"
            "\n"
            "    optional arguments:\n"
            "        namespace=NAMESPACE (str, default)\n"
            "            Kubernetes namespace to schedule job in.");
}

TEST(SchedulerOptsTest, KnowsLocalSchedulersAndSuggestsOnTypos) {
  auto local = SchedulerRunOpts("local_cwd");
  ASSERT_TRUE(local.has_value());
  EXPECT_NE((*local)->Get("log_dir"), nullptr);
  EXPECT_NE((*local)->Get("prepend_cwd"), nullptr);
  EXPECT_NE((*local)->Get("autoSetCudaVisibleDevices"), nullptr);
  auto unknown = SchedulerRunOpts("local_cdw");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().message.find("Did you mean `local_cwd`?"), std::string::npos);
}

}  // namespace
}  // namespace torchxd::core
