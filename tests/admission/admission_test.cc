// The admission engine on fake boxes (F8: 8 GPUs in NVLink pairs {0,2},
// {1,3}, {4,5}, {6,7}, NUMA 0 = GPUs 0-3; 64 CPUs; 512000 MB).
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "admission/admission.h"

namespace torchxd::admission {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

BoxCapacity F8Box() {
  BoxCapacity box;
  box.topology = *ParseGpuTopology(R"({"gpus": [
    {"index": 0, "numa_node": 0, "nvlink": {"2": 12}}, {"index": 1, "numa_node": 0, "nvlink": {"3": 12}},
    {"index": 2, "numa_node": 0}, {"index": 3, "numa_node": 0},
    {"index": 4, "numa_node": 1, "nvlink": {"5": 12}}, {"index": 5, "numa_node": 1},
    {"index": 6, "numa_node": 1, "nvlink": {"7": 12}}, {"index": 7, "numa_node": 1}]})");
  box.cpu = 64;
  box.mem_mb = 512000;
  return box;
}

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionTest() : adm_(F8Box(), {}) {}
  void Use(std::vector<QueueSpec> queues) { adm_ = Admission(F8Box(), std::move(queues)); }

  AppDemand App(const std::string& name, int replicas, Resources each, const std::string& queue = "default",
                uint32_t user = 1000, int priority = 0, std::optional<int> min = std::nullopt) {
    AppDemand a;
    a.key = "local_cwd/" + name;
    a.name = name;
    a.queue = queue;
    a.user = user;
    a.priority = priority;
    a.seq = ++seq_;
    a.submitted_ms = now_;
    for (int i = 0; i < replicas; ++i) a.replicas.push_back(ReplicaDemand{0, i, each});
    a.role_min = {min.value_or(replicas)};
    return a;
  }
  // Submits and runs a pass; returns the names started by it.
  std::vector<std::string> Submit(AppDemand a) {
    EXPECT_TRUE(adm_.Check(a).has_value()) << adm_.Check(a).error().message;
    adm_.Enqueue(std::move(a));
    return Pass();
  }
  // `queue`'s reasons and needs (as `torchx queue` lists them) are what Reason and PendingNeed
  // say of each app, one at a time; a view cut at `limit` is the whole view's front; and there
  // are `pending` apps.
  void ExpectDetailsAsReasons(size_t pending) {
    size_t seen = 0;
    auto cut = adm_.View(now_, 1);
    auto views = adm_.View(now_);
    ASSERT_EQ(cut.size(), views.size());
    for (size_t q = 0; q < views.size(); ++q) {
      const auto& view = views[q];
      ASSERT_EQ(view.pending_count, view.pending.size());
      auto reasons = adm_.Reasons(view, view.pending.size(), now_);
      ASSERT_EQ(reasons.size(), view.pending.size());
      for (size_t i = 0; i < reasons.size(); ++i) {
        const std::string& key = view.pending[i].key();
        EXPECT_EQ(reasons[i], adm_.Reason(key, now_, static_cast<int>(i))) << key;
        EXPECT_EQ(&view.pending[i].need(), adm_.PendingNeed(key)) << key;
      }
      EXPECT_EQ(adm_.Reasons(view, 1, now_).size(), std::min<size_t>(1, view.pending.size()));
      EXPECT_EQ(cut[q].pending_count, view.pending_count);
      std::vector<std::string> front = Keys(view.pending);
      front.resize(std::min<size_t>(1, front.size()));
      EXPECT_EQ(Keys(cut[q].pending), front);
      seen += reasons.size();
    }
    EXPECT_EQ(seen, pending);
  }
  static std::vector<std::string> Keys(const std::vector<Admission::PendingView>& pending) {
    std::vector<std::string> out;
    for (const auto& p : pending) out.push_back(p.key());
    return out;
  }
  std::vector<std::string> Pass() {
    std::vector<std::string> names;
    for (auto& s : adm_.Pass(now_)) {
      names.push_back(s.key.substr(s.key.find('/') + 1));
      for (auto& p : s.replicas) gpus_[names.back()].push_back(p.gpus);
    }
    return names;
  }
  std::vector<std::string> End(const std::string& name) {
    adm_.Remove("local_cwd/" + name);
    return Pass();
  }

  Admission adm_;
  uint64_t seq_ = 0;
  int64_t now_ = 1000000;
  std::map<std::string, std::vector<std::vector<int>>> gpus_;
};

TEST_F(AdmissionTest, TwoWholeBoxAppsRunOneAfterTheOther) {
  EXPECT_THAT(Submit(App("a", 1, {8, 0, 0})), ElementsAre("a"));
  EXPECT_THAT(Submit(App("b", 1, {8, 0, 0})), IsEmpty());
  EXPECT_TRUE(adm_.IsPending("local_cwd/b"));
  EXPECT_THAT(End("a"), ElementsAre("b"));
  EXPECT_THAT(gpus_["b"][0], ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST_F(AdmissionTest, AGangStartsWholeOrNotAtAll) {
  EXPECT_THAT(Submit(App("a", 3, {2, 0, 0})), ElementsAre("a"));
  EXPECT_THAT(Submit(App("b", 2, {2, 0, 0})), IsEmpty()) << "4 GPUs needed, 2 free";
  EXPECT_THAT(adm_.Reason("local_cwd/b", now_), HasSubstr("waiting for 4 GPUs in queue default: 2 free"));
  auto started = End("a");
  EXPECT_THAT(started, ElementsAre("b"));
  EXPECT_EQ(gpus_["b"].size(), 2u) << "both replicas in one pass";
}

TEST_F(AdmissionTest, WhatCanNeverFitIsRefused) {
  auto err = [&](const AppDemand& a) { return adm_.Check(a) ? std::string("accepted") : adm_.Check(a).error().message; };
  EXPECT_THAT(err(App("big", 1, {9, 0, 0})), HasSubstr("a replica needs 9 GPUs, more than this whole box has"));
  EXPECT_THAT(err(App("mem", 2, {0, 0, 300000})), HasSubstr("the app needs 600000 MB at once to start"));
  EXPECT_THAT(err(App("q", 1, {1, 0, 0}, "nope")), HasSubstr("queue `nope` does not exist on this box (queues: default)"));
  EXPECT_EQ(err(App("elastic", 4, {4, 0, 0}, "default", 1000, 0, 2)), "accepted") << "min_replicas 2 x 4 GPUs fits";
  Use({{"small", 1, 4, 2, std::nullopt}});
  EXPECT_THAT(err(App("capped", 1, {6, 0, 0}, "small")), HasSubstr("queue small allows 4 (max_gpus)"));
  EXPECT_THAT(err(App("peruser", 1, {3, 0, 0}, "small")), HasSubstr("allows 2 per user (max_gpus_per_user)"));
}

TEST_F(AdmissionTest, SwrrGivesWeightedQueuesTheirShareInOrder) {
  Use({{"qa", 3, std::nullopt, std::nullopt, std::nullopt}, {"qb", 1, std::nullopt, std::nullopt, std::nullopt}});
  EXPECT_THAT(Submit(App("blocker", 1, {8, 0, 0})), ElementsAre("blocker"));
  for (int i = 0; i < 12; ++i) {
    Submit(App("a" + std::to_string(i), 1, {8, 0, 0}, "qa"));
    Submit(App("b" + std::to_string(i), 1, {8, 0, 0}, "qb"));
  }
  std::string order;
  std::string running = "blocker";
  for (int i = 0; i < 16; ++i) {
    auto started = End(running);
    ASSERT_EQ(started.size(), 1u);
    running = started[0];
    order += running.substr(0, 1);
  }
  EXPECT_EQ(order, "aabaaabaaabaaaba");
}

TEST_F(AdmissionTest, SwrrChargesResourceUnitsNotStarts) {
  // Equal weights; qa starts 1-GPU apps, qb 4-GPU ones. Counting starts
  // would go a b a b (and the second b would not fit); charging GPUs gives
  // qa four starts per qb start, half the GPUs each.
  Use({{"qa", 1, std::nullopt, std::nullopt, std::nullopt}, {"qb", 1, std::nullopt, std::nullopt, std::nullopt}});
  EXPECT_THAT(Submit(App("blocker", 1, {8, 0, 0})), ElementsAre("blocker"));
  for (int i = 0; i < 10; ++i) Submit(App("a" + std::to_string(i), 1, {1, 0, 0}, "qa"));
  for (int i = 0; i < 3; ++i) Submit(App("b" + std::to_string(i), 1, {4, 0, 0}, "qb"));
  EXPECT_THAT(End("blocker"), ElementsAre("a0", "b0", "a1", "a2", "a3"));
}

TEST_F(AdmissionTest, ABigGangIsNotStarvedByAStreamOfSmallApps) {
  EXPECT_THAT(Submit(App("s0", 1, {1, 0, 0})), ElementsAre("s0"));
  EXPECT_THAT(Submit(App("s1", 1, {1, 0, 0})), ElementsAre("s1"));
  EXPECT_THAT(Submit(App("big", 1, {8, 0, 0})), IsEmpty());
  EXPECT_EQ(adm_.head(), "local_cwd/big");
  EXPECT_THAT(adm_.reserved_gpus(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  // Small apps keep coming; none starts while the big one is head.
  for (int i = 2; i < 6; ++i) EXPECT_THAT(Submit(App("s" + std::to_string(i), 1, {1, 0, 0})), IsEmpty());
  EXPECT_THAT(adm_.Reason("local_cwd/s2", now_), HasSubstr("(big, 8 GPUs reserved)"));
  EXPECT_THAT(adm_.Reason("local_cwd/big", now_), HasSubstr("next to start"));
  EXPECT_THAT(End("s0"), IsEmpty());
  EXPECT_THAT(End("s1"), ElementsAre("big"));
  EXPECT_THAT(End("big"), ElementsAre("s2", "s3", "s4", "s5"));
}

TEST_F(AdmissionTest, TheHeadStartsFirstThenTheOthers) {
  Submit(App("s0", 1, {4, 0, 0}));
  Submit(App("big", 1, {8, 0, 0}));
  Submit(App("s1", 1, {4, 0, 0}));
  EXPECT_THAT(End("s0"), ElementsAre("big"));
  EXPECT_THAT(End("big"), ElementsAre("s1"));
}

TEST_F(AdmissionTest, BackfillUsesOnlyWhatTheHeadDoesNotNeed) {
  // A holds GPUs 0-3 and 60 of 64 CPUs; head H needs 2 GPUs and 8 CPUs.
  EXPECT_THAT(Submit(App("a", 1, {4, 60, 0})), ElementsAre("a"));
  EXPECT_THAT(gpus_["a"][0], ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Submit(App("h", 1, {2, 8, 0})), IsEmpty());
  EXPECT_THAT(adm_.reserved_gpus(), ElementsAre(4, 5));
  EXPECT_THAT(Submit(App("j1", 1, {1, 2, 0})), ElementsAre("j1"));
  EXPECT_THAT(Submit(App("j2", 1, {1, 2, 0})), ElementsAre("j2"));
  EXPECT_THAT(Submit(App("j3", 1, {1, 0, 0})), IsEmpty());
  std::vector<int> backfilled = {gpus_["j1"][0][0], gpus_["j2"][0][0]};
  EXPECT_THAT(backfilled, ::testing::UnorderedElementsAre(6, 7));
  EXPECT_THAT(adm_.Reason("local_cwd/j3", now_), HasSubstr("(h, 2 GPUs, 8 CPUs reserved)"));
  ExpectDetailsAsReasons(2);  // h at the head, j3 behind it
  EXPECT_THAT(End("a"), ElementsAre("h", "j3"));
  EXPECT_THAT(gpus_["h"][0], ElementsAre(4, 5));
}

TEST_F(AdmissionTest, AReservationWaitsOnTheFewestAppsAndLeavesFreeGpusToBackfill) {
  EXPECT_THAT(Submit(App("a", 1, {6, 0, 0})), ElementsAre("a"));
  EXPECT_THAT(Submit(App("x", 1, {1, 0, 0})), ElementsAre("x"));
  // 1 GPU free; h needs 4: a's GPUs alone cover it, the free one stays open.
  EXPECT_THAT(Submit(App("h", 1, {4, 0, 0})), IsEmpty());
  for (int g : adm_.reserved_gpus()) EXPECT_NE(std::count(gpus_["a"][0].begin(), gpus_["a"][0].end(), g), 0) << g;
  EXPECT_THAT(Submit(App("j", 1, {1, 0, 0})), ElementsAre("j"));
  EXPECT_THAT(End("x"), IsEmpty()) << "x's GPU is not h's to wait for";
  EXPECT_THAT(End("a"), ElementsAre("h"));
}

TEST_F(AdmissionTest, BackfillLeavesTheHeadItsCpuAndMemory) {
  EXPECT_THAT(Submit(App("a", 1, {8, 0, 0})), ElementsAre("a"));
  EXPECT_THAT(Submit(App("h", 1, {8, 40, 0})), IsEmpty());
  // 64 CPUs are free, but while h waits others may use 64 - 40 = 24 in all.
  EXPECT_THAT(Submit(App("j1", 1, {0, 20, 0})), ElementsAre("j1"));
  EXPECT_THAT(Submit(App("j2", 1, {0, 20, 0})), IsEmpty());
  EXPECT_THAT(End("a"), ElementsAre("h"));
  EXPECT_THAT(End("j1"), ElementsAre("j2"));
}

AppDemand Limited(AppDemand a, int64_t max_duration_ms) {
  a.max_duration_ms = max_duration_ms;
  return a;
}
constexpr int64_t kMinute = 60 * 1000;

TEST_F(AdmissionTest, AnAppThatEndsBeforeTheHeadCanStartUsesItsReservedGpus) {
  // a holds 4 GPUs for at most an hour; x holds 3 with no limit. The head
  // needs 8: it waits on both, and x never ends as far as anyone knows.
  EXPECT_THAT(Submit(Limited(App("a", 1, {4, 0, 0}), 60 * kMinute)), ElementsAre("a"));
  EXPECT_THAT(Submit(App("x", 1, {3, 0, 0})), ElementsAre("x"));
  EXPECT_THAT(Submit(App("h", 1, {8, 0, 0})), IsEmpty());
  EXPECT_EQ(adm_.ShadowTime(now_), kNoEnd) << "x has no max_duration";
  EXPECT_THAT(Submit(Limited(App("short", 1, {1, 0, 0}), 10 * kMinute)), IsEmpty());
  // Now the head waits only on a, which is stopped at now + 60 min: an app
  // that ends by then may use what is reserved; one that would run past it,
  // or has no limit, may not.
  EXPECT_THAT(End("x"), ElementsAre("short"));
  EXPECT_EQ(adm_.ShadowTime(now_), now_ + 60 * kMinute);
  EXPECT_THAT(adm_.Reason("local_cwd/h", now_), HasSubstr("starts within 1h at the latest"));
  EXPECT_THAT(Submit(Limited(App("long", 1, {1, 0, 0}), 61 * kMinute)), IsEmpty());
  EXPECT_THAT(Submit(App("nolimit", 1, {1, 0, 0})), IsEmpty());
  EXPECT_THAT(adm_.Reason("local_cwd/nolimit", now_), HasSubstr("with -cfg max_duration=1h or less it could start"));
  ExpectDetailsAsReasons(3);  // the head with its shadow time, and two behind it
  EXPECT_THAT(Submit(Limited(App("fits", 1, {2, 0, 0}), 60 * kMinute)), ElementsAre("fits"));
  EXPECT_EQ(adm_.ShadowTime(now_), now_ + 60 * kMinute) << "what ends before it does not move it";
  EXPECT_THAT(End("a"), IsEmpty()) << "h still waits for short and fits, which are stopped by then";
  EXPECT_THAT(End("short"), IsEmpty());
  EXPECT_THAT(End("fits"), ElementsAre("h"));
}

TEST_F(AdmissionTest, TheShadowTimeWaitsForCpusReleasedInEndOrder) {
  // The head needs 62 of 64 CPUs: 4 are free, a holds 40 (ends in 2h), b 20
  // (ends in 1h). Backfill without a limit may take 64 - 62 = 2 CPUs.
  EXPECT_THAT(Submit(Limited(App("a", 1, {0, 40, 0}), 120 * kMinute)), ElementsAre("a"));
  EXPECT_THAT(Submit(Limited(App("b", 1, {0, 20, 0}), 60 * kMinute)), ElementsAre("b"));
  EXPECT_THAT(Submit(App("h", 1, {0, 62, 0})), IsEmpty());
  EXPECT_EQ(adm_.ShadowTime(now_), now_ + 120 * kMinute) << "b's 20 leave 24 free: a must go too";
  EXPECT_THAT(Submit(Limited(App("past", 1, {0, 4, 0}), 130 * kMinute)), IsEmpty());
  EXPECT_THAT(Submit(App("nolimit", 1, {0, 4, 0})), IsEmpty());
  EXPECT_THAT(Submit(Limited(App("j", 1, {0, 4, 0}), 90 * kMinute)), ElementsAre("j"));
}

TEST_F(AdmissionTest, AReservationPrefersTheHolderThatEndsFirst) {
  EXPECT_THAT(Submit(Limited(App("late", 1, {4, 0, 0}), 120 * kMinute)), ElementsAre("late"));
  EXPECT_THAT(Submit(Limited(App("soon", 1, {4, 0, 0}), 30 * kMinute)), ElementsAre("soon"));
  EXPECT_THAT(Submit(App("h", 1, {4, 0, 0})), IsEmpty());
  for (int g : adm_.reserved_gpus()) EXPECT_NE(std::count(gpus_["soon"][0].begin(), gpus_["soon"][0].end(), g), 0) << g;
  EXPECT_EQ(adm_.ShadowTime(now_), now_ + 30 * kMinute);
}

TEST_F(AdmissionTest, AnAdoptedAppsEndCountsFromItsStart) {
  adm_.Hold(Limited(App("adopted", 1, {8, 0, 0}), 60 * kMinute), {Placement{0, 0, {0, 1, 2, 3, 4, 5, 6, 7}, {8, 0, 0}}},
            now_ - 50 * kMinute);
  EXPECT_THAT(Submit(App("h", 1, {8, 0, 0})), IsEmpty());
  EXPECT_EQ(adm_.ShadowTime(now_), now_ + 10 * kMinute);
}

TEST_F(AdmissionTest, UsersWithLessRunningGoFirst) {
  Submit(App("alice-running", 1, {4, 0, 0}, "default", 1));
  Submit(App("blocker", 1, {4, 0, 0}, "default", 3));
  Submit(App("alice-next", 1, {4, 0, 0}, "default", 1));
  Submit(App("bob-next", 1, {4, 0, 0}, "default", 2));
  // alice-next is older and was the head while blocker ran, but alice holds
  // 4 GPUs and bob none: the head is picked again, and bob's goes first.
  EXPECT_THAT(End("blocker"), ElementsAre("bob-next"));
  auto view = adm_.View(now_);
  EXPECT_THAT(Keys(view[0].pending), ElementsAre("local_cwd/alice-next"));
}

TEST_F(AdmissionTest, AHigherPriorityOvertakesTheHeadThatWaitsAlready) {
  EXPECT_THAT(Submit(App("running", 1, {8, 0, 0})), ElementsAre("running"));
  EXPECT_THAT(Submit(App("low", 1, {8, 0, 0}, "default", 1000, 0)), IsEmpty());
  EXPECT_EQ(adm_.head(), "local_cwd/low");
  now_ += 200;
  EXPECT_THAT(Submit(App("high", 1, {8, 0, 0}, "default", 1001, 5)), IsEmpty());
  EXPECT_EQ(adm_.head(), "local_cwd/high");
  EXPECT_THAT(adm_.Reason("local_cwd/high", now_), HasSubstr("next to start"));
  EXPECT_THAT(End("running"), ElementsAre("high"));
  EXPECT_THAT(End("high"), ElementsAre("low"));
}

TEST_F(AdmissionTest, AgingLiftsALowPriorityAppOverNewerHighOnes) {
  EXPECT_THAT(Submit(App("running", 1, {8, 0, 0})), ElementsAre("running"));
  AppDemand old = App("old", 1, {8, 0, 0}, "default", 1000, 0);
  old.submitted_ms = now_ - 24 * 3600 * 1000;  // waited a day: +24
  EXPECT_THAT(Submit(old), IsEmpty());
  EXPECT_THAT(Submit(App("urgent", 1, {8, 0, 0}, "default", 1001, 20)), IsEmpty());
  EXPECT_EQ(adm_.head(), "local_cwd/old");
  EXPECT_THAT(End("running"), ElementsAre("old"));
}

TEST_F(AdmissionTest, DrfOrdersUsersWhenTheHeadIsChosen) {
  Submit(App("alice-running", 1, {4, 0, 0}, "default", 1));
  Submit(App("carol", 1, {4, 0, 0}, "default", 3));
  adm_.Enqueue(App("alice-next", 1, {4, 0, 0}, "default", 1));
  adm_.Enqueue(App("bob-next", 1, {4, 0, 0}, "default", 2));
  auto view = adm_.View(now_);
  EXPECT_THAT(Keys(view[0].pending), ElementsAre("local_cwd/bob-next", "local_cwd/alice-next"));
  EXPECT_THAT(End("carol"), ElementsAre("bob-next"));
}

TEST_F(AdmissionTest, PriorityAndAgeOrderAQueue) {
  Submit(App("blocker", 1, {8, 0, 0}));
  AppDemand two_hours = App("two-hours", 1, {8, 0, 0});
  two_hours.submitted_ms = now_ - 2 * 3600 * 1000;
  AppDemand six_hours = App("six-hours", 1, {8, 0, 0});
  six_hours.submitted_ms = now_ - 6 * 3600 * 1000;
  adm_.Enqueue(two_hours);
  adm_.Enqueue(six_hours);
  adm_.Enqueue(App("urgent", 1, {8, 0, 0}, "default", 1000, 5));
  // Each full hour waited adds 1: six hours beat priority 5, two do not.
  EXPECT_THAT(Keys(adm_.View(now_)[0].pending),
              ElementsAre("local_cwd/six-hours", "local_cwd/urgent", "local_cwd/two-hours"));
}

TEST_F(AdmissionTest, MinReplicasStartsAPartialGangAndGrowsIt) {
  Submit(App("a", 1, {4, 0, 0}));
  auto started = Submit(App("elastic", 4, {2, 0, 0}, "default", 1000, 0, 1));
  EXPECT_THAT(started, ElementsAre("elastic")) << "the gang and its growth in one start";
  EXPECT_EQ(gpus_["elastic"].size(), 2u) << "min 1, and a second fits at once";
  EXPECT_THAT(End("a"), ElementsAre("elastic"));
  EXPECT_EQ(gpus_["elastic"].size(), 4u);
}

TEST_F(AdmissionTest, AScaledAwayReplicaFreesWhatItHoldsAndComesBackOnlyAsGrowth) {
  EXPECT_THAT(Submit(App("elastic", 4, {2, 1, 0}, "default", 1000, 0, 1)), ElementsAre("elastic"));
  EXPECT_EQ(adm_.free().gpu, 0);
  EXPECT_THAT(Submit(App("other", 1, {6, 0, 0}, "default", 2000)), IsEmpty());
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(adm_.ReleaseReplica("local_cwd/elastic", 0, i));
  EXPECT_FALSE(adm_.ReleaseReplica("local_cwd/elastic", 0, 3)) << "it holds nothing any more";
  EXPECT_EQ(adm_.free().gpu, 6);
  EXPECT_EQ(adm_.free().cpu, 64 - 1);
  EXPECT_THAT(Pass(), ElementsAre("other")) << "released GPUs go to the app that waits, never back as growth";
  // Back in scale: growth, placed only once GPUs are free again, never on another app's.
  EXPECT_TRUE(adm_.WantReplica("local_cwd/elastic", 0, 1));
  EXPECT_FALSE(adm_.WantReplica("local_cwd/elastic", 0, 1)) << "it waits already";
  EXPECT_FALSE(adm_.WantReplica("local_cwd/elastic", 0, 0)) << "it holds its GPUs";
  EXPECT_THAT(Pass(), IsEmpty());
  auto holders = adm_.GpuHolders();
  EXPECT_EQ(std::count(holders.begin(), holders.end(), "local_cwd/other"), 6);
  std::vector<int> others;
  for (int g = 0; g < 8; ++g) {
    if (holders[static_cast<size_t>(g)] == "local_cwd/other") others.push_back(g);
  }
  EXPECT_THAT(End("other"), ElementsAre("elastic"));
  ASSERT_EQ(gpus_["elastic"].size(), 5u) << "its 4 first placements, and replica 1's again";
  for (int g : gpus_["elastic"].back()) EXPECT_NE(std::find(others.begin(), others.end(), g), others.end());
  EXPECT_EQ(adm_.free().gpu, 4) << "replicas 2 and 3 stay away";
  End("elastic");
  EXPECT_EQ(adm_.free().gpu, 8);
  EXPECT_EQ(adm_.free().cpu, 64);
}

TEST_F(AdmissionTest, QueueCapsHoldAppsBackWithoutBlockingOthers) {
  Use({{"small", 1, 4, std::nullopt, std::nullopt}, {"other", 1, std::nullopt, 2, std::nullopt}});
  EXPECT_THAT(Submit(App("s1", 1, {4, 0, 0}, "small")), ElementsAre("s1"));
  EXPECT_THAT(Submit(App("s2", 1, {1, 0, 0}, "small")), IsEmpty());
  EXPECT_THAT(adm_.Reason("local_cwd/s2", now_), HasSubstr("queue small is at its cap: 4 of max_gpus=4 in use"));
  EXPECT_THAT(Submit(App("o1", 1, {2, 0, 0}, "other", 7)), ElementsAre("o1"));
  EXPECT_THAT(Submit(App("o2", 1, {1, 0, 0}, "other", 7)), IsEmpty());
  EXPECT_THAT(adm_.Reason("local_cwd/o2", now_), HasSubstr("user 7 is at queue other's cap"));
  EXPECT_THAT(Submit(App("o3", 1, {1, 0, 0}, "other", 8)), ElementsAre("o3")) << "another user";
  EXPECT_THAT(End("s1"), ElementsAre("s2"));
}

TEST_F(AdmissionTest, HeldAppsAfterARestartKeepTheirGpus) {
  AppDemand a = App("adopted", 2, {2, 0, 0});
  adm_.Hold(a, {Placement{0, 0, {4, 5}, {2, 0, 0}}, Placement{0, 1, {6, 7}, {2, 0, 0}}}, now_);
  EXPECT_THAT(Submit(App("next", 1, {2, 0, 0})), ElementsAre("next"));
  EXPECT_THAT(gpus_["next"][0], ElementsAre(0, 2));
  EXPECT_EQ(adm_.free().gpu, 2);
  auto holders = adm_.GpuHolders();
  EXPECT_EQ(holders[5], "local_cwd/adopted");
}

TEST_F(AdmissionTest, ExcludedGpusAreNeverHandedOut) {
  BoxCapacity box = F8Box();
  ASSERT_TRUE(ExcludeGpus(box.topology, "5").has_value());
  adm_ = Admission(box, {});
  EXPECT_THAT(Submit(App("pair", 1, {2, 0, 0})), ElementsAre("pair"));
  EXPECT_THAT(Submit(App("pair2", 1, {2, 0, 0})), ElementsAre("pair2"));
  EXPECT_THAT(Submit(App("pair3", 1, {2, 0, 0})), ElementsAre("pair3"));
  EXPECT_THAT(gpus_["pair3"][0], ElementsAre(6, 7)) << "an intact pair, not 4 with a dead partner";
  EXPECT_THAT(Submit(App("one", 1, {1, 0, 0})), ElementsAre("one"));
  EXPECT_THAT(gpus_["one"][0], ElementsAre(4));
  EXPECT_THAT(Submit(App("more", 1, {1, 0, 0})), IsEmpty());
}

TEST_F(AdmissionTest, GpuSetsOfLiveAppsAreAlwaysDisjoint) {
  std::map<std::string, std::vector<int>> live;
  unsigned rng = 12345;
  auto next = [&] { return rng = rng * 1103515245 + 12345, (rng >> 16) & 0x7fff; };
  std::vector<std::string> names;
  for (int i = 0; i < 400; ++i) {
    if (next() % 3 == 0 && !names.empty()) {
      std::string victim = names[next() % names.size()];
      names.erase(std::find(names.begin(), names.end(), victim));
      adm_.Remove("local_cwd/" + victim);
      live.erase(victim);
    } else {
      int sizes[] = {1, 2, 4};
      std::string name = "app" + std::to_string(i);
      names.push_back(name);
      adm_.Enqueue(App(name, 1 + next() % 2, {sizes[next() % 3], 0, 0}));
    }
    for (auto& s : adm_.Pass(now_)) {
      for (auto& p : s.replicas) {
        auto& set = live[s.key.substr(s.key.find('/') + 1)];
        set.insert(set.end(), p.gpus.begin(), p.gpus.end());
      }
    }
    std::set<int> seen;
    for (auto& [name, set] : live) {
      for (int g : set) ASSERT_TRUE(seen.insert(g).second) << "GPU " << g << " twice at step " << i;
    }
    ASSERT_EQ(static_cast<int>(seen.size()), 8 - adm_.free().gpu);
  }
}

TEST(QueueSpecTest, ParsesFlagsAndRefusesNonsense) {
  auto q = ParseQueueSpec("big:weight=3,max_gpus=8,max_gpus_per_user=4");
  ASSERT_TRUE(q.has_value()) << q.error().message;
  EXPECT_EQ(q->name, "big");
  EXPECT_EQ(q->weight, 3);
  EXPECT_EQ(q->max_gpus, 8);
  EXPECT_EQ(q->max_gpus_per_user, 4);
  EXPECT_EQ(ParseQueueSpec("plain")->weight, 1);
  EXPECT_THAT(ParseQueueSpec("Big").error().message, HasSubstr("queue name `Big`"));
  EXPECT_THAT(ParseQueueSpec("a:weight=0").error().message, HasSubstr("weight=0: expected a whole number >= 1"));
  EXPECT_THAT(ParseQueueSpec("a:colour=red").error().message, HasSubstr("unknown queue setting `colour`"));
  EXPECT_THAT(ParseQueueSpec("a:weight").error().message, HasSubstr("not key=value"));
}

TEST_F(AdmissionTest, AGpuOutOfServiceIsNeverPlacedAndItsHolderDoesNotFreeIt) {
  EXPECT_THAT(Submit(App("a", 1, {2, 0, 0})), ElementsAre("a"));
  ASSERT_EQ(gpus_["a"].size(), 1u);
  int held = gpus_["a"][0][1];  // one of a's two GPUs
  ASSERT_TRUE(adm_.SetGpuUsable(held, false, "reported XID 79: fell off the bus"));
  EXPECT_FALSE(adm_.box().topology.gpus[static_cast<size_t>(held)].usable);
  EXPECT_EQ(adm_.box().topology.gpus[static_cast<size_t>(held)].unusable_reason, "reported XID 79: fell off the bus");
  EXPECT_EQ(adm_.total().gpu, 7);
  EXPECT_EQ(adm_.free().gpu, 6) << "a still holds both of its GPUs";
  // A free GPU drained: one less free at once.
  int spare = -1;
  for (int g = 0; g < 8 && spare < 0; ++g) {
    if (adm_.GpuHolders()[static_cast<size_t>(g)].empty()) spare = g;
  }
  ASSERT_TRUE(adm_.SetGpuUsable(spare, false, "drained by root"));
  EXPECT_EQ(adm_.total().gpu, 6);
  EXPECT_EQ(adm_.free().gpu, 5);
  EXPECT_FALSE(adm_.SetGpuUsable(8, false, "x")) << "no such GPU";
  // b takes the five free GPUs, never the two out of service.
  EXPECT_THAT(Submit(App("b", 1, {5, 0, 0})), ElementsAre("b"));
  for (int g : gpus_["b"][0]) {
    EXPECT_NE(g, held);
    EXPECT_NE(g, spare);
  }
  EXPECT_THAT(End("b"), IsEmpty());
  EXPECT_THAT(End("a"), IsEmpty());
  EXPECT_EQ(adm_.free().gpu, 6) << "a's drained GPU is not freed with it";
  EXPECT_THAT(Submit(App("c", 1, {6, 0, 0})), ElementsAre("c"));
  EXPECT_THAT(gpus_["c"][0], ::testing::Not(::testing::Contains(held)));
  EXPECT_THAT(gpus_["c"][0], ::testing::Not(::testing::Contains(spare)));
  EXPECT_THAT(End("c"), IsEmpty());
  // Back in service: free again, and placed.
  ASSERT_TRUE(adm_.SetGpuUsable(held, true, ""));
  ASSERT_TRUE(adm_.SetGpuUsable(spare, true, ""));
  EXPECT_EQ(adm_.total().gpu, 8);
  EXPECT_EQ(adm_.free().gpu, 8);
  EXPECT_TRUE(adm_.box().topology.gpus[static_cast<size_t>(held)].unusable_reason.empty());
  EXPECT_THAT(Submit(App("d", 1, {8, 0, 0})), ElementsAre("d"));
}

TEST_F(AdmissionTest, AGpuBackInServiceWhileHeldIsFreedByItsHolder) {
  EXPECT_THAT(Submit(App("a", 1, {8, 0, 0})), ElementsAre("a"));
  ASSERT_TRUE(adm_.SetGpuUsable(3, false, "drained"));
  EXPECT_EQ(adm_.total().gpu, 7);
  EXPECT_EQ(adm_.free().gpu, 0);
  ASSERT_TRUE(adm_.SetGpuUsable(3, true, ""));
  EXPECT_EQ(adm_.total().gpu, 8);
  EXPECT_THAT(End("a"), IsEmpty());
  EXPECT_EQ(adm_.free().gpu, 8);
}

TEST_F(AdmissionTest, AnAppLargerThanTheGpusInServiceWaitsWithoutReservingAndOthersGoAhead) {
  EXPECT_THAT(Submit(App("a", 1, {2, 0, 0})), ElementsAre("a"));
  EXPECT_THAT(Submit(App("big", 1, {8, 0, 0})), IsEmpty());
  EXPECT_EQ(adm_.head(), "local_cwd/big");
  // A GPU drained: big can no longer start on this box, so it holds nothing back.
  int spare = -1;
  for (int g = 0; g < 8 && spare < 0; ++g) {
    if (adm_.GpuHolders()[static_cast<size_t>(g)].empty()) spare = g;
  }
  ASSERT_TRUE(adm_.SetGpuUsable(spare, false, "drained by root"));
  EXPECT_THAT(Submit(App("c", 1, {2, 0, 0})), ElementsAre("c"));
  EXPECT_TRUE(adm_.head().empty());
  EXPECT_THAT(adm_.Reason("local_cwd/big", now_),
              HasSubstr("waiting: it needs 8 GPUs and this box has 7 GPUs in service (1 GPU drained or lost"));
  // Back in service: big is the head again and starts once the others end.
  ASSERT_TRUE(adm_.SetGpuUsable(spare, true, ""));
  EXPECT_THAT(End("c"), IsEmpty());
  EXPECT_EQ(adm_.head(), "local_cwd/big");
  EXPECT_THAT(End("a"), ElementsAre("big"));
}

}  // namespace
}  // namespace torchxd::admission
