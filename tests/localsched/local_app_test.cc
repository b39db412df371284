#include "localsched/local_app.h"

#include <gtest/gtest.h>

namespace torchxd::localsched {
namespace {

using json = nlohmann::json;

LocalApp Sample() {
  LocalApp app;
  app.scheduler = "local_cwd";
  app.session = "torchx";
  app.app_id = "train-1";
  app.app.name = "train";
  app.requests = json::array({{{"entrypoint", "/bin/true"}}});
  app.max_duration_ms = 90000;
  app.ports = {{"rdzv", 29501}};
  app.pulling = {"img:1"};
  app.scale = {{"trainer", 2}};
  return app;
}

// A local app's own parts are stored under the keys they always had, so a
// record written before they left AppRecord reads back whole.
TEST(LocalAppTest, ItsOwnPartsRoundTripUnderTheirKeys) {
  LocalApp app = Sample();
  json stored = json::parse(app.ToJsonText(false));
  EXPECT_EQ(stored["requests"][0]["entrypoint"], "/bin/true");
  EXPECT_EQ(stored["max_duration_ms"], 90000);
  EXPECT_EQ(stored["ports"]["rdzv"], 29501);
  EXPECT_EQ(stored["pulling"][0], "img:1");
  auto back = LocalApp::FromJson(stored);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ((*back)->app_id, "train-1");
  EXPECT_EQ((*back)->requests, app.requests);
  EXPECT_EQ((*back)->max_duration_ms, 90000);
  EXPECT_EQ((*back)->ports, app.ports);
  EXPECT_EQ((*back)->pulling, app.pulling);
  EXPECT_EQ((*back)->scale, app.scale);
  EXPECT_EQ((*back)->runner, nullptr);
}

TEST(LocalAppTest, TheFixedPartIsWrittenAgainOnlyAfterItChanged) {
  LocalApp app = Sample();
  (void)app.ToJsonText(false);
  app.requests[0]["entrypoint"] = "/bin/false";
  EXPECT_EQ(json::parse(app.ToJsonText(false))["requests"][0]["entrypoint"], "/bin/true");  // cached
  app.FixedPartsChanged();
  EXPECT_EQ(json::parse(app.ToJsonText(false))["requests"][0]["entrypoint"], "/bin/false");
}

// Another scheduler's record carries none of the local scheduler's keys.
TEST(LocalAppTest, APlainRecordHasNoneOfTheLocalKeys) {
  seam::AppRecord record;
  record.scheduler = "kubernetes";
  record.app_id = "k-1";
  json stored = record.ToJson();
  for (const char* key : {"requests", "max_duration_ms", "ports", "pulling"}) {
    EXPECT_FALSE(stored.contains(key)) << key;
  }
  EXPECT_TRUE(seam::AppRecord::FromJson(stored).has_value());
}

}  // namespace
}  // namespace torchxd::localsched
