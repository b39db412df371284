#include "core/component_args.h"

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

ComponentSpec Spec() {
  return {"test.comp",
          "A test component",
          {{"msg", ParamType::kStr, "message", std::string("hello world"), false},
           {"num_replicas", ParamType::kInt, "replicas", std::string("1"), false},
           {"name", ParamType::kStr, "name", std::string("/"), false},
           {"j", ParamType::kStr, "topology", std::string("1x2"), false},
           {"h", ParamType::kStr, "host", std::nullopt, false},
           {"env", ParamType::kDict, "env", std::nullopt, false},
           {"mounts", ParamType::kList, "mounts", std::nullopt, false},
           {"debug", ParamType::kBool, "debug", std::string("False"), false},
           {"entrypoint", ParamType::kStr, "entry", std::nullopt, true}},
          ParamSpec{"args", ParamType::kStr, "program args", std::nullopt, false}};
}

TEST(ComponentArgsTest, ParsesOptionFormsAndVarargs) {
  auto a = ParseComponentArgs(Spec(), {"--msg", "hi there", "--num_replicas=3", "-j2x1", "-h",
                                       "gpu.small", "--env", "A=1,B=2", "--mounts",
                                       "type=bind,src=/a,dst=/b", "--debug", "True",
                                       "--entry", "python", "train.py", "--lr", "0.1"});
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_EQ(*a->Str("msg"), "hi there");
  EXPECT_EQ(a->Int("num_replicas"), 3);
  EXPECT_EQ(*a->Str("j"), "2x1");
  EXPECT_EQ(*a->Str("h"), "gpu.small");
  EXPECT_EQ(a->Dict("env"), (std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}}));
  EXPECT_EQ(a->List("mounts"), (std::vector<std::string>{"type=bind", "src=/a", "dst=/b"}));
  EXPECT_TRUE(a->Bool("debug"));
  EXPECT_EQ(*a->Str("entrypoint"), "python");  // unique prefix --entry
  EXPECT_EQ(a->varargs, (std::vector<std::string>{"train.py", "--lr", "0.1"}));
}

TEST(ComponentArgsTest, BooleansReadAsTorchxReadsThem) {
  // TorchX: `value.lower() == "true"`; every other value is False, never an error.
  for (auto [text, want] : {std::pair{"True", true}, std::pair{"TRUE", true}, std::pair{"true", true},
                            std::pair{"False", false}, std::pair{"1", false}, std::pair{"yes", false},
                            std::pair{"maybe", false}}) {
    SCOPED_TRACE(text);
    auto a = ParseComponentArgs(Spec(), {"--entrypoint", "x", "--debug", text}, {});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    EXPECT_EQ(a->Bool("debug"), want);
  }
}

TEST(ComponentArgsTest, DefaultsAndNoneAndConfigDefaults) {
  auto a = ParseComponentArgs(Spec(), {"--entrypoint", "x"}, {{"j", "4x8"}});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a->Str("msg"), "hello world");
  EXPECT_EQ(*a->Str("j"), "4x8");  // .torchxconfig [component:...] beats the declared default
  EXPECT_FALSE(a->Str("h").has_value());
  EXPECT_TRUE(a->Dict("env").empty());
  EXPECT_FALSE(a->Bool("debug"));
  EXPECT_TRUE(a->varargs.empty());
}

TEST(ComponentArgsTest, DoubleDashStartsVarargsAndIsDropped) {
  auto a = ParseComponentArgs(Spec(), {"--entrypoint", "x", "--", "--lr", "0.1"});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->varargs, (std::vector<std::string>{"--lr", "0.1"}));
  // After the first positional, everything (even "--" and known options) is varargs.
  auto b = ParseComponentArgs(Spec(), {"--entrypoint", "x", "echo", "--", "--msg", "y"});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->varargs, (std::vector<std::string>{"echo", "--", "--msg", "y"}));
  EXPECT_EQ(*b->Str("msg"), "hello world");
}

TEST(ComponentArgsTest, HelpIsRequestedAndPrintable) {
  auto a = ParseComponentArgs(Spec(), {"--msg", "x", "--help"});
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->help_requested);
  std::string help = ComponentHelp(Spec());
  EXPECT_NE(help.find("usage: torchx run <run args...> test.comp"), std::string::npos);
  EXPECT_NE(help.find("--msg MSG\n      message (default: hello world)"), std::string::npos) << help;
  EXPECT_NE(help.find("--entrypoint ENTRYPOINT\n      entry (required)"), std::string::npos);
}

TEST(ComponentArgsTest, BadArgumentsAreClearErrors) {
  struct Case {
    const char* name;
    std::vector<std::string> argv;
    const char* message;
  };
  const Case cases[] = {
      {"missing required", {}, "the following arguments are required: --entrypoint"},
      {"bad int", {"--entrypoint", "x", "--num_replicas", "two"},
       "argument --num_replicas: invalid int value: 'two'"},
      {"missing value", {"--entrypoint", "x", "--msg"}, "argument --msg: expected one argument"},
      {"option as value", {"--msg", "--entrypoint", "x"}, "argument --msg: expected one argument"},
      {"unknown option", {"--entrypoint", "x", "--mesage", "hi"},
       "unrecognized argument: --mesage. Did you mean `--msg`?"},
      {"ambiguous prefix", {"--n", "x"}, "ambiguous option: --n could match --num_replicas, --name"},
      {"repeated", {"--entrypoint", "x", "--msg", "a", "--msg", "b"},
       "Repeated Command Line Arguments: --msg"},
      {"bad dict", {"--entrypoint", "x", "--env", "A"},
       "argument --env: `A` does not have at least one `key=value` pair"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto a = ParseComponentArgs(Spec(), c.argv);
    ASSERT_FALSE(a.has_value());
    EXPECT_EQ(a.error().message, c.message);
  }
}

TEST(ComponentArgsTest, NoVarargsMeansPositionalsAreUnrecognized) {
  ComponentSpec spec = Spec();
  spec.varargs.reset();
  auto a = ParseComponentArgs(spec, {"--entrypoint", "x", "extra", "more"});
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().message, "unrecognized arguments: extra more");
}

TEST(ComponentArgsTest, NegativeNumbersAreValues) {
  auto a = ParseComponentArgs(Spec(), {"--entrypoint", "x", "--num_replicas", "-1"});
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_EQ(a->Int("num_replicas"), -1);
}

}  // namespace
}  // namespace torchxd::core
