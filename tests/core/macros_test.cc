#include "core/macros.h"

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

TEST(MacrosTest, SafeSubstituteFollowsPythonTemplate) {
  const std::map<std::string, std::string, std::less<>> values = {{"app_id", "echo-x"},
                                                                   {"replica_id", "3"}};
  struct Case {
    const char* name;
    const char* in;
    const char* want;
  };
  const Case cases[] = {
      {"braced", "--id=${app_id}", "--id=echo-x"},
      {"bare", "$app_id/$replica_id", "echo-x/3"},
      {"bare stops at non-identifier", "$replica_id.log", "3.log"},
      {"bare takes the longest identifier", "$app_idx", "$app_idx"},
      {"escaped dollar", "$$app_id", "$app_id"},
      {"double escape then macro", "$$${app_id}", "$echo-x"},
      {"unknown braced left intact", "${unknown}", "${unknown}"},
      {"unknown bare left intact", "$HOME/x", "$HOME/x"},
      {"invalid placeholder keeps the dollar", "cost: $5", "cost: $5"},
      {"unclosed brace", "${app_id", "${app_id"},
      {"space inside braces", "${ app_id}", "${ app_id}"},
      {"trailing dollar", "a$", "a$"},
      {"identifiers are case sensitive", "${APP_ID}", "${APP_ID}"},
      {"shell default expansion survives", "$${${rank0_env}:=localhost}:29500",
       "${${rank0_env}:=localhost}:29500"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(SafeSubstitute(c.in, values), c.want);
  }
}

TEST(MacrosTest, ApplySubstitutesArgsEnvValuesAndMetadataOnly) {
  Role role;
  role.name = "trainer-${replica_id}";
  role.image = "${img_root}/img";
  role.entrypoint = "${img_root}/main";
  role.args = {"--root", "${img_root}", "--id", "${app_id}", "--rank0", "${rank0_env}"};
  role.env = {{"${app_id}", "${replica_id}"}};
  role.port_map = {{"${app_id}", 1}};
  role.metadata = {{"a", "${app_id}"},
                   {"nested", {{"b", "${replica_id}"}}},
                   {"list", {"${app_id}", {{"c", "${img_root}"}}, {"${app_id}"}}},
                   {"n", 3}};
  MacroValues values{"/root", "app-1", "2", "TORCHX_RANK0_HOST"};
  Role out = values.Apply(role);
  EXPECT_EQ(out.args, (std::vector<std::string>{"--root", "/root", "--id", "app-1", "--rank0",
                                                "TORCHX_RANK0_HOST"}));
  // Keys are not substituted, values are.
  EXPECT_EQ(out.env, (std::map<std::string, std::string>{{"${app_id}", "2"}}));
  EXPECT_EQ(out.metadata["a"], "app-1");
  EXPECT_EQ(out.metadata["nested"]["b"], "2");
  EXPECT_EQ(out.metadata["list"][0], "app-1");
  EXPECT_EQ(out.metadata["list"][1]["c"], "/root");
  EXPECT_EQ(out.metadata["list"][2][0], "${app_id}");  // lists in lists are left alone
  EXPECT_EQ(out.metadata["n"], 3);
  // Never substituted.
  EXPECT_EQ(out.name, role.name);
  EXPECT_EQ(out.image, role.image);
  EXPECT_EQ(out.entrypoint, role.entrypoint);
  EXPECT_EQ(out.port_map, role.port_map);
  // The input is not mutated.
  EXPECT_EQ(role.args[1], "${img_root}");
}

// CountMacros knows every substitution's size without making it: checked
// against SafeSubstitute over the same cases, with values of other lengths.
TEST(MacrosTest, CountsGiveTheSubstitutedSizeWithoutSubstituting) {
  const char* templates[] = {"--id=${app_id}", "$app_id/$replica_id", "$replica_id.log", "$app_idx",
                             "$$app_id", "$$${app_id}", "${unknown}", "$HOME/x", "cost: $5", "${app_id",
                             "${ app_id}", "a$", "${APP_ID}", "$${${rank0_env}:=localhost}:29500",
                             "$img_root$img_root/${img_root}", "", "$", "$$", "plain"};
  const std::map<std::string, std::string, std::less<>> values = {
      {"img_root", "/a/long/image/root"}, {"app_id", "echo-x"}, {"replica_id", "1023"}, {"rank0_env", "R0"}};
  for (const char* t : templates) {
    SCOPED_TRACE(t);
    EXPECT_EQ(CountMacros(t).SizeWith(18, 6, 4, 2), SafeSubstitute(t, values).size());
  }
  // A role: what its replicas' processes get substituted, args and env
  // values; its metadata, which no replica reads, is not counted.
  Role role;
  role.args = {"$img_root", "x${replica_id}"};
  role.env = {{"K", "${app_id}-$rank0_env"}};
  role.metadata = {{"a", "${app_id}"}, {"list", {"${img_root}", {{"c", "$$"}}, {"${app_id}"}}}, {"n", 3}};
  MacroCounts c = CountMacros(role);
  EXPECT_EQ(c.img_root, 1u);
  EXPECT_EQ(c.app_id, 1u);
  EXPECT_EQ(c.replica_id, 1u);
  EXPECT_EQ(c.rank0_env, 1u);
  EXPECT_EQ(c.literal, 1u + 1u);  // "x", "-"
  // A few bytes can stand for a great many: the size saturates, never wraps.
  MacroCounts many;
  many.img_root = SIZE_MAX / 2;
  EXPECT_EQ(many.SizeWith(4096, 0, 0, 0), UINT64_MAX);
}

TEST(MacrosTest, AnEscapedTextSubstitutesToItself) {
  MacroValues values{"/root", "app-1", "2", "R"};
  for (const char* text : {"", "plain", "$", "$$", "s$img_root", "${app_id}$", "$${x}"}) {
    EXPECT_EQ(values.Substitute(EscapeMacros(text)), text) << text;
  }
  EXPECT_EQ(values.Substitute(JobIdTemplate("local_cwd", "s$img_root")), "local_cwd://s$img_root/app-1");
}

}  // namespace
}  // namespace torchxd::core
