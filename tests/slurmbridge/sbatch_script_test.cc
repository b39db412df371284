#include "slurmbridge/sbatch_script.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/text.h"
#include "slurmbridge/squeue.h"

namespace torchxd::slurmbridge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

core::AppDef TwoRoles() {
  core::AppDef app;
  app.name = "trainer";
  core::Role a;
  a.name = "master";
  a.entrypoint = "python";
  a.args = {"-m", "train", "--out", "/tmp/${app_id}/x y", "--rank0", "$${${rank0_env}}"};
  a.resource.cpu = 4;
  a.resource.mem_mb = 2048;
  a.resource.gpu = 2;
  a.max_retries = 3;
  a.env = {{"FOO", "bar"}};
  core::Role b = a;
  b.name = "worker";
  b.num_replicas = 2;
  b.max_retries = 1;
  b.args = {"--replica", "${replica_id}"};
  app.roles = {a, b};
  return app;
}

TEST(SbatchScript, OneHetGroupPerReplicaInRoleOrder) {
  SbatchInput in;
  in.session_id = "sid";
  auto req = AppDefToSbatch(TwoRoles(), {}, in);
  ASSERT_TRUE(req) << req.error().message;
  EXPECT_EQ(req->replicas, (std::vector<std::string>{"master-0", "worker-0", "worker-1"}));
  EXPECT_EQ(req->max_retries, 1);  // the smallest
  EXPECT_THAT(req->script, HasSubstr("#SBATCH --job-name=master-0 --requeue --ntasks-per-node=1 --cpus-per-task=4 "
                                     "--mem=2048 --gpus-per-task=2 --ntasks=1\n#SBATCH hetjob\n#SBATCH --job-name=worker-0"));
  EXPECT_THAT(req->script, HasSubstr("export TORCHX_MAX_RETRIES=1\n"));
  // ${app_id} becomes the job id in the shell, the rest quoted as TorchX's shlex.quote does.
  EXPECT_THAT(req->script, HasSubstr("--out /tmp/\"$SLURM_JOB_ID\"'/x y'"));
  EXPECT_THAT(req->script, HasSubstr("--replica 1\n"));
  EXPECT_THAT(req->script, HasSubstr("'${SLURM_JOB_NODELIST_HET_GROUP_0}'"));
  EXPECT_THAT(req->script, HasSubstr("--output=slurm-\"$SLURM_JOB_ID\"-worker-1.out --error=slurm-\"$SLURM_JOB_ID\"-worker-1.err"));
  EXPECT_THAT(req->script, HasSubstr("FOO=bar,TORCHX_INTERNAL_SESSION_ID=sid,TORCHX_JOB_ID=slurm://torchx/"));
  EXPECT_THAT(req->script, HasSubstr(" :\\\n     --output=slurm-\"$SLURM_JOB_ID\"-worker-0.out"));
  EXPECT_EQ(req->cmd, (std::vector<std::string>{"sbatch", "--parsable"}));
}

TEST(SbatchScript, RunOptionsGoWhereTorchXPutsThem) {
  core::Cfg cfg = {{"partition", std::string("gpu")}, {"time", std::string("1:00:00")},
                   {"comment", std::string("a b")}, {"constraint", std::string("a100")},
                   {"mail-user", std::string("u@x")}, {"mail-type", std::string("END")},
                   {"account", std::string("acct")}, {"qos", std::string("high")},
                   {"exclusive", true}, {"nomem", true}, {"job_dir", std::string("/scratch/j")}};
  SbatchInput in;
  in.gpus_per_node = true;
  auto req = AppDefToSbatch(TwoRoles(), SlurmOptionsFromCfg(cfg), in);
  ASSERT_TRUE(req) << req.error().message;
  EXPECT_EQ(req->cmd, (std::vector<std::string>{"sbatch", "--parsable", "--comment=a b", "--mail-user=u@x",
                                                "--mail-type=END", "--account=acct"}));
  EXPECT_THAT(req->script, HasSubstr("--requeue --partition=gpu --time=1:00:00 --constraint=a100 --qos=high "
                                     "--exclusive --ntasks-per-node=1 --cpus-per-task=4 --gpus-per-node=2\n"));
  EXPECT_THAT(req->script, Not(HasSubstr("--mem=")));
  EXPECT_THAT(req->script, HasSubstr("# Run with: sbatch --parsable '--comment=a b'"));
  EXPECT_EQ(req->job_dir, "/scratch/j");
}

TEST(SbatchScript, ASmallMemoryPartitionAsksNoMemory) {
  SbatchInput in;
  in.small_memory_partition = true;
  auto req = AppDefToSbatch(TwoRoles(), {}, in);
  ASSERT_TRUE(req);
  EXPECT_THAT(req->script, Not(HasSubstr("--mem=")));
}

TEST(SbatchScript, AnEnvValueExportCannotCarryIsRefused) {
  core::AppDef app = TwoRoles();
  app.roles[1].env["LIST"] = "a,b";
  auto req = AppDefToSbatch(app, {}, {});
  ASSERT_FALSE(req);
  EXPECT_THAT(req.error().message, HasSubstr("role worker: env LIST"));
  EXPECT_THAT(req.error().message, HasSubstr("','"));
}

TEST(SbatchScript, NoReplicasIsRefused) {
  core::AppDef app = TwoRoles();
  for (auto& r : app.roles) r.num_replicas = 0;
  EXPECT_FALSE(AppDefToSbatch(app, {}, {}));
}

TEST(SbatchScript, VersionAndPartitionProbes) {
  EXPECT_EQ(ParseSlurmVersion("slurm 22.05.8\n"), (std::pair{22, 5}));
  EXPECT_EQ(ParseSlurmVersion("slurm 24.11.0 rev1"), (std::pair{24, 11}));
  EXPECT_FALSE(ParseSlurmVersion("slurm"));
  EXPECT_FALSE(ParseSlurmVersion("slurm x.y"));
  EXPECT_FALSE(UsesGpusPerNode({24, 5}));
  EXPECT_TRUE(UsesGpusPerNode({24, 11}));
  EXPECT_TRUE(UsesGpusPerNode({25, 0}));
  std::string sinfo = "PARTITION,MEMORY\ndebug*,16000\nsmall,1000+\n";
  EXPECT_EQ(PartitionMemoryMb(sinfo, std::nullopt), 16000);
  EXPECT_EQ(PartitionMemoryMb(sinfo, "small"), 1000);
  EXPECT_EQ(PartitionMemoryMb(sinfo, "none"), std::nullopt);
  EXPECT_EQ(ReplicaLogName("12", "trainer-0", true), "slurm-12-trainer-0.err");
}

// A squeue line: the fields of SqueueFormat, each followed by the separator.
std::string Line(const std::vector<std::string>& fields) {
  std::string out;
  for (const auto& f : fields) out += f + kFieldEnd;
  return out + "\n";
}

TEST(Squeue, ReadsHetComponentsAndPlainJobs) {
  EXPECT_THAT(SqueueFormat(), ::testing::StartsWith(std::string("JobID:") + kFieldEnd + ",HetJobID:"));
  std::string text =
      Line({"3", "3", "0", "FAILED", "NonZeroExitCode", "15", "36608", "node1", "alice", "S", "B", "E", "a-0", "0", "/w"}) +
      Line({"4", "3", "1", "FAILED", "NonZeroExitCode", "768", "36608", "node2", "alice", "S", "B", "E", "b|c-0", "2", "/w d"}) +
      Line({"9", "0", "N/A", "PENDING", "Resources", "0", "0", "", "bob", "S", "N/A", "N/A", "solo", "x", "/"}) +
      "garbage\n" +
      Line({"x", "0", "0", "PENDING", "None", "0", "0", "", "bob", "S", "N/A", "N/A", "bad id", "0", "/"}) +
      Line({"5", "0", "0", "PENDING", "None", "0", "0", "", "bob", "S", "N/A", "N/A", "short"});
  auto jobs = ByJob(ReadSqueue(text));
  ASSERT_EQ(jobs.size(), 2u);
  ASSERT_EQ(jobs["3"].size(), 2u);
  EXPECT_EQ(jobs["3"][1].offset, 1);
  EXPECT_EQ(jobs["3"][1].name, "b|c-0");
  EXPECT_EQ(jobs["3"][1].work_dir, "/w d");
  EXPECT_EQ(jobs["3"][1].restarts, 2);
  EXPECT_EQ(jobs["3"][0].restarts, 0);
  EXPECT_EQ(jobs["9"][0].restarts, std::nullopt) << "not a number: unknown";
  EXPECT_EQ(DecodeWaitStatus(*jobs["3"][1].derived_status).exit_code, 3);
  EXPECT_EQ(DecodeWaitStatus(*jobs["3"][0].derived_status).signal, 15);
  EXPECT_EQ(ReplicaWaitStatus(jobs["3"][1]).exit_code, 3);
  EXPECT_EQ(jobs["9"][0].offset, 0);
  EXPECT_EQ(jobs["9"][0].reason, "Resources");
  EXPECT_EQ(ReadSqueue(text, 1).size(), 1u);
}

TEST(Sacct, ReadsEndedComponentsNotSteps) {
  auto sep = std::string(1, kFieldEnd);
  auto line = [&](std::vector<std::string> f) { return ::torchxd::core::Join(f, sep) + "\n"; };
  std::string text = line({"12+0", "COMPLETED", "0:0", "0:0", "n1", "alice", "trainer-0", "/w"}) +
                     line({"12+0.batch", "COMPLETED", "0:0", "", "n1", "", "batch", ""}) +
                     line({"12+1", "CANCELLED by 1000", "0:15", "3:0", "n2", "alice", "trainer-1", "/w"}) +
                     line({"12+1.0", "FAILED", "3:0", "", "n2", "", "bash", ""}) +
                     line({"13", "FAILED", "1:0", "0:9", "n1", "bob", "solo", "/x|y"}) +
                     line({"x", "FAILED", "1:0", "0:9", "n1", "bob", "bad", "/"}) + "short\n";
  auto jobs = ByJob(ReadSacct(text));
  ASSERT_EQ(jobs.size(), 2u);
  ASSERT_EQ(jobs["12"].size(), 2u);
  EXPECT_EQ(jobs["12"][1].state, "CANCELLED");
  EXPECT_EQ(jobs["12"][1].offset, 1);
  EXPECT_EQ(DecodeWaitStatus(*jobs["12"][1].derived_status).exit_code, 3);
  EXPECT_EQ(DecodeWaitStatus(*jobs["13"][0].derived_status).signal, 9);
  EXPECT_EQ(jobs["13"][0].work_dir, "/x|y");
  EXPECT_TRUE(AccountingOff("sacct: error: Slurm accounting storage is disabled"));
}

TEST(Squeue, AReplicaWhoseStepNeverRanEndsWithItsBatchScriptsCode) {
  SlurmComponent c;
  EXPECT_FALSE(ReplicaWaitStatus(c).exit_code);
  c.status = 1 << 8;  // srun could not reach slurmctld: no step, DerivedEC 0
  c.derived_status = 0;
  EXPECT_EQ(ReplicaWaitStatus(c).exit_code, 1);
  c.derived_status = 9;  // the task's signal wins over the script's code
  EXPECT_EQ(ReplicaWaitStatus(c).signal, 9);
  EXPECT_FALSE(ReplicaWaitStatus(c).exit_code);
  c.status = 0;
  c.derived_status = 0;
  EXPECT_EQ(ReplicaWaitStatus(c).exit_code, 0);
  c.status.reset();
  c.derived_status = 3 << 8;
  EXPECT_EQ(ReplicaWaitStatus(c).exit_code, 3);
}

TEST(Squeue, StatesAndNames) {
  EXPECT_EQ(AppStateFromSlurm("CANCELLED+"), core::AppState::kCancelled);
  EXPECT_EQ(AppStateFromSlurm("COMPLETED"), core::AppState::kSucceeded);
  EXPECT_EQ(AppStateFromSlurm("TIMEOUT"), core::AppState::kFailed);
  EXPECT_EQ(AppStateFromSlurm("REQUEUED"), core::AppState::kPending);
  EXPECT_EQ(AppStateFromSlurm("WHATEVER"), core::AppState::kUnknown);
  EXPECT_EQ(ReplicaOfName("my-role-12"), (std::pair<std::string, int>{"my-role", 12}));
  EXPECT_FALSE(ReplicaOfName("role"));
  EXPECT_FALSE(ReplicaOfName("-1"));
  EXPECT_FALSE(ReplicaOfName("role-x"));
  EXPECT_EQ(ReasonText("None"), "");
  EXPECT_EQ(ReasonText("PartitionDown"), "PartitionDown: its partition is DOWN");
  EXPECT_EQ(ReasonText("SomethingNew"), "SomethingNew");
  EXPECT_TRUE(NoneKnown("slurm_load_jobs error: Invalid job id specified\n"));
  auto a = SlurmTimeMs("2026-11-28T04:56:30");
  auto b = SlurmTimeMs("2026-11-28T04:56:31");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*b - *a, 1000);
  EXPECT_FALSE(SlurmTimeMs("N/A"));
  EXPECT_FALSE(SlurmTimeMs("Unknown"));
  EXPECT_FALSE(SlurmTimeMs("2026-11-28T04:56:30x"));
}

}  // namespace
}  // namespace torchxd::slurmbridge
