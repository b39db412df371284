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
// request, is not written again), the whole record after a change of either
// part, and again after a write that failed.
TEST(AppRecordTest, TheRecordIsTextToWriteOnlyWhenItChanged) {
  AppRecord r;
  r.scheduler = "local_cwd";
  r.app_id = "a";
  r.app.name = "a";
  auto first = r.ChangedJsonText();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, r.ToJsonText(false));
  EXPECT_FALSE(r.ChangedJsonText().has_value()) << "unchanged, yet text to write";
  r.num_restarts = 1;
  auto second = r.ChangedJsonText();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(nlohmann::json::parse(*second)["num_restarts"], 1);
  EXPECT_FALSE(r.ChangedJsonText().has_value());
  r.cwd = "/elsewhere";
  r.FixedPartsChanged();
  auto third = r.ChangedJsonText();
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(nlohmann::json::parse(*third)["cwd"], "/elsewhere");
  r.WriteFailed();
  EXPECT_EQ(r.ChangedJsonText(), third) << "a failed write is not written again";
}

}  // namespace
}  // namespace torchxd::seam
