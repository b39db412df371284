// A reply's result indented from the frame's text: the same text a DOM's
// dump(2) gives, the daemon's errors as its Error, a frame without a result
// refused saying why.
#include "cli/reply_text.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace torchxd::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(ReplyTextTest, TheResultIsWrittenAsDumpTwoWritesIt) {
  json results[] = {
      json::parse(R"({"queues":[{"name":"default","pending":[{"app_handle":"local_cwd://torchx/a","position":1,
                     "reason":"waits: \"2 GPUs\"\n\u00e9 \u0001","request":{"cpu":1.5,"gpu":2,"memMB":0}}],
                     "running":[],"used":{}}],"head":null,"ok":true,"big":18446744073709551615,"neg":-3,
                     "nested":[[],[[]],{},[{}],[1,[2,{"a":[3]}]]]})"),
      json("just a string"), json(42), json(nullptr), json::array(), json::object(), json(0.1)};
  for (const json& result : results) {
    std::string frame = json({{"id", 3}, {"result", result}, {"zz", {{"skipped", {1, 2}}}}}).dump();
    auto text = IndentedResult(frame);
    ASSERT_TRUE(text) << text.error().message;
    EXPECT_EQ(*text, result.dump(2)) << frame;
  }
}

// Written in chunks as it is read: the same bytes, a result of megabytes included.
TEST(ReplyTextTest, WrittenInChunksItIsTheSameText) {
  json big = json::array();
  for (int i = 0; i < 20000; ++i) {
    big.push_back({{"app_handle", "local_cwd://torchx/p" + std::to_string(i)}, {"position", i + 1},
                   {"reason", "waiting for 1 GPU in queue q" + std::to_string(i % 4) + ": 0 free, \"quoted\" \u00e9"},
                   {"request", {{"cpu", 1}, {"gpu", 1}}}});
  }
  for (const json& result : {json({{"pending", big}, {"n", nullptr}}), json(42), json::object()}) {
    std::string frame = json({{"id", 3}, {"result", result}}).dump();
    std::ostringstream out;
    auto written = WriteIndentedResult(frame, out);
    ASSERT_TRUE(written) << written.error().message;
    EXPECT_EQ(out.str(), result.dump(2));
  }
  std::ostringstream none;
  auto error = WriteIndentedResult(R"({"id":1,"error":{"code":"Unavailable","message":"no queues"}})", none);
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(none.str(), "");  // an error frame writes nothing
}

TEST(ReplyTextTest, TheDaemonsErrorComesBackAsItsError) {
  auto text = IndentedResult(R"({"id":1,"error":{"code":"Unavailable","message":"this torchxd runs with --no-admission"}})");
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(text.error().message, HasSubstr("--no-admission"));
}

TEST(ReplyTextTest, AFrameWithoutAResultIsRefusedSayingWhy) {
  for (const char* bad : {"", "[]", "3", "{\"id\":1,\"result\":[1,", "{\"id\":1,\"error\":3}", "{\"result\":7,\"result\":{}}", "{\"result\":{},\"result\":7}",
                          "{\"id\":1,\"result\":{\"a\":1}} trailing"}) {
    auto text = IndentedResult(bad);
    ASSERT_FALSE(text) << bad;
    EXPECT_EQ(text.error().code, ErrorCode::kInternal) << bad;
    EXPECT_THAT(text.error().message, HasSubstr("malformed")) << bad;
  }
  auto none = IndentedResult("{\"id\":1}");
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr("neither result nor error"));
}

}  // namespace
}  // namespace torchxd::cli
