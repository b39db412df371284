// The pure parts of an app's timeline: what an exit means, ordinals, stored
// rows (this daemon's and an older one's) read back, and the feed's order.
#include <csignal>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "seam/app_events.h"

namespace torchxd::seam {
namespace {

using ::testing::HasSubstr;

TEST(AppEventsTest, AnExitSaysWhatItMeans) {
  EXPECT_EQ(ExitMeaning(0, std::nullopt), "exit code 0");
  EXPECT_EQ(ExitMeaning(3, std::nullopt), "exit code 3");
  EXPECT_THAT(ExitMeaning(137, std::nullopt), HasSubstr("exit code 137 = SIGKILL, by the kernel's OOM killer"));
  EXPECT_THAT(ExitMeaning(139, std::nullopt), HasSubstr("SIGSEGV, a crash"));
  EXPECT_THAT(ExitMeaning(std::nullopt, SIGKILL), HasSubstr("killed by signal 9 (SIGKILL"));
  EXPECT_THAT(ExitMeaning(std::nullopt, SIGBUS), HasSubstr("/dev/shm full"));
  EXPECT_EQ(ExitMeaning(std::nullopt, 63), "killed by signal 63");
  EXPECT_EQ(ExitMeaning(127, std::nullopt), "exit code 127: command not found");
  EXPECT_EQ(ExitMeaning(200, std::nullopt), "exit code 200");
  EXPECT_EQ(ExitMeaning(std::nullopt, std::nullopt), "ended");
}

TEST(AppEventsTest, Ordinals) {
  EXPECT_EQ(Ordinal(1), "1st");
  EXPECT_EQ(Ordinal(2), "2nd");
  EXPECT_EQ(Ordinal(3), "3rd");
  EXPECT_EQ(Ordinal(4), "4th");
  EXPECT_EQ(Ordinal(11), "11th");
  EXPECT_EQ(Ordinal(12), "12th");
  EXPECT_EQ(Ordinal(21), "21st");
  EXPECT_EQ(Ordinal(112), "112th");
}

TEST(AppEventsTest, StoredRowsReadBackOursAndAnOlderDaemons) {
  AppEvent e;
  e.seq = 7;
  e.time_ms = 1234;
  e.type = "exited";
  e.replica = "w/0";
  e.text = "failed (attempt 1): exit code 3";
  e.data = {{"exit_code", 3}};
  AppEvent back = AppEvent::FromStored(StoredEvent{7, 1234, "exited", 5, e.StoredMsg()});
  EXPECT_EQ(back.ToJson(), e.ToJson());
  // The stored text is what a DOM of it dumps, whatever its strings hold.
  auto dom = [](const AppEvent& x) {
    nlohmann::json j = {{"text", x.text}, {"data", x.data}};
    if (!x.replica.empty()) j["replica"] = x.replica;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  EXPECT_EQ(e.StoredMsg(), dom(e));
  AppEvent odd;
  odd.text = "quote \" newline \n control \x02 bad \xff";
  odd.replica = "w\"/1";
  EXPECT_EQ(odd.StoredMsg(), dom(odd));  // its data null
  odd.replica.clear();
  odd.data = {{"meaning", "caf\xc3\xa9"}, {"attempt", 2}};
  EXPECT_EQ(odd.StoredMsg(), dom(odd));
  // An older daemon's rows: the type and the replica from `what`, the message as text.
  AppEvent old = AppEvent::FromStored(StoredEvent{3, 1, "replica w/1 attempt 2", 5, "killed by signal 9"});
  EXPECT_EQ(old.type, "replica");
  EXPECT_EQ(old.replica, "w/1");
  EXPECT_EQ(old.text, "killed by signal 9");
  AppEvent app = AppEvent::FromStored(StoredEvent{4, 1, "app", 4, "{not json"});
  EXPECT_EQ(app.type, "app");
  EXPECT_EQ(app.text, "{not json");
}

TEST(AppEventsTest, TheFeedTellsAnAppsFollowersInOrderAndOnlyThem) {
  EventFeed feed;
  std::vector<std::string> heard;
  uint64_t a = feed.Subscribe("local_cwd/a", [&](const AppEvent& e) { heard.push_back("a1:" + e.type); });
  uint64_t self = 0;
  self = feed.Subscribe("local_cwd/a", [&](const AppEvent& e) {
    heard.push_back("a2:" + e.type);
    feed.Unsubscribe(self);  // a follower may leave while told
  });
  feed.Subscribe("local_cwd/b", [&](const AppEvent& e) { heard.push_back("b:" + e.type); });
  AppEvent e;
  e.type = "started";
  feed.Publish("local_cwd/a", e);
  e.type = "ended";
  feed.Publish("local_cwd/a", e);
  EXPECT_EQ(heard, (std::vector<std::string>{"a1:started", "a2:started", "a1:ended"}));
  feed.Unsubscribe(a);
  EXPECT_EQ(feed.followers(), 1u);
}

TEST(AppEventsTest, AnAppsEndTellsItsWaitersOnceAndKeepsItsOtherFollowers) {
  EventFeed feed;
  std::vector<std::string> heard;
  feed.Subscribe("local_cwd/a", {}, [&] { heard.push_back("wait1"); });
  feed.Subscribe("local_cwd/a", [&](const AppEvent& e) { heard.push_back("log:" + e.type); });
  // An on_end may subscribe anew: the new one is not told of this end.
  feed.Subscribe("local_cwd/a", {}, [&] {
    heard.push_back("wait2");
    feed.Subscribe("local_cwd/a", {}, [&] { heard.push_back("late"); });
  });
  feed.Subscribe("local_cwd/b", {}, [&] { heard.push_back("b"); });
  feed.End("local_cwd/a");
  EXPECT_EQ(heard, (std::vector<std::string>{"wait1", "wait2"}));
  EXPECT_EQ(feed.followers(), 3u) << "the log follower, b's waiter and the late one";
  AppEvent e;
  e.type = "exited";
  feed.Publish("local_cwd/a", e);
  feed.End("local_cwd/a");
  EXPECT_EQ(heard, (std::vector<std::string>{"wait1", "wait2", "log:exited", "late"}));
  EXPECT_EQ(feed.followers(), 2u);
}

}  // namespace
}  // namespace torchxd::seam
