#include "core/app_json.h"
#include "core/json_parse.h"

#include <gtest/gtest.h>

#include "core/named_resources.h"

namespace torchxd::core {
namespace {

using nlohmann::json;

TEST(AppJsonTest, OmittedFieldsTakeTorchxDefaults) {
  auto app = ParseAppDefJson(R"({"name": "hello", "roles": [{"name": "r", "entrypoint": "echo"}]})");
  ASSERT_TRUE(app.has_value()) << app.error().message;
  const Role& r = app->roles[0];
  EXPECT_EQ(r.image, "");
  EXPECT_EQ(r.num_replicas, 1);
  EXPECT_EQ(r.max_retries, 0);
  EXPECT_EQ(r.retry_policy, RetryPolicy::kApplication);
  EXPECT_FALSE(r.min_replicas.has_value());
  EXPECT_TRUE(r.resource.IsNull());
  EXPECT_TRUE(r.args.empty());
  EXPECT_TRUE(r.mounts.empty());
}

TEST(AppJsonTest, EncodeDecodeRoundTripsEveryField) {
  AppDef app;
  app.name = "train";
  app.metadata = {{"k", "v"}};
  Role role;
  role.name = "trainer";
  role.image = "img:1";
  role.min_replicas = 1;
  role.entrypoint = "python";
  role.args = {"-m", "train", "--id", "${app_id}"};
  role.env = {{"A", "1"}};
  role.num_replicas = 3;
  role.max_retries = 2;
  role.retry_policy = RetryPolicy::kReplica;
  role.resource.cpu = 4;
  role.resource.gpu = 1;
  role.resource.mem_mb = 8192;
  role.resource.capabilities = {{"node.kubernetes.io/instance-type", "p4d"}};
  role.resource.devices = {{"rdma/rdma_shared_device_a", 1}};
  role.port_map = {{"c10d", 29500}};
  role.metadata = {{"kubernetes", {{"spec", json::object()}}}};
  role.mounts = {BindMount{"/a", "/b", true}, VolumeMount{"v", "/d", false},
                 DeviceMount{"/dev/x", "/dev/y", "rw"}};
  app.roles.push_back(role);
  json encoded = AppDefToJson(app);
  EXPECT_EQ(encoded["roles"][0]["resource"]["memMB"], 8192);
  EXPECT_EQ(encoded["roles"][0]["retry_policy"], "REPLICA");
  auto decoded = AppDefFromJson(encoded);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, app);
}

TEST(AppJsonTest, AcceptsMountStringsAndNamedResources) {
  auto nr = NamedResources::Builtin();
  AppDefDecodeOptions options;
  options.lookup = [&](std::string_view name) { return nr.Get(name); };
  options.home = "/home/u";
  auto app = ParseAppDefJson(R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x",
      "resource": "cpu.small",
      "mounts": ["type=bind,src=~/data,dst=/data,readonly", {"type": "volume", "src": "v", "dst_path": "/v"}]}]})",
                             options);
  ASSERT_TRUE(app.has_value()) << app.error().message;
  EXPECT_EQ(app->roles[0].resource.mem_mb, 2048);
  ASSERT_EQ(app->roles[0].mounts.size(), 2u);
  EXPECT_EQ(std::get<BindMount>(app->roles[0].mounts[0]), (BindMount{"/home/u/data", "/data", true}));
  // Without a lookup (the daemon) a named resource is refused.
  auto daemon_side = ParseAppDefJson(
      R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "resource": "cpu.small"}]})");
  ASSERT_FALSE(daemon_side.has_value());
  EXPECT_NE(daemon_side.error().message.find("roles[0].resource: named resource"), std::string::npos);
}

TEST(AppJsonTest, ErrorsNameTheJsonPathAndTheRule) {
  struct Case {
    std::string name;
    std::string doc;
    std::string message;
  };
  const Case cases[] = {
      {"not an object", "[]", "(document): must be an object, got array"},
      {"missing name", R"({"roles": [{"name": "r", "entrypoint": "x"}]})",
       "name: must be a non-empty string"},
      {"no roles", R"({"name": "a", "roles": []})", "roles: must have at least one role"},
      {"entrypoint past PATH_MAX", R"({"name": "a", "roles": [{"name": "r", "entrypoint": ")" + std::string(4096, 'e') + R"("}]})",
       "roles[0].entrypoint: must be shorter than 4096 bytes, got 4096"},
      {"image past PATH_MAX", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "image": ")" + std::string(8000, 'i') + R"("}]})",
       "roles[0].image: must be shorter than 4096 bytes, got 8000"},
      {"devices past their bound", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "resource": {"devices": {"efa": 1025}}}]})",
       "roles[0].resource.devices.efa: must be within [0, 1024], got 1025"},
      {"roles not array", R"({"name": "a", "roles": {}})",
       "roles: must be an array of roles, got object"},
      {"zero replicas",
       R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x"}, {"name": "s", "entrypoint": "x", "num_replicas": 0}]})",
       "roles[1].num_replicas: must be > 0, got 0"},
      {"float replicas", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "num_replicas": 2.5}]})",
       "roles[0].num_replicas: must be an integer, got 2.5"},
      {"string replicas", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "num_replicas": "2"}]})",
       "roles[0].num_replicas: must be an integer, got string"},
      {"replicas past int32", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "num_replicas": 4294967297}]})",
       "roles[0].num_replicas: must be an integer between -2147483648 and 2147483647, got 4294967297"},
      {"gpu past int64", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "resource": {"gpu": 18446744073709551615}}]})",
       "roles[0].resource.gpu: must be an integer between -2147483648 and 2147483647, got 18446744073709551615"},
      {"retries past the ceiling", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "max_retries": 1000000000}]})",
       "roles[0].max_retries: must be between 0 and 1000, got 1000000000"},
      {"no entrypoint", R"({"name": "a", "roles": [{"name": "r"}]})",
       "roles[0].entrypoint: must be set (the program to run)"},
      {"bad policy", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "retry_policy": "ALWAYS"}]})",
       "roles[0].retry_policy: must be one of REPLICA, APPLICATION, ROLE, got \"ALWAYS\""},
      {"negative retries", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "max_retries": -1}]})",
       "roles[0].max_retries: must be between 0 and 1000, got -1"},
      {"min above num", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "num_replicas": 2, "min_replicas": 3}]})",
       "roles[0].min_replicas: must be between 0 and num_replicas (2), got 3"},
      {"env not string", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "env": {"A": 1}}]})",
       "roles[0].env.A: must be a string, got number"},
      {"args not strings", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "args": ["a", 2]}]})",
       "roles[0].args[1]: must be a string, got number"},
      {"unknown field", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "num_replica": 2}]})",
       "roles[0].num_replica: unknown field. Did you mean `num_replicas`?"},
      {"unknown resource field", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "resource": {"mem": 1}}]})",
       "roles[0].resource.mem: unknown field. Did you mean `memMB`?"},
      {"negative cpu", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "resource": {"cpu": -2}}]})",
       "roles[0].resource.cpu: must be >= 0 (or -1 for unset), got -2"},
      {"bad port", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "port_map": {"c10d": 70000}}]})",
       "roles[0].port_map.c10d: must be a port number 0-65535, got 70000"},
      {"duplicate roles", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x"}, {"name": "r", "entrypoint": "y"}]})",
       "roles[1].name: duplicate role name \"r\""},
      {"slash in role", R"({"name": "a", "roles": [{"name": "a/b", "entrypoint": "x"}]})",
       "roles[0].name: must not contain '/', got \"a/b\""},
      {"dotdot app name", R"({"name": "..", "roles": [{"name": "r", "entrypoint": "x"}]})",
       "name: must not be \".\" or \"..\", got \"..\""},
      {"blank app name", R"({"name": " ", "roles": [{"name": "r", "entrypoint": "x"}]})",
       "name: must not start or end with whitespace, got \" \""},
      {"long role name", R"({"name": "a", "roles": [{"name": ")" + std::string(300, 'r') + R"(", "entrypoint": "x"}]})",
       "roles[0].name: must be at most 128 bytes, got 300"},
      {"control character in a name", R"({"name": "a\u0001b", "roles": [{"name": "r", "entrypoint": "x"}]})",
       "name: must not contain control characters, got \"a\\u0001b\""},
      {"NUL in an argument", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "sh", "args": ["-c", "id\u00000\u00000"]}]})",
       "roles[0].args[1]: must not contain a NUL character (\\u0000)"},
      {"NUL in the entrypoint", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "sh\u0000x"}]})",
       "roles[0].entrypoint: must not contain a NUL character (\\u0000)"},
      {"NUL in an env value", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "env": {"A": "b\u0000"}}]})",
       "roles[0].env.A: must not contain a NUL character (\\u0000)"},
      {"NUL in a mount", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "mounts": [{"type": "bind", "src_path": "/a\u0000", "dst_path": "/b"}]}]})",
       "roles[0].mounts[0].src_path: must not contain a NUL character (\\u0000)"},
      {"metadata nested too deep", R"({"name": "a", "metadata": {}, "roles": [{"name": "r", "entrypoint": "x", "metadata": {"m": )" +
                                       std::string(40, '[') + std::string(40, ']') + "}}]}",
       "an AppDef may nest at most 32 levels: JSON nested deeper than 32 levels (at byte 119)"},
      {"bad mount string", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "mounts": ["src=/a"]}]})",
       "roles[0].mounts[0]: type must be specified first"},
      {"bad mount type", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "mounts": [{"type": "nfs"}]}]})",
       "roles[0].mounts[0].type: must be one of bind, volume, device, got \"nfs\""},
      {"mount missing dst", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "x", "mounts": [{"type": "bind", "src_path": "/a"}]}]})",
       "roles[0].mounts[0].dst_path: must be set"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto app = ParseAppDefJson(c.doc);
    ASSERT_FALSE(app.has_value());
    EXPECT_EQ(app.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(app.error().message, c.message);
  }
}

TEST(AppJsonTest, SyntaxErrorsSayWhere) {
  auto app = ParseAppDefJson("{\"name\": \"a\",\n \"roles\": [}");
  ASSERT_FALSE(app.has_value());
  EXPECT_NE(app.error().message.find("invalid JSON"), std::string::npos);
  EXPECT_NE(app.error().message.find("line 2"), std::string::npos) << app.error().message;
}

TEST(JsonParseTest, DumpLikePythonMatchesJsonDumps) {
  // json.dumps({"state": "RUNNING", "roles": [{"replicas": []}], "n": 1, "url": None, "m": "é"})
  nlohmann::json v = nlohmann::json::parse(R"({"state": "RUNNING", "roles": [{"replicas": []}], "n": 1, "url": null, "m": "é"})");
  EXPECT_EQ(DumpLikePython(v),
            R"({"m": "\u00e9", "n": 1, "roles": [{"replicas": []}], "state": "RUNNING", "url": null})");
}

TEST(JsonParseTest, AppendJsonStringWritesWhatDumpWrites) {
  for (std::string s : {std::string("plain-name_1.x"), std::string(""), std::string("q\"uote\\back"),
                        std::string("tab\tnl\n\x01"), std::string("caf\xc3\xa9"), std::string("bad \xff utf8")}) {
    std::string out = "[";
    AppendJsonString(out, s);
    EXPECT_EQ(out, "[" + nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) << s;
  }
}

TEST(JsonParseTest, AppendJsonStringOfPartsWritesTheirConcatenation) {
  for (std::string id : {std::string("plain-1"), std::string("q\"uote"), std::string("bad \xff"), std::string("")}) {
    std::string parts = "[", whole = "[";
    AppendJsonString(parts, {"local_cwd", "://", "torchx", "/", id});
    AppendJsonString(whole, "local_cwd://torchx/" + id);
    EXPECT_EQ(parts, whole) << id;
  }
}

}  // namespace
}  // namespace torchxd::core
