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

// The requests are launch inputs: written with the row, then again only
// after they changed (ports, GPUs, dropped at the end), the AppDef not with them.
TEST(LocalAppTest, TheLaunchInputsAreWrittenAgainOnlyAfterTheyChanged) {
  LocalApp app = Sample();
  auto first = app.ChangedText();
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(first->fixed != nullptr && first->launch != nullptr);
  EXPECT_TRUE(json::parse(*first->launch).contains("requests"));
  EXPECT_FALSE(json::parse(*first->fixed).contains("requests"));
  EXPECT_TRUE(json::parse(*first->fixed).contains("app"));
  app.requests[0]["entrypoint"] = "/bin/false";
  EXPECT_EQ(json::parse(app.ToJsonText(false))["requests"][0]["entrypoint"], "/bin/true");  // cached
  app.LaunchInputsChanged();
  EXPECT_EQ(json::parse(app.ToJsonText(false))["requests"][0]["entrypoint"], "/bin/false");
  auto second = app.ChangedText();
  ASSERT_TRUE(second.has_value()) << "changed launch inputs, yet nothing to write";
  EXPECT_EQ(second->fixed, nullptr) << "the AppDef written again with the requests";
  ASSERT_NE(second->launch, nullptr);
  EXPECT_EQ(json::parse(*second->launch)["requests"][0]["entrypoint"], "/bin/false");
  app.DropLaunchInputs();
  auto ended = app.ChangedText();
  ASSERT_TRUE(ended.has_value() && ended->launch != nullptr && ended->fixed == nullptr);
  EXPECT_EQ(json::parse(*ended->launch)["requests"], json::array());
}

// The stored text, replicas written as text, reads back as the record's DOM, with and without them.
TEST(LocalAppTest, TheStoredTextIsTheRecordsJson) {
  LocalApp app = Sample();
  for (int id : {0, 1, 2}) {
    supervisor::ReplicaInfo r;
    r.role = "trainer";
    r.replica_id = id;
    r.attempt = 1;
    r.pid = 100 + id;
    r.error_message = id == 1 ? "a \"quoted\" line\n" : "";
    app.replicas.push_back(r);
  }
  json whole = app.ToJson();
  EXPECT_EQ(json::parse(app.ToJsonText(true)), whole);
  whole.erase("replicas");
  EXPECT_EQ(json::parse(app.ToJsonText(false)), whole);
  app.replicas.clear();
  EXPECT_EQ(json::parse(app.ToJsonText(true)), app.ToJson());
}

// TorchX's SUCCESS file, written as text: what a DOM of it dumps, byte for byte.
TEST(LocalAppTest, TheSuccessFileIsWhatItsDomDumps) {
  auto dom = [](const LocalApp& app, int64_t now_ms) {
    json roles = json::object();
    for (const auto& r : app.replicas) {
      roles[r.role].push_back(json{{"replica_id", r.replica_id},
                                   {"pid", r.pid ? json(*r.pid) : json(nullptr)},
                                   {"exitcode", r.exit_code ? json(*r.exit_code) : r.signal ? json(-*r.signal) : json(nullptr)},
                                   {"stdout", r.log_dir + "/stdout.log"},
                                   {"stderr", r.log_dir + "/stderr.log"},
                                   {"error_file", r.log_dir + "/error.json"}});
    }
    json success = {{"app_id", app.app_id},
                     {"log_dir", app.app_log_dir},
                     {"final_state", core::AppStateName(app.state)},
                     {"last_updated", static_cast<double>(app.ended_ms.value_or(now_ms)) / 1000.0},
                     {"roles", roles}};
    return success.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  LocalApp app = Sample();
  app.state = core::AppState::kFailed;
  app.app_log_dir = "/home/u/logs/torchx/train-1 \"quoted\" \xff";
  EXPECT_EQ(app.SuccessFileText(1796156634797), dom(app, 1796156634797));  // no replicas
  for (const char* role : {"worker", "trainer", "worker", "ps\x01"}) {
    supervisor::ReplicaInfo r;
    r.role = role;
    r.replica_id = static_cast<int>(app.replicas.size());
    r.log_dir = "/home/u/logs/torchx/train-1/" + r.role + "/" + std::to_string(r.replica_id);
    app.replicas.push_back(r);
  }
  app.replicas[0].pid = 7, app.replicas[0].exit_code = 0;
  app.replicas[1].pid = 8, app.replicas[1].signal = 9;
  app.replicas[2].exit_code = 3, app.replicas[2].signal = 15;
  EXPECT_EQ(app.SuccessFileText(1796156634797), dom(app, 1796156634797));
  app.ended_ms = 1796156635075;
  EXPECT_EQ(app.SuccessFileText(1), dom(app, 1));
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
