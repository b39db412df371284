// What the store keeps of an app and its replicas.
#include "seam/app_record.h"

#include <gtest/gtest.h>

#include <string>

namespace torchxd::seam {
namespace {

std::string Dumped(const supervisor::ReplicaInfo& r) {
  return ReplicaInfoToJson(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The replica record written directly is byte for byte what the DOM dumps,
// and reads back as the same replica.
TEST(AppRecordTest, AReplicasRecordTextIsWhatItsJsonDumps) {
  supervisor::ReplicaInfo fresh;
  supervisor::ReplicaInfo full;
  full.role = "trainer";
  full.role_index = 2;
  full.replica_id = 17;
  full.state = core::AppState::kFailed;
  full.attempt = 3;
  full.pid = 4242;
  full.exit_code = -1;
  full.signal = 9;
  full.start_ms = 1796156634797;
  full.end_ms = 1796156635075;
  full.error_message = "a \"quoted\"\nline\twith \\ and \x01 and caf\xc3\xa9 and a bad byte \xff";
  full.log_dir = "/home/u/logs/torchx/app/trainer/17";
  full.hostname = "box";
  full.monitor.run_dir = "/run/torchxd/shims/abc";
  full.monitor.nonce = "0123456789abcdef";
  full.monitor.boot_id = "f8118d94-e699-4af9-92c4-298fc31b";
  full.monitor.cgroup = "/sys/fs/cgroup/torchxd-1/a-2";
  for (const auto* r : {&fresh, &full}) {
    SCOPED_TRACE(r->role);
    std::string text = ReplicaInfoToJsonText(*r);
    EXPECT_EQ(text, Dumped(*r));
    auto back = ReplicaInfoFromJson(nlohmann::json::parse(text));
    EXPECT_EQ(ReplicaInfoToJsonText(back), text);  // invalid UTF-8 was replaced once, in `text`
    EXPECT_EQ(back.pid, r->pid);
    EXPECT_EQ(back.end_ms, r->end_ms);
    EXPECT_EQ(back.monitor.cgroup, r->monitor.cgroup);
  }
}

// A cancel under way is stored with how it ends, so a restarted daemon ends
// it the same; a record of a build that knew only max_duration's failing
// cancel (timed_out) reads as one.
TEST(AppRecordTest, ACancelUnderWayKeepsWhetherItFailsTheAppAcrossARestart) {
  AppRecord r;
  r.scheduler = "local_cwd";
  r.session = "torchx";
  r.app_id = "a";
  core::Role role;
  role.name = "w";
  role.entrypoint = "train";
  r.app.name = "a";
  r.app.roles.push_back(role);
  r.cancelling = true;
  r.cancel_fails = true;
  auto back = AppRecord::FromJson(r.ToJson());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->cancelling);
  EXPECT_TRUE(back->cancel_fails);
  EXPECT_FALSE(back->timed_out);

  nlohmann::json old = r.ToJson();
  old.erase("cancel_fails");
  old["timed_out"] = true;
  back = AppRecord::FromJson(old);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->cancel_fails);
  old["timed_out"] = false;
  back = AppRecord::FromJson(old);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_FALSE(back->cancel_fails);
}

// The text a write of the record needs: none while nothing changed since the
// last (a replica's restart waiting: the row, the size of every replica's
// request, is not written again); the changing part alone after it changed;
// the fixed part (the AppDef) only the first time and after a write that
// failed; the launch inputs then and after they changed. Joined, they are
// the whole record.
TEST(AppRecordTest, TheRecordIsTextToWriteOnlyWhenItChanged) {
  AppRecord r;
  r.scheduler = "local_cwd";
  r.app_id = "a";
  r.app.name = "a";
  r.client_env = {{"HOME", "/h"}};
  auto first = r.ChangedText();
  ASSERT_TRUE(first.has_value());
  ASSERT_NE(first->fixed, nullptr) << "the first write has no fixed part";
  ASSERT_NE(first->launch, nullptr) << "the first write has no launch inputs";
  std::string joined = JoinRecordText(*first->fixed, *first->launch, first->changing);
  EXPECT_EQ(joined, r.ToJsonText(false));
  nlohmann::json whole = r.ToJson();
  whole.erase("replicas");
  EXPECT_EQ(nlohmann::json::parse(joined), whole);
  EXPECT_EQ(nlohmann::json::parse(*first->launch)["client_env"]["HOME"], "/h");
  EXPECT_FALSE(nlohmann::json::parse(*first->fixed).contains("client_env"));
  EXPECT_FALSE(r.ChangedText().has_value()) << "unchanged, yet text to write";
  r.num_restarts = 1;
  auto second = r.ChangedText();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->fixed, nullptr) << "the fixed part, unchanged, written again";
  EXPECT_EQ(second->launch, nullptr) << "the launch inputs, unchanged, written again";
  EXPECT_EQ(nlohmann::json::parse(second->changing)["num_restarts"], 1);
  EXPECT_FALSE(nlohmann::json::parse(second->changing).contains("app"));
  EXPECT_FALSE(r.ChangedText().has_value());
  r.client_env.clear();
  r.LaunchInputsChanged();
  auto third = r.ChangedText();
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->fixed, nullptr);
  ASSERT_NE(third->launch, nullptr);
  EXPECT_EQ(nlohmann::json::parse(*third->launch)["client_env"], nlohmann::json::object());
  r.WriteFailed();
  auto again = r.ChangedText();
  ASSERT_TRUE(again.has_value()) << "a failed write is not written again";
  ASSERT_TRUE(again->fixed != nullptr && again->launch != nullptr) << "a failed write's row is not written whole";
  EXPECT_EQ(again->changing, third->changing);
  // With its replicas (as at submit, before they have rows of their own).
  r.replicas.resize(2);
  r.WriteFailed();
  auto with = r.ChangedText(true);
  ASSERT_TRUE(with.has_value());
  EXPECT_EQ(nlohmann::json::parse(JoinRecordText(*with->fixed, *with->launch, with->changing))["replicas"].size(), 2u);
}

// A stored request keeps only its own variables and says which layers it
// shares; read back with them, it is the same environment. One that shares a
// role's variables the record does not hold does not read.
TEST(AppRecordTest, AStoredRequestSharesItsRolesVariablesAndReadsBackWhole) {
  core::ReplicaRequest r;
  r.role = "w";
  r.replica_id = 2;
  r.entrypoint = "e";
  auto client = std::make_shared<const std::map<std::string, std::string>>(std::map<std::string, std::string>{{"HOME", "/h"}});
  auto role = std::make_shared<const std::map<std::string, std::string>>(std::map<std::string, std::string>{{"BIG", "b"}});
  r.inherited = client;
  r.role_env = role;
  r.env = {{"RID", "2"}};
  nlohmann::json stored = ReplicaRequestToStoredJson(r);
  EXPECT_EQ(stored["env"], (nlohmann::json{{"RID", "2"}}));
  EXPECT_EQ(stored["shares_role_env"], true);
  auto back = ReplicaRequestFromStoredJson(stored, client, {{"w", role}});
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->Environment(), (std::map<std::string, std::string>{{"BIG", "b"}, {"HOME", "/h"}, {"RID", "2"}}));
  EXPECT_FALSE(ReplicaRequestFromStoredJson(stored, client, {{"other", role}}).has_value());
  EXPECT_FALSE(ReplicaRequestFromStoredJson(stored, client).has_value());
  // As an older daemon stored it: every variable its own.
  stored.erase("shares_role_env");
  stored["env"]["BIG"] = "b";
  back = ReplicaRequestFromStoredJson(stored, client);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->Environment().at("BIG"), "b");
}

TEST(AppRecordTest, ThePartsJoinAsOneObjectAndAnythingElseAsNoJson) {
  EXPECT_EQ(JoinRecordText(R"({"a":1})", R"({"c":3})", R"({"b":2})"), R"({"a":1,"c":3,"b":2})");
  EXPECT_EQ(JoinRecordText("", "", R"({"b":2})"), R"({"b":2})");  // a row written whole
  EXPECT_EQ(JoinRecordText(R"({"a":1})", "{}", "{}"), R"({"a":1})");
  EXPECT_EQ(JoinRecordText("{}", "", R"({"b":2})"), R"({"b":2})");
  for (auto [fixed, changing] : std::vector<std::pair<std::string, std::string>>{
           {"{\"a\":1", "{\"b\":2}"}, {"[1]", "{\"b\":2}"}, {"{\"a\":1}", "2"}, {"x", ""}, {"{}", "[]"}}) {
    std::string joined = JoinRecordText(fixed, "{}", changing);
    EXPECT_FALSE(nlohmann::json::accept(joined) && nlohmann::json::parse(joined).is_object())
        << fixed << " + " << changing << " -> " << joined;
  }
}

}  // namespace
}  // namespace torchxd::seam
