#include "core/replica_request.h"

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

AppDef TwoRoleApp() {
  Role a;
  a.name = "trainer";
  a.entrypoint = "train";
  a.args = {"--rank", "${replica_id}", "--root", "${img_root}", "--host", "$${rank0_env}"};
  a.env = {{"OUT", "${app_id}/${replica_id}"}, {"PATH", "${img_root}/bin"},
           {"PYTHONUNBUFFERED", "0"}, {"TORCHX_RANK0_HOST", "user-set"}};
  a.num_replicas = 2;
  Role b;
  b.name = "ps";
  b.entrypoint = "ps";
  return AppDef{"app", {a, b}, {}};
}

// One role "r" running "e", of `replicas` replicas, and nothing else.
AppDef OneRoleApp(int replicas) {
  Role r;
  r.name = "r";
  r.entrypoint = "e";
  r.num_replicas = replicas;
  return AppDef{"a", {r}, {}};
}

LocalAppContext Context(bool prepend_cwd) {
  LocalAppContext ctx;
  ctx.scheduler = "local_cwd";
  ctx.session = "torchx";
  ctx.app_id = "app-x1";
  ctx.session_id = "sid";
  ctx.app_log_dir = "/logs/torchx/app-x1";
  ctx.prepend_cwd = prepend_cwd;
  ctx.client_env = {{"HOME", "/home/u"}, {"PATH", ":/usr/bin:/bin:"}, {"OUT", "client"}};
  ctx.roles = {{"/work", "/work"}, {"/img", "/img"}};
  return ctx;
}

TEST(ReplicaRequestTest, ComposesEnvLikeTorchxLocalScheduler) {
  auto reqs = BuildReplicaRequests(TwoRoleApp(), Context(false));
  ASSERT_EQ(reqs.size(), 3u);
  const auto& r1 = reqs[1];
  auto env1 = r1.Environment();
  auto env2 = reqs[2].Environment();
  EXPECT_EQ(r1.role, "trainer");
  EXPECT_EQ(r1.replica_id, 1);
  EXPECT_EQ(r1.args, (std::vector<std::string>{"--rank", "1", "--root", "/work", "--host",
                                               "${rank0_env}"}));
  EXPECT_EQ(r1.cwd, "/work");
  EXPECT_EQ(r1.log_dir, "/logs/torchx/app-x1/trainer/1");
  EXPECT_EQ(env1.at("HOME"), "/home/u");           // client env inherited
  EXPECT_EQ(env1.at("OUT"), "app-x1/1");           // role env beats client env
  EXPECT_EQ(env1.at("TORCHX_RANK0_HOST"), "localhost");  // overwritten
  EXPECT_EQ(env1.at("TORCHX_JOB_ID"), "local_cwd://torchx/app-x1");
  EXPECT_EQ(env1.at("TORCHX_INTERNAL_SESSION_ID"), "sid");
  EXPECT_EQ(env1.at("TORCHELASTIC_ERROR_FILE"), "/logs/torchx/app-x1/trainer/1/error.json");
  EXPECT_EQ(env1.at("PET_LOG_DIR"), "/logs/torchx/app-x1/torchelastic/trainer");
  EXPECT_EQ(env1.at("PYTHONUNBUFFERED"), "0");     // only set where unset
  EXPECT_EQ(env1.at("PATH"), "/work/bin:/work:/usr/bin:/bin");
  EXPECT_EQ(env2.at("PYTHONUNBUFFERED"), "x");
  EXPECT_EQ(env2.at("PATH"), "/img:/usr/bin:/bin");
  EXPECT_EQ(reqs[2].cwd, "/img");
}

TEST(ReplicaRequestTest, PrependCwdPutsTheCwdFirst) {
  auto reqs = BuildReplicaRequests(TwoRoleApp(), Context(true));
  EXPECT_EQ(reqs[0].env.at("PATH"), "/work:/work/bin:/usr/bin:/bin");
}

// The client's environment is one copy for all replicas; each holds only what it sets over it.
TEST(ReplicaRequestTest, ReplicasShareTheInheritedEnvironment) {
  auto reqs = BuildReplicaRequests(TwoRoleApp(), Context(false));
  ASSERT_EQ(reqs.size(), 3u);
  ASSERT_TRUE(reqs[0].inherited);
  for (const auto& r : reqs) EXPECT_EQ(r.inherited.get(), reqs[0].inherited.get());
  EXPECT_EQ(reqs[0].env.count("HOME"), 0u) << "inherited, not copied";
  std::string walked;
  reqs[1].ForEachVariable([&](const std::string& k, const std::string&) { walked += k + ","; });
  std::string built;
  for (const auto& [k, v] : reqs[1].Environment()) built += k + ",";
  EXPECT_EQ(walked, built) << "each variable once, in name order";
  EXPECT_GT(reqs[1].ExpandedBytes(), reqs[1].inherited->size());
}

// A role's variables that name no replica_id are one copy its replicas share;
// one that does is each replica's own, and it wins over both layers below.
TEST(ReplicaRequestTest, ARolesReplicasShareItsVariablesThatNameNoReplicaId) {
  auto reqs = BuildReplicaRequests(TwoRoleApp(), Context(false));
  ASSERT_EQ(reqs.size(), 3u);
  ASSERT_TRUE(reqs[0].role_env);
  EXPECT_EQ(reqs[0].role_env.get(), reqs[1].role_env.get());
  EXPECT_NE(reqs[0].role_env.get(), reqs[2].role_env.get()) << "one copy per role";
  EXPECT_EQ(reqs[0].role_env->at("PYTHONUNBUFFERED"), "0");
  EXPECT_EQ(reqs[0].role_env->at("TORCHX_JOB_ID"), "local_cwd://torchx/app-x1");
  EXPECT_EQ(reqs[0].role_env->count("OUT"), 0u) << "names ${replica_id}: each replica's own";
  EXPECT_EQ(reqs[0].env.at("OUT"), "app-x1/0");
  EXPECT_EQ(reqs[1].env.at("OUT"), "app-x1/1");
  EXPECT_EQ(reqs[0].env.count("PYTHONUNBUFFERED"), 0u) << "shared, not copied";
  ASSERT_NE(reqs[1].Find("PYTHONUNBUFFERED"), nullptr);
  EXPECT_EQ(*reqs[1].Find("PYTHONUNBUFFERED"), "0");
  EXPECT_EQ(*reqs[1].Find("HOME"), "/home/u");
  EXPECT_EQ(*reqs[1].Find("TORCHX_RANK0_HOST"), "localhost") << "the replica's layer over the role's";
  EXPECT_EQ(reqs[1].Find("NOPE"), nullptr);
  // The three layers walk as one environment: each variable once, in name order.
  std::vector<std::string> walked;
  reqs[1].ForEachVariable([&](const std::string& k, const std::string& v) { walked.push_back(k + "=" + v); });
  std::vector<std::string> merged;
  std::map<std::string, std::string> all = *reqs[1].inherited;
  for (const auto& [k, v] : *reqs[1].role_env) all[k] = v;
  for (const auto& [k, v] : reqs[1].env) all[k] = v;
  for (const auto& [k, v] : all) merged.push_back(k + "=" + v);
  EXPECT_EQ(walked, merged);
}

TEST(ReplicaRequestTest, JoinPathDropsEmptyPartsAndEdgeColons) {
  EXPECT_EQ(JoinPath({"", ":/a:", "/b", ""}), "/a:/b");
  EXPECT_EQ(JoinPath({}), "");
}

TEST(ReplicaRequestTest, DryrunJsonOmitsUnchangedClientEnv) {
  auto ctx = Context(false);
  auto reqs = BuildReplicaRequests(TwoRoleApp(), ctx);
  auto j = ReplicaRequestToJson(reqs[0], ctx.client_env);
  EXPECT_FALSE(j["env"].contains("HOME"));
  EXPECT_TRUE(j["env"].contains("PATH"));
  EXPECT_EQ(j["env"]["OUT"], "app-x1/0");
}

TEST(ReplicaRequestTest, CudaVisibleDevicesAreContiguousSlicesAllOrNothing) {
  // TorchX's example: a(2x1), b(1x0), c(3x2) on 8 GPUs.
  AppDef app;
  for (auto [name, n, gpu] : {std::tuple{"a", 2, 1}, {"b", 1, 0}, {"c", 3, 2}}) {
    Role r;
    r.name = name;
    r.entrypoint = "x";
    r.num_replicas = n;
    r.resource.gpu = gpu;
    app.roles.push_back(r);
  }
  LocalAppContext ctx = Context(false);
  ctx.roles = {{"/w", "/w"}, {"/w", "/w"}, {"/w", "/w"}};
  auto reqs = BuildReplicaRequests(app, ctx);
  EXPECT_EQ(AssignCudaVisibleDevices(app, reqs, 8), "");
  std::vector<std::string> got;
  for (const auto& r : reqs) got.push_back(r.env.count("CUDA_VISIBLE_DEVICES") ? r.env.at("CUDA_VISIBLE_DEVICES") : "-");
  EXPECT_EQ(got, (std::vector<std::string>{"0", "1", "-", "2,3", "4,5", "6,7"}));
  auto fresh = BuildReplicaRequests(app, ctx);
  EXPECT_EQ(AssignCudaVisibleDevices(app, fresh, 4),
            "Cannot auto-set `CUDA_VISIBLE_DEVICES` Available GPUs: 4 is less than the number of "
            "requested GPUs: 8");
  for (const auto& r : fresh) EXPECT_EQ(r.env.count("CUDA_VISIBLE_DEVICES"), 0u);
}

// A session is a name, not a template: its '$' reaches TORCHX_JOB_ID as written.
TEST(ReplicaRequestTest, TheSessionInTheJobIdIsNeverSubstituted) {
  LocalAppContext ctx = Context(false);
  ctx.session = "s$img_root${app_id}";
  auto reqs = BuildReplicaRequests(TwoRoleApp(), ctx);
  EXPECT_EQ(reqs[0].Environment().at("TORCHX_JOB_ID"), "local_cwd://s$img_root${app_id}/app-x1");
}

// The estimate counts what a replica gets with macros at their longest,
// and what each element and each copied field costs besides its text.
TEST(ReplicaRequestTest, TheEstimateCountsElementsMacrosAndWhatIsCopiedForEachReplica) {
  AppDef app = OneRoleApp(10);
  uint64_t bare = EstimateExpandedBytes(app, {}, 0);
  EXPECT_EQ(bare, 10u * 6u);  // "e" and its terminator, and empty capabilities and tags ("{}" each)
  app.roles[0].args.assign(1000, "");
  EXPECT_EQ(EstimateExpandedBytes(app, {}, 0), bare + 10u * 1000u * (1u + kElementBytes));
  app.roles[0].args = {"$img_root"};
  EXPECT_EQ(EstimateExpandedBytes(app, {}, 4000), bare + 10u * (4000u + 1u + kElementBytes));
  app.roles[0].args.clear();
  app.roles[0].image = std::string(100, 'i');
  app.roles[0].resource.devices = {{"efa", 4}};
  EXPECT_EQ(EstimateExpandedBytes(app, {}, 0, 7), bare + 10u * (200u + 3u + 4u * kElementBytes + 7u));
  EXPECT_EQ(EstimateExpandedBytes(app, {{"K", "v"}}, 0, 7) - EstimateExpandedBytes(app, {}, 0, 7), 10u * 4u);
}

// Text is counted at its most escaped: a shell's quoting of a single quote
// ('"'"'), JSON's of a control character (\u0001).
TEST(ReplicaRequestTest, TheEstimateCountsTextAtItsMostEscaped) {
  EXPECT_EQ(EscapedBytes("plain"), 5u);
  EXPECT_EQ(EscapedBytes("'"), 5u);
  EXPECT_EQ(EscapedBytes(std::string(1, '\x01')), 6u);
  EXPECT_EQ(EscapedBytes("\"\\"), 4u);
  AppDef app = OneRoleApp(4);
  uint64_t bare = EstimateExpandedBytes(app, {}, 0);
  app.roles[0].args = {std::string(1000, '\'')};
  EXPECT_EQ(EstimateExpandedBytes(app, {}, 0), bare + 4u * (5000u + 1u + kElementBytes));
  EXPECT_EQ(CopiedPerReplica("/w", "{}", "s'"), 3u * 2u + 3u * 2u + 2u * 6u);
}

// What the kernel refuses at exec (E2BIG) is found before any replica is
// started, naming the argument or variable.
TEST(ReplicaRequestTest, WhatNoProcessCouldStartWithIsNamed) {
  ReplicaRequest r;
  r.entrypoint = "sleep";
  r.args = {"1"};
  auto inherited = std::make_shared<std::map<std::string, std::string>>();
  (*inherited)["HOME"] = "/root";
  r.inherited = inherited;
  r.env["SMALL"] = "x";
  EXPECT_EQ(ExecLimitProblem(r, 2 << 20), "");
  // "BIG=" and the value and its NUL: one byte too many.
  r.env["BIG"] = std::string(kMaxExecString - 4, 'b');
  EXPECT_EQ(ExecLimitProblem(r, 8 << 20),
            "the variable BIG is 131072 bytes; Linux starts no process with an argument or variable of 131072 bytes or "
            "more (MAX_ARG_STRLEN)");
  r.env["BIG"].pop_back();
  EXPECT_EQ(ExecLimitProblem(r, 8 << 20), "");
  r.args.push_back(std::string(kMaxExecString, 'a'));
  EXPECT_NE(ExecLimitProblem(r, 8 << 20).find("argument 2 is 131072 bytes"), std::string::npos);
  r.args.pop_back();
  (*inherited)["CLIENT"] = std::string(kMaxExecString, 'c');
  EXPECT_NE(ExecLimitProblem(r, 8 << 20).find("the variable CLIENT is"), std::string::npos);
  inherited->erase("CLIENT");
  // All of them together, pointers included, past ARG_MAX.
  for (int i = 0; i < 20; ++i) r.env["V" + std::to_string(i)] = std::string(100 << 10, 'v');
  EXPECT_NE(ExecLimitProblem(r, 2 << 20).find("Linux starts no process with more than 2097152 (ARG_MAX"), std::string::npos);
  EXPECT_EQ(ExecLimitProblem(r, 4 << 20), "");
}

}  // namespace
}  // namespace torchxd::core
