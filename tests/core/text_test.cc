#include "core/text.h"

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

TEST(TextTest, ShellQuoteMatchesShlex) {
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("main.py"), "main.py");
  EXPECT_EQ(ShellQuote("a=b,c:d/e@f%g+h-i"), "a=b,c:d/e@f%g+h-i");
  EXPECT_EQ(ShellQuote("${app_id}"), "'${app_id}'");
  EXPECT_EQ(ShellQuote("hello world"), "'hello world'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\"'\"'s'");
}

TEST(TextTest, CamelToSnake) {
  EXPECT_EQ(CamelToSnake("clusterName"), "cluster_name");
  EXPECT_EQ(CamelToSnake("logDir"), "log_dir");
  EXPECT_EQ(CamelToSnake("log_dir"), "log_dir");
  EXPECT_EQ(CamelToSnake("autoSetCudaVisibleDevices"), "auto_set_cuda_visible_devices");
}

TEST(TextTest, DidYouMeanSuggestsTheClosestName) {
  std::vector<std::string> names = {"log_dir", "prepend_cwd", "auto_set_cuda_visible_devices"};
  EXPECT_EQ(DidYouMean("logdir", names), " Did you mean `log_dir`?");
  EXPECT_EQ(DidYouMean("zzz", names), "");
}

TEST(TextTest, PyRepr) {
  EXPECT_EQ(PyRepr("foo"), "'foo'");
  EXPECT_EQ(PyRepr("it's"), "\"it's\"");
}

TEST(TextTest, UrlEscapeKeepsUnreservedAndWhatItIsToldTo) {
  EXPECT_EQ(UrlEscape("a-b_c.d~9"), "a-b_c.d~9");
  EXPECT_EQ(UrlEscape("ns/job name:é"), "ns%2Fjob%20name%3A%C3%A9");
  EXPECT_EQ(UrlEscape("/apps/local_cwd://x y", "/"), "/apps/local_cwd%3A//x%20y");
}

}  // namespace
}  // namespace torchxd::core
