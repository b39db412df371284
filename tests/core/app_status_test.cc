#include "core/app_status.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace torchxd::core {
namespace {

AppStatus Sample() {
  AppStatus s;
  s.state = AppState::kFailed;
  s.num_restarts = 1;
  s.msg = "trainer/1 failed";
  s.app_handle = "local_cwd://torchx/train-x";
  ReplicaStatus r0;
  r0.id = 0;
  r0.state = ReplicaState::kSucceeded;
  r0.role = "trainer";
  r0.hostname = "localhost";
  r0.pid = 100;
  r0.exit_code = 0;
  r0.attempt = 1;
  r0.start_time_ms = 1795344391620;
  r0.end_time_ms = 1795344392000;
  ReplicaStatus r1 = r0;
  r1.id = 1;
  r1.state = ReplicaState::kFailed;
  r1.pid = 101;
  r1.exit_code = 3;
  r1.error_message = "exited with code 3";
  s.roles = {{"trainer", {r1, r0}}};
  return s;
}

TEST(AppStatusTest, IsTerminalAndStarted) {
  EXPECT_TRUE(IsTerminal(AppState::kSucceeded));
  EXPECT_TRUE(IsTerminal(AppState::kCancelled));
  EXPECT_FALSE(IsTerminal(AppState::kRunning));
  EXPECT_TRUE(IsStarted(AppState::kRunning));
  EXPECT_FALSE(IsStarted(AppState::kPending));
  EXPECT_EQ(AppStateName(AppState::kUnknown), "UNKNOWN");
  EXPECT_EQ(static_cast<int>(AppState::kCancelled), 6);
  EXPECT_EQ(*AppStateFromName("RUNNING"), AppState::kRunning);
  EXPECT_FALSE(AppStateFromInt(8).has_value());
}

TEST(AppStatusTest, JsonHasTorchxShapePlusAdditions) {
  auto j = AppStatusToJson(Sample());
  EXPECT_EQ(j["state"], "FAILED");  // app state is the name
  EXPECT_EQ(j["roles"][0]["replicas"][0]["state"], 5);  // replica state is the int
  EXPECT_EQ(j["roles"][0]["replicas"][0]["state_name"], "FAILED");
  EXPECT_EQ(j["roles"][0]["replicas"][0]["exit_code"], 3);
  EXPECT_EQ(j["roles"][0]["replicas"][0]["start_time"], "2026-11-22T10:46:31.620Z");
  EXPECT_EQ(j["app_handle"], "local_cwd://torchx/train-x");
  EXPECT_TRUE(j["url"].is_null());
  auto back = AppStatusFromJson(j);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(*back, Sample());
}

// The text builder answers `status` and `wait`: byte for byte what the DOM dumps,
// whatever the strings hold, with the daemon's extra members added or replacing.
TEST(AppStatusTest, TheTextIsWhatTheDomDumpsByteForByte) {
  auto dom_text = [](const AppStatus& s, const nlohmann::json& extra) {
    nlohmann::json j = AppStatusToJson(s);
    for (const auto& [key, value] : extra.items()) j[key] = value;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  AppStatus odd = Sample();
  odd.state = AppState::kRunning;
  odd.msg = "quote \" back\\slash \n newline \x01 control \xff\xfe not utf-8 \xc3\xa9 utf-8";
  odd.structured_error_msg = "{\"message\": \"tab\\there\"}";
  odd.ui_url = "file:///tmp/logs/a \"b\"";
  odd.roles[0].replicas[0].role = "tr\x7f" "ainer";
  odd.roles[0].replicas[0].gpus = {{0, "GPU-a"}, {3, ""}};
  odd.roles[0].replicas[0].log_bytes_lost = 18446744073709551615ULL;
  odd.roles[0].replicas[1].pid.reset();
  odd.roles[0].replicas[1].exit_code.reset();
  odd.roles[0].replicas[1].signal = 9;
  odd.roles[0].replicas[1].start_time_ms.reset();
  odd.roles[0].replicas[1].end_time_ms.reset();
  odd.roles.push_back({"empty", {}});
  odd.roles.push_back({"ps", {odd.roles[0].replicas[1]}});
  AppStatus none;
  nlohmann::json extra = {{"user", "alice"},
                          {"page_url", "http://127.0.0.1:8080/apps/x"},
                          {"gpu_usage", {{"gpu_seconds_held", 1.5}, {"intervals", nlohmann::json::array()}}},
                          {"msg", "replaced"}};
  for (const AppStatus& s : {Sample(), odd, none}) {
    for (const nlohmann::json& e : {nlohmann::json::object(), extra}) {
      EXPECT_EQ(AppStatusToJsonText(s, e), dom_text(s, e));
    }
  }
}

TEST(AppStatusTest, FormatFollowsTorchxTemplateAndMarksTheFailedReplica) {
  // The failed replica is marked, not replica 0 (TorchX marks each role's first).
  EXPECT_EQ(FormatAppStatus(Sample()),
            "AppStatus:\n"
            "    State: FAILED\n"
            "    Num Restarts: 1\n"
            "    Roles: \n"
            "  trainer[0]:SUCCEEDED pid=100 exitcode=0 attempt=1\n"
            " *trainer[1]:FAILED (exited with code 3) pid=101 exitcode=3 attempt=1\n"
            "    Msg: trainer/1 failed\n"
            "    Structured Error Msg: <NONE>\n"
            "    UI URL: None");
  EXPECT_EQ(FormatAppStatus(Sample(), {"other"}).find("trainer["), std::string::npos);
  // Nothing failed: TorchX's mark on replica 0; a served page is the UI URL.
  AppStatus ok = Sample();
  ok.state = AppState::kRunning;
  for (auto& r : ok.roles[0].replicas) r.state = ReplicaState::kRunning;
  ok.page_url = "http://127.0.0.1:8080/apps/x";
  std::string text = FormatAppStatus(ok);
  EXPECT_NE(text.find(" *trainer[0]:RUNNING"), std::string::npos) << text;
  EXPECT_NE(text.find("  trainer[1]:RUNNING"), std::string::npos) << text;
  EXPECT_NE(text.find("UI URL: http://127.0.0.1:8080/apps/x"), std::string::npos) << text;
}

TEST(AppStatusTest, TheAppsStructuredErrorIsALineUnlessVerbose) {
  AppStatus s = Sample();
  s.structured_error_msg =
      R"({"message": {"message": "RuntimeError: boom\nTraceback (most recent call last):\n  File x", "errorCode": 7}})";
  std::string text = FormatAppStatus(s);
  EXPECT_NE(text.find("Structured Error Msg: RuntimeError: boom (the whole reply file: torchx status --verbose)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("Traceback"), std::string::npos);
  EXPECT_NE(FormatAppStatus(s, {}, /*verbose=*/true).find("Structured Error Msg: {\"message\""), std::string::npos);
}

TEST(AppStatusTest, FormatRendersTorchelasticReplyFiles) {
  AppStatus s = Sample();
  s.roles[0].replicas = {s.roles[0].replicas[0]};  // trainer[1]
  s.roles[0].replicas[0].structured_error_msg =
      R"({"message": {"message": "RuntimeError: boom", "errorCode": 7, "extraInfo": {"timestamp": "1795344391"}}})";
  std::string text = FormatAppStatus(s);
  EXPECT_NE(text.find(" *trainer[1]:FAILED (exitcode: 7) pid=101 exitcode=3 attempt=1\n"
                      "        timestamp: "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n        hostname: localhost\n        error_msg: RuntimeError: boom"),
            std::string::npos)
      << text;
  s.roles[0].replicas[0].structured_error_msg = "not json";
  EXPECT_NE(FormatAppStatus(s).find("trainer[1]:not json"), std::string::npos);
}

TEST(AppStatusTest, Rfc3339RoundTripsAndAcceptsOffsets) {
  EXPECT_EQ(FormatRfc3339Utc(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(*ParseRfc3339("2026-11-22T10:46:31.620Z"), 1795344391620);
  EXPECT_EQ(*ParseRfc3339("2026-11-22T11:46:31.62+01:00"), 1795344391620);
  EXPECT_FALSE(ParseRfc3339("2026-11-22 12:46:31").has_value());
  EXPECT_FALSE(ParseRfc3339("yesterday").has_value());
}

}  // namespace
}  // namespace torchxd::core
