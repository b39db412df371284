// Logs: capture layout, combined ordering, the ring cache, and reading.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/prctl.h>

#include <gmock/gmock.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "core/protocol.h"
#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

struct LogResult {
  std::vector<std::string> lines;       // "role/replica line"
  std::vector<int64_t> times;
  std::vector<json> notices;            // attempt / dropped / missed events
  json result;
};

class LogsTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    StartDaemon();
  }
  LogResult Log(json params) {
    LogResult out;
    auto client = DaemonClient::Connect(socket_);
    EXPECT_TRUE(client.has_value());
    auto r = client->Call("log", params, [&](const json& e) {
      if (!e.contains("lines")) return out.notices.push_back(e);
      for (const auto& l : e["lines"]) {
        out.lines.push_back(e["role"].get<std::string>() + "/" + std::to_string(e["replica"].get<int>()) +
                            " " + l[1].get<std::string>());
        out.times.push_back(l[0].get<int64_t>());
      }
    });
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    if (r) out.result = *r;
    return out;
  }
  std::string File(const std::string& h, const std::string& name) {
    return ReadFile(LogDirOf(h) + "/r/0/" + name);
  }
};

TEST_F(LogsTest, CombinedIsLineOrderedAndStreamFilesAreExact) {
  std::string h = Run(App("mix", {FakeRole("r", {"--interleave", "200", "--no-newline", "tail"})}));
  Wait(h);
  std::string out = File(h, "stdout.log"), err = File(h, "stderr.log"), combined = File(h, "combined.log");
  std::string want_out, want_err;
  for (int i = 0; i < 200; ++i) {
    want_out += "out " + std::to_string(i) + "\n";
    want_err += "err " + std::to_string(i) + "\n";
  }
  EXPECT_EQ(out, want_out + "tail");  // byte-exact, no newline added
  EXPECT_EQ(err, want_err);
  // Every combined line is whole; each stream keeps its order; the partial last line gets a newline.
  std::istringstream in(combined);
  int next_out = 0, next_err = 0;
  std::string last;
  for (std::string line; std::getline(in, line);) {
    if (line == "out " + std::to_string(next_out)) ++next_out;
    else if (line == "err " + std::to_string(next_err)) ++next_err;
    else last = line;
  }
  EXPECT_EQ(next_out, 200);
  EXPECT_EQ(next_err, 200);
  EXPECT_EQ(last, "tail");
  EXPECT_EQ(combined.back(), '\n');
  EXPECT_EQ(combined.size(), want_out.size() + want_err.size() + 5);
}

TEST_F(LogsTest, AHugeLineIsSplitInCombinedOnlyAndNothingIsDropped) {
  const long size = 10 * 1024 * 1024 + 123;
  std::string h = Run(App("big", {FakeRole("r", {"--big-line", std::to_string(size)})}));
  Wait(h);
  EXPECT_EQ(fs::file_size(LogDirOf(h) + "/r/0/stdout.log"), static_cast<uintmax_t>(size));
  std::string combined = File(h, "combined.log");
  long pieces = size / (1 << 20) + 1;
  EXPECT_EQ(combined.size(), static_cast<size_t>(size + pieces));
  EXPECT_EQ(std::count(combined.begin(), combined.end(), '\n'), pieces);
  EXPECT_EQ(combined.find('\n'), static_cast<size_t>(1 << 20));
}

TEST_F(LogsTest, BinaryOutputIsKeptRawAndReplacedOnTheWire) {
  std::string h = Run(App("bin", {FakeRole("r", {"--binary", "1000"})}));
  Wait(h);
  std::string raw = File(h, "stdout.log");
  ASSERT_EQ(raw.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(static_cast<unsigned char>(raw[i]), i % 256);
  auto r = Log({{"app_handle", h}, {"stream", "stdout"}});
  std::string all;
  for (const auto& l : r.lines) all += l;
  EXPECT_NE(all.find("\xEF\xBF\xBD"), std::string::npos);  // U+FFFD for invalid UTF-8
}

TEST_F(LogsTest, NonFollowReturnsAtOnceEvenWhileRunning) {
  std::string h = Run(App("run", {FakeRole("r", {"--stdout", "early", "--sleep", "30"})}));
  // The line shows once the shim has indexed it (a moment after the bytes reach
  // stdout.log); every read meanwhile answers at once, long before the replica ends.
  std::vector<std::string> lines;
  ASSERT_TRUE(WaitUntil([&] {
    auto start = std::chrono::steady_clock::now();
    lines = Log({{"app_handle", h}}).lines;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "it waited for the replica";
    return !lines.empty();
  }));
  EXPECT_EQ(lines, std::vector<std::string>{"r/0 early"});
  CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
}

TEST_F(LogsTest, SelectorsRegexTailAndStreams) {
  json a = FakeRole("a", {"--lines", "5", "--stderr", "warning: x"}, 2);
  json b = FakeRole("b", {"--stdout", "from b"}, 1);
  std::string h = Run(App("sel", {a, b}));
  Wait(h);
  EXPECT_EQ(Log({{"app_handle", h}, {"role", "b"}}).lines, std::vector<std::string>{"b/0 from b"});
  auto one = Log({{"app_handle", h}, {"role", "a"}, {"replicas", {1}}, {"regex", "line [34]"}});
  EXPECT_EQ(one.lines, (std::vector<std::string>{"a/1 line 3", "a/1 line 4"}));
  auto tail = Log({{"app_handle", h}, {"role", "a"}, {"replicas", {0}}, {"tail_lines", 2}});
  EXPECT_EQ(tail.lines, (std::vector<std::string>{"a/0 line 4", "a/0 warning: x"}));
  auto err = Log({{"app_handle", h}, {"role", "a"}, {"replicas", {0}}, {"stream", "stderr"}});
  EXPECT_EQ(err.lines, std::vector<std::string>{"a/0 warning: x"});
  auto bad = Call("log", {{"app_handle", h}, {"role", "c"}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "unknown role `c` in " + h + "; valid roles: a, b");
  EXPECT_FALSE(Call("log", {{"app_handle", h}, {"role", "b"}, {"replicas", {3}}}).has_value());
  EXPECT_FALSE(Call("log", {{"app_handle", h}, {"regex", "("}}).has_value());
}

TEST_F(LogsTest, SinceAndUntilUseEachLinesArrivalTime) {
  std::string h = Run(App("time", {FakeRole("r", {"--stdout", "first", "--sleep", "0.5", "--stdout", "second"})}));
  Wait(h);
  auto all = Log({{"app_handle", h}});
  ASSERT_EQ(all.lines.size(), 2u);
  int64_t mid = all.times[0] + 250;
  EXPECT_GE(all.times[1] - all.times[0], 400);
  EXPECT_EQ(Log({{"app_handle", h}, {"since_ms", mid}}).lines, std::vector<std::string>{"r/0 second"});
  EXPECT_EQ(Log({{"app_handle", h}, {"until_ms", mid}}).lines, std::vector<std::string>{"r/0 first"});
  EXPECT_EQ(Log({{"app_handle", h}, {"since_ms", all.times[1]}}).lines.size(), 1u);  // inclusive
  EXPECT_EQ(Log({{"app_handle", h}, {"until_ms", all.times[1]}}).lines.size(), 1u);  // exclusive
}

TEST_F(LogsTest, RetriedAttemptsAppendAndAreMarkedAndSelectable) {
  json role = FakeRole("r", {"--stdout", "run", "--fail-until", "3", (dir_ / "count").string()});
  role["max_retries"] = 3;
  role["retry_policy"] = "REPLICA";
  std::string h = Run(App("retry", {role}), {{"restart_backoff", 0.1}});
  ASSERT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(File(h, "stdout.log"), "run\nrun\nrun\n");
  auto all = Log({{"app_handle", h}});
  EXPECT_EQ(all.lines.size(), 3u);
  std::vector<int> marks;
  for (const auto& n : all.notices) {
    if (n.contains("attempt")) marks.push_back(n["attempt"]);
  }
  EXPECT_EQ(marks, (std::vector<int>{2, 3}));
  EXPECT_EQ(Log({{"app_handle", h}, {"attempt", 2}}).lines.size(), 1u);
  auto missing = Call("log", {{"app_handle", h}, {"attempt", 7}});
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().message, HasSubstr("has no attempt 7"));
}

// Every event carries a cursor; a read resumed from any of them gives exactly
// what followed that event (lines and attempt marks), nothing twice.
TEST_F(LogsTest, ResumingFromAnyEventsCursorGivesExactlyTheRest) {
  json role = FakeRole("r", {"--lines", "9000", "--fail-until", "3", (dir_ / "count").string()});
  role["max_retries"] = 3;
  role["retry_policy"] = "REPLICA";
  std::string h = Run(App("resume", {role}), {{"restart_backoff", 0.1}});
  ASSERT_EQ(Wait(h)["state"], "SUCCEEDED");
  auto read = [&](json params) {
    std::vector<json> events;
    auto client = DaemonClient::Connect(socket_);
    EXPECT_TRUE(client.has_value());
    auto r = client->Call("log", params, [&](const json& e) { events.push_back(e); });
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    return events;
  };
  auto flatten = [](const std::vector<json>& events, size_t from) {
    std::vector<std::string> out;
    for (size_t i = from; i < events.size(); ++i) {
      if (events[i].contains("attempt")) out.push_back("attempt " + events[i]["attempt"].dump());
      for (const auto& l : events[i].value("lines", json::array())) out.push_back(l[1].get<std::string>());
    }
    return out;
  };
  auto all = read({{"app_handle", h}});
  std::vector<std::string> everything = flatten(all, 0);
  ASSERT_EQ(everything.size(), 3u * 9000 + 2);
  ASSERT_GE(all.size(), 8u);  // several batches per attempt, and two attempt marks
  for (size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE("resumed after event " + std::to_string(i) + ": " + all[i].dump().substr(0, 80));
    ASSERT_TRUE(all[i].contains("cursor"));
    auto rest = read({{"app_handle", h}, {"cursors", {{"r/0", all[i]["cursor"]}}}});
    EXPECT_EQ(flatten(rest, 0), flatten(all, i + 1));
  }
  auto bad = Call("log", {{"app_handle", h}, {"cursors", {{"r/0", "12x"}}}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("params.cursors.r/0"));
}

TEST_F(LogsTest, TwoFollowersEachGetEveryLineUntilTheEnd) {
  std::string h = Run(App("follow", {FakeRole("r", {"--sleep", "0.3", "--lines", "300", "--sleep", "0.2", "--lines", "10"})}));
  LogResult one, two;
  std::thread t1([&] { one = Log({{"app_handle", h}, {"follow", true}}); });
  std::thread t2([&] { two = Log({{"app_handle", h}, {"follow", true}}); });
  t1.join();
  t2.join();
  EXPECT_EQ(one.lines.size(), 310u);
  EXPECT_EQ(one.lines, two.lines);
  EXPECT_EQ(one.lines.front(), "r/0 line 0");
  EXPECT_EQ(Status(h)["state"], "SUCCEEDED");  // a follow ends once the app is terminal
}

TEST_F(LogsTest, AStalledFollowerNeverBlocksTheReplica) {
  std::string h = Run(App("spew", {FakeRole("r", {"--sleep", "0.2", "--spew-mb", "100"})}),
                      {{"log_max_bytes", "0"}});
  // A follower that sends its request and then never reads.
  auto stalled = DaemonClient::Connect(socket_);
  ASSERT_TRUE(stalled.has_value());
  std::string frame = protocol::EncodeRequest({1, "log", {{"app_handle", h}, {"follow", true}}});
  ASSERT_EQ(::send(stalled->fd(), frame.data(), frame.size(), MSG_NOSIGNAL), static_cast<ssize_t>(frame.size()));
  json st = Wait(h);  // finishes although the follower reads nothing
  EXPECT_EQ(st["state"], "SUCCEEDED");
  EXPECT_EQ(fs::file_size(LogDirOf(h) + "/r/0/stdout.log"), 100u << 20);
  std::string status = ReadFile("/proc/" + std::to_string(daemon_pid_) + "/status");
  size_t rss_at = status.find("VmRSS:");
  long rss_kb = std::atol(status.c_str() + rss_at + 6);
  if (!kSanitized) {
    EXPECT_LT(rss_kb, 64 * 1024) << "daemon memory must stay bounded";
  }
  EXPECT_TRUE(Call("version", json::object()).has_value());
}

TEST_F(LogsTest, RingRotationKeepsTheBudgetAndReportsDroppedBytes) {
  std::string h = Run(App("ring", {FakeRole("r", {"--lines", "200000"})}), {{"log_max_bytes", "256K"}});
  Wait(h);
  uintmax_t total = 0;
  int segments = 0;
  for (const auto& e : fs::directory_iterator(LogDirOf(h) + "/r/0")) {
    std::string name = e.path().filename().string();
    if (name.rfind("stdout.log", 0) == 0) {
      total += e.file_size();
      ++segments;
    }
  }
  EXPECT_GT(segments, 1);
  EXPECT_LE(total, 256u * 1024 + 64 * 1024);  // within the budget (plus the live segment's slack)
  auto r = Log({{"app_handle", h}, {"stream", "stdout"}});
  ASSERT_FALSE(r.notices.empty());
  ASSERT_TRUE(r.notices[0].contains("dropped_bytes"));
  uint64_t dropped = r.notices[0]["dropped_bytes"];
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(r.lines.back(), "r/0 line 199999");
  // What is left starts at a whole line and runs in order to the end: dropped
  // bytes plus the bytes shown add up to everything the replica wrote.
  uint64_t written = 0;
  for (int i = 0; i < 200000; ++i) written += 6 + std::to_string(i).size();
  uint64_t shown = 0;
  for (const auto& l : r.lines) shown += l.size() - 4 + 1;  // minus "r/0 ", plus '\n'
  EXPECT_EQ(dropped + shown, written);
  int first = std::atoi(r.lines.front().c_str() + 9);
  EXPECT_EQ(r.lines.front(), "r/0 line " + std::to_string(first));
  EXPECT_EQ(r.lines.size(), static_cast<size_t>(200000 - first));
}

TEST_F(LogsTest, TheDaemonWideBudgetEvictsTheOldestFinishedAppsLogsFirst) {
  StopDaemon();
  StartDaemon({"--log-max-total", "300K"});
  std::string user_logs = (dir_ / "mine").string();
  std::string mine = Run(App("mine", {FakeRole("r", {"--lines", "10000"})}), {{"log_dir", user_logs}});
  Wait(mine);
  std::string a = Run(App("a", {FakeRole("r", {"--lines", "10000"})}));  // ~216 KB on disk
  Wait(a);
  EXPECT_TRUE(fs::exists(LogDirOf(a)));
  std::string b = Run(App("b", {FakeRole("r", {"--lines", "10000"})}));  // now over 300 KB
  Wait(b);
  EXPECT_TRUE(WaitUntil([&] { return !fs::exists(LogDirOf(a)); }));
  auto gone = Call("log", {{"app_handle", a}});
  ASSERT_FALSE(gone.has_value());
  EXPECT_THAT(gone.error().message, HasSubstr("were evicted to keep the log directory under --log-max-total"));
  EXPECT_EQ(Status(a)["state"], "SUCCEEDED");  // the record stays
  EXPECT_EQ(Log({{"app_handle", b}}).lines.size(), 10000u);
  std::string mine_id = mine.substr(mine.rfind('/') + 1);
  EXPECT_TRUE(fs::exists(user_logs + "/torchx/" + mine_id + "/r/0/stdout.log"));  // never counted, never deleted
}

TEST_F(LogsTest, AMillionLinesAsFastAsPossibleNoneLostOrTorn) {
  std::string h = Run(App("million", {FakeRole("r", {"--lines", "1000000"})}), {{"log_max_bytes", "0"}});
  Wait(h);
  std::ifstream in(LogDirOf(h) + "/r/0/combined.log");
  long expected = 0;
  for (std::string line; std::getline(in, line); ++expected) {
    ASSERT_EQ(line, "line " + std::to_string(expected));
  }
  EXPECT_EQ(expected, 1000000);
}

TEST_F(LogsTest, DiskFullKeepsTheReplicaRunningCountsTheLossAndResumes) {
  if (::geteuid() != 0 || std::system("unshare -m true 2>/dev/null") != 0) {
    GTEST_SKIP() << "needs root and unshare -m to mount a private 64 KiB tmpfs";
  }
  // A private mount namespace: a crashed test leaves no mount behind.
  StopDaemon();
  fs::path tiny = dir_ / "tiny";
  fs::create_directories(tiny);
  std::string script = "mount -t tmpfs -o size=64k tmpfs " + tiny.string() + " && exec " + TORCHXD_BIN +
                       " --socket " + socket_ + " --state-dir " + state_dir_ + " --log-dir " + tiny.string() +
                       " --grace-period 0.5 >> " + daemon_log_ + " 2>&1";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    ::execl("/usr/bin/unshare", "unshare", "-m", "sh", "-c", script.c_str(), nullptr);
    ::_exit(127);
  }
  daemon_pid_ = pid;
  ASSERT_TRUE(WaitUntil([&] { return DaemonClient::Connect(socket_).has_value(); }));
  std::string h = Run(App("full", {FakeRole("r", {"--lines", "20000", "--stdout", "done"})}),
                      {{"log_max_bytes", "0"}});
  json st = Wait(h);
  EXPECT_EQ(st["state"], "SUCCEEDED");  // the replica kept running and exited normally
  EXPECT_GT(Replica(st, "r", 0)["log_bytes_lost"].get<uint64_t>(), 0u);
}

}  // namespace
}  // namespace torchxd::testing
