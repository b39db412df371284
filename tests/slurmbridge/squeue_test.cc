#include "slurmbridge/squeue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torchxd::slurmbridge {
namespace {

using ::testing::HasSubstr;

SlurmComponent Group(const std::string& user, const std::string& name, int offset) {
  SlurmComponent c;
  c.job_id = "4242";
  c.offset = offset;
  c.user = user;
  c.name = name;
  return c;
}

// sbatch's printed id is taken only for the job the submit made: the caller's,
// its het groups named as the app's replicas, in order.
TEST(JobMismatchTest, OnlyTheCallersJobNamedAsTheAppIsTheSubmitsJob) {
  std::vector<std::string> replicas = {"trainer-0", "trainer-1"};
  EXPECT_EQ(JobMismatch({Group("alice", "trainer-0", 0), Group("alice", "trainer-1", 1)}, "alice", replicas), "");
  EXPECT_EQ(JobMismatch({Group("alice", "trainer-0", 0), Group("alice", "trainer-1", 1)}, "bob", replicas),
            "it is alice's job, not bob's");
  EXPECT_EQ(JobMismatch({Group("bob", "sh-0", 0)}, "bob", replicas),
            "its het groups are named sh-0, this app's trainer-0,trainer-1");
  EXPECT_THAT(JobMismatch({Group("bob", "trainer-1", 0), Group("bob", "trainer-0", 1)}, "bob", replicas),
              HasSubstr("named trainer-1,trainer-0"));
  EXPECT_EQ(JobMismatch({}, "bob", replicas), "Slurm holds no such job");
}

// What Slurm 22.05 keeps of a het job sbatch refused ("Requested node
// configuration is not available"): its first group, FAILED BadConstraints,
// started and ended the second it was submitted. Not a job that ran and failed.
TEST(RejectedAtSubmitTest, OnlyAJobRefusedTheMomentItWasSubmitted) {
  SlurmComponent c = Group("alice", "sh-0", 0);
  c.state = "FAILED";
  c.reason = "BadConstraints";
  c.submit_time = c.start_time = c.end_time = "2026-12-07T17:44:23";
  EXPECT_TRUE(RejectedAtSubmit({c}));
  SlurmComponent ran = c;
  ran.end_time = "2026-12-07T17:44:25";
  EXPECT_FALSE(RejectedAtSubmit({ran}));
  SlurmComponent failed = c;
  failed.reason = "NonZeroExitCode";
  EXPECT_FALSE(RejectedAtSubmit({failed}));
  SlurmComponent waiting = c;
  waiting.state = "PENDING";
  EXPECT_FALSE(RejectedAtSubmit({waiting}));
  EXPECT_FALSE(RejectedAtSubmit({c, ran}));
  EXPECT_FALSE(RejectedAtSubmit({}));
}

}  // namespace
}  // namespace torchxd::slurmbridge
