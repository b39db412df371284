// The `list` reply page read without a JSON DOM: the same rows a DOM gives,
// the daemon's errors as its Error, and a frame that is no list reply refused
// saying why.
#include "cli/list_page.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace torchxd::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(ListPageTest, ReadsTheRowsFieldsAndCursorAsAJsonDomWould) {
  json result = {{"fields", {"app_handle", "app_id", "state", "created_ms", "ended_ms", "msg"}},
                 {"apps", {{"local_cwd://torchx/a", "a", "RUNNING", 1700000000000, nullptr, "caf\u00e9 \"q\"\n"},
                           {"local_cwd://torchx/b", "b", "FAILED", 1, 2, ""}}},
                 {"next", "1/local_cwd://torchx/b"},
                 {"later", {{"nested", {1, {{"x", true}}}}}}};
  std::string frame = json({{"id", 7}, {"result", result}}).dump();
  auto page = ReadListPage(frame);
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(page->fields, result["fields"].get<std::vector<std::string>>());
  ASSERT_EQ(page->size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(page->row(r).size(), 6u);
    for (size_t c = 0; c < 6; ++c) EXPECT_EQ(page->row(r)[c].ToJson(), result["apps"][r][c]) << r << "," << c;
  }
  EXPECT_TRUE(page->row(0)[4].is_null());
  EXPECT_TRUE(page->row(1)[4].is_integer());
  EXPECT_EQ(page->next, "1/local_cwd://torchx/b");
}

// The rows' text is kept in blocks that never move: a page of many rows,
// some longer than a block, moved after it was read, still reads back whole.
TEST(ListPageTest, ManyRowsAndLongTextReadBackWholeAfterThePageMoves) {
  json apps = json::array();
  for (int i = 0; i < 6000; ++i) {
    std::string msg = i % 1000 == 7 ? std::string(100000 + static_cast<size_t>(i), 'm') : "msg " + std::to_string(i);
    apps.push_back({"local_cwd://torchx/app-" + std::to_string(i), "", i, msg, 1.5, true});
  }
  std::string frame = json({{"id", 1}, {"result", {{"fields", {"h", "empty", "n", "msg", "f", "b"}}, {"apps", apps}}}}).dump();
  auto page = ReadListPage(frame);
  ASSERT_TRUE(page) << page.error().message;
  std::vector<ListPage> pages;
  pages.push_back(std::move(*page));
  pages.emplace_back();  // the vector moves the first page
  const ListPage& p = pages[0];
  ASSERT_EQ(p.size(), 6000u);
  for (size_t r = 0; r < p.size(); ++r) {
    ASSERT_EQ(p.row(r).size(), 6u) << r;
    for (size_t c = 0; c < 4; ++c) ASSERT_EQ(p.row(r)[c].ToJson(), apps[r][c]) << r << "," << c;
    EXPECT_EQ(p.row(r)[4].text, "1.5");
    EXPECT_EQ(p.row(r)[5].text, "true");
  }
}

TEST(ListPageTest, TheLastPageHasNoCursorAndAnEmptyOneNoRows) {
  auto page = ReadListPage(R"({"id":1,"result":{"fields":["app_handle"],"apps":[]}})");
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(page->size(), 0u);
  EXPECT_FALSE(page->next);
}

TEST(ListPageTest, TheDaemonsErrorComesBackAsItsError) {
  auto page = ReadListPage(R"({"id":1,"error":{"code":"InvalidArgument","message":"params.limit: must be between 1 and 5000"}})");
  ASSERT_FALSE(page);
  EXPECT_EQ(page.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(page.error().message, HasSubstr("params.limit"));
}

TEST(ListPageTest, AFrameThatIsNoListReplyIsRefusedSayingWhy) {
  for (const char* bad : {"", "[]", "{\"id\":1}", "{\"id\":1,\"result\":3}", "{\"id\":1,\"result\":{\"apps\":[3]}}",
                          "{\"id\":1,\"result\":{\"apps\":[[{\"a\":1}]]}}", "{\"id\":1,\"result\":{\"apps\":[[[1]]]}}",
                          "{\"id\":1,\"result\":{\"fields\":[1]}}", "{\"id\":1,\"result\":{\"apps\":[[1,", "{\"result\":{},\"result\":{}}"}) {
    auto page = ReadListPage(bad);
    ASSERT_FALSE(page) << bad;
    EXPECT_THAT(page.error().message, HasSubstr("torchxd")) << bad;
  }
}

}  // namespace
}  // namespace torchxd::cli
