// What an adversarial review found: requests that crashed, hung or fooled
// torchxd, or lost what it had acknowledged. One test per finding; each
// failed before its fix.
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <gmock/gmock.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "core/local_ports.h"
#include "core/protocol.h"
#include "core/unique_fd.h"
#include "tests/daemon/hardening_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;


TEST_F(HardeningTest, ANulCharacterAnywhereInARunIsRefused) {
  StartDaemon();
  const std::string nul("\0", 1);
  json good = App("a", {FakeRole("r", {"--exit", "0"})});
  struct Case {
    std::string name;
    json params;
    std::string path;
  };
  auto with_role = [&](const std::string& key, const json& value) {
    json app = good;
    app["roles"][0][key] = value;
    return RunParams(app);
  };
  json mount_app = good;
  mount_app["roles"][0]["mounts"] = {{{"type", "bind"}, {"src_path", "/a" + nul}, {"dst_path", "/b"}}};
  json named = good;
  named["name"] = "a" + nul + "b";
  const Case cases[] = {
      // The reported one: fields injected into the spec the shim runs.
      {"args", with_role("args", {"-c", "id" + nul + "0" + nul + "0"}), "params.app.roles[0].args[1]"},
      {"entrypoint", with_role("entrypoint", "/bin/sh" + nul + "x"), "params.app.roles[0].entrypoint"},
      {"env value", with_role("env", {{"A", "b" + nul}}), "params.app.roles[0].env.A"},
      {"env key", with_role("env", {{"A" + nul, "b"}}), "params.app.roles[0].env.A\\u0000"},
      {"role name", with_role("name", "r" + nul), "params.app.roles[0].name"},
      {"app name", RunParams(named), "params.app.name"},
      {"mount", RunParams(mount_app), "params.app.roles[0].mounts[0].src_path"},
      {"session", RunParams(good, {{"session", nul}}), "params.session"},
      {"cwd", RunParams(good, {{"cwd", "/tmp" + nul + "/x"}}), "params.cwd"},
      {"client env", RunParams(good, {{"env", {{"HOME", "/root" + nul}}}}), "params.env.HOME"},
      {"cfg", RunParams(good, {{"cfg", {{"log_dir", "/tmp" + nul}}}}), "params.cfg.log_dir"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = Call("run", c.params);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(r.error().message, HasSubstr(c.path + ": must not contain a NUL character"));
  }
  EXPECT_EQ(AppCount(), 0u);  // nothing was started
  EXPECT_TRUE(Answers());
}

TEST_F(HardeningTest, SessionAndNamesCannotLeaveTheLogDirectory) {
  StartDaemon();
  json app = App("a", {FakeRole("r", {"--stdout", "hi"})});
  for (const std::string& session : std::vector<std::string>{"..", ".", " ", " x", "a/b", "", std::string(200, 's')}) {
    SCOPED_TRACE("session \"" + session + "\"");
    auto r = Call("run", RunParams(app, {{"session", session}}));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(r.error().message, HasSubstr("params.session: must"));
  }
  // Nothing was written next to the log directory.
  for (const auto& entry : fs::directory_iterator(state_dir_)) {
    std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "logs" || name == "shims" || name.rfind("torchxd", 0) == 0) << "unexpected " << entry.path();
  }
  EXPECT_EQ(AppCount(), 0u);
}

TEST_F(HardeningTest, OverlongNamesAreRefusedAtSubmit) {
  StartDaemon();
  auto long_app = Call("run", RunParams(App(std::string(5000, 'a'), {FakeRole("r", {"--exit", "0"})})));
  ASSERT_FALSE(long_app.has_value());
  EXPECT_EQ(long_app.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(long_app.error().message, HasSubstr("params.app: name: must be at most 128 bytes, got 5000"));
  auto long_role = Call("run", RunParams(App("a", {FakeRole(std::string(300, 'r'), {"--exit", "0"})})));
  ASSERT_FALSE(long_role.has_value());
  EXPECT_THAT(long_role.error().message, HasSubstr("roles[0].name: must be at most 128 bytes, got 300"));
  // At the limit everything works, logs included.
  std::string h = Run(App(std::string(128, 'a'), {FakeRole(std::string(128, 'r'), {"--stdout", "captured"})}));
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(ReadLog(h, std::string(128, 'r'), 0), "captured\n");
}

TEST_F(HardeningTest, ARegexOverAHugeLineNeitherCrashesNorStallsTheDaemon) {
  StartDaemon();
  // 50 KB and 3 MB lines: the standard library's regex, used before RE2, recursed once per character (SIGSEGV).
  std::string h = Run(App("big", {FakeRole("r", {"--big-line", "51200", "--stdout", " loss=1", "--big-line",
                                                 "3145728", "--stdout", " loss=2", "--stdout", "other"})}));
  Wait(h);
  std::vector<size_t> sizes;
  auto client = DaemonClient::Connect(socket_);
  ASSERT_TRUE(client.has_value());
  auto done = client->Call("log", {{"app_handle", h}, {"regex", ".*loss"}}, [&](const json& e) {
    for (const auto& l : e.value("lines", json::array())) sizes.push_back(l[1].get<std::string>().size());
  });
  ASSERT_TRUE(done.has_value()) << done.error().message;
  // The 3 MB line comes in 1 MiB pieces; only the pieces holding "loss" match.
  EXPECT_EQ(sizes, (std::vector<size_t>{51200 + 7, 3145728 + 7 - 3 * (1u << 20)}));
  auto bad = Call("log", {{"app_handle", h}, {"regex", "(?=lookahead)"}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("invalid regex `(?=lookahead)`"));
  EXPECT_TRUE(Answers());
}

// A replica owns its log directory: a 2 GiB index (read whole, it stalled
// every client past the watchdog and took gigabytes) and thousands of names
// that look like segments (listed on the loop) cost the daemon nothing now.
TEST_F(HardeningTest, AHugeLogIndexOrThousandsOfSegmentNamesNeverStallTheDaemon) {
  StartDaemon();
  size_t before = RssKb();
  std::string h = Run(App("idx", {ShRole("r",
                                         "echo hi; d=$(dirname \"$TORCHELASTIC_ERROR_FILE\"); "
                                         // After the shim indexed "hi": had it opened the index
                                         // only after the truncate, it would have compacted it.
                                         "for i in $(seq 500); do [ -s \"$d/combined.idx\" ] && break; sleep 0.01; done; "
                                         "truncate -s 2G \"$d/combined.idx\"; "
                                         "seq 1000000 1020000 | sed \"s|^|$d/combined.log.|\" | xargs touch")}),
                      json::object(), "local_cwd");
  // Making 20,001 files takes the replica seconds, and far longer with both cores busy on a
  // journal-less ext4 that had many files deleted (its allocator then skips recently freed inodes).
  auto done = CallWithin("wait", {{"app_handle", h}}, 90);  // within the test's 120 s
  ASSERT_TRUE(done.has_value()) << done.error().message;
  ASSERT_EQ((*done)["state"], "SUCCEEDED");
  std::atomic<bool> reading{true};
  std::atomic<int> answered{0};
  std::thread others([&] {
    while (reading) answered += Answers(5) ? 1 : 0;
  });
  auto combined = CallWithin("log", {{"app_handle", h}}, 10);
  reading = false;
  others.join();
  ASSERT_FALSE(combined.has_value());
  EXPECT_EQ(combined.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(combined.error().message, HasSubstr("combined.idx is 2147483648 bytes"));
  EXPECT_THAT(combined.error().message, HasSubstr("remove it"));
  auto out = CallWithin("log", {{"app_handle", h}, {"stream", "stdout"}}, 10);  // its other streams read as ever
  ASSERT_TRUE(out.has_value()) << out.error().message;
  EXPECT_EQ(ReadLog(h, "r", 0), "hi\n");
  EXPECT_TRUE(Answers());
  if (!kSanitized) {
    EXPECT_LT(RssKb(), before + 64 * 1024);
  }
}

// Nonsense from a client is refused at submit, naming the field and its
// range; nothing past 64 bits is cut down to fit.
TEST_F(HardeningTest, IntegersAndDelaysOutOfRangeAreRefusedNamingTheRange) {
  StartDaemon();
  auto refused = [&](const json& params, const std::string& says) {
    auto r = Call("run", RunParams(App("n", {ShRole("r", "true")}), params));
    ASSERT_FALSE(r.has_value()) << params.dump();
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << params.dump();
    EXPECT_THAT(r.error().message, HasSubstr(says)) << params.dump();
  };
  refused({{"cfg", {{"restart_backoff", 0}}}}, "restart_backoff, must be between 0.1 and 86400, but was: 0");
  refused({{"cfg", {{"restart_backoff", -5.0}}}}, "restart_backoff, must be between 0.1 and 86400");
  refused({{"cfg", {{"restart_backoff_max", 1e308}}}}, "restart_backoff_max, must be between 0.1 and 86400");
  refused({{"cfg", {{"priority", 4294967297LL}}}}, "priority, must be between -1000 and 1000, but was: 4294967297");
  refused({{"cfg", {{"priority", json::parse("18446744073709551615")}}}}, "priority");
  json huge_gpu = App("n", {ShRole("r", "true")});
  huge_gpu["roles"][0]["resource"] = {{"gpu", json::parse("18446744073709551615")}};
  auto gpu = Call("run", RunParams(huge_gpu));
  ASSERT_FALSE(gpu.has_value());
  EXPECT_THAT(gpu.error().message,
              HasSubstr("roles[0].resource.gpu: must be an integer between -2147483648 and 2147483647, got "
                        "18446744073709551615"));
  json retries = App("n", {ShRole("r", "true")});
  retries["roles"][0]["max_retries"] = 1000000000;
  auto r = Call("run", RunParams(retries));
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message, HasSubstr("roles[0].max_retries: must be between 0 and 1000, got 1000000000"));
  auto grace = Call("cancel", {{"app_handle", "local_cwd://torchx/none"}, {"grace_period", 1e308}});
  ASSERT_FALSE(grace.has_value());
  // An elastic app: a scale past 32 bits is refused, not read as 1.
  json elastic = App("el", {ShRole("r", "sleep 30", 2)});
  elastic["roles"][0]["min_replicas"] = 1;
  std::string h = Run(elastic, json::object(), "local_cwd");
  auto scale = Call("scale", {{"app_handle", h}, {"scale", {{"r", 4294967297LL}}}});
  ASSERT_FALSE(scale.has_value());
  EXPECT_THAT(scale.error().message, HasSubstr("params.scale.r: must be an integer between 0 and 2147483647"));
  auto log = Call("log", {{"app_handle", h}, {"replicas", {4294967296LL}}});
  ASSERT_FALSE(log.has_value());
  EXPECT_THAT(log.error().message, HasSubstr("between 0 and 2147483647"));
  auto id = Call("status", {{"app_handle", h}});
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ((*id)["roles"][0]["replicas"].size(), 2u);
  CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
}

// 64 replicas failing at once with the smallest backoff: the user's restarts
// are spread at --restart-rate-per-user, and everyone else is answered.
TEST_F(HardeningTest, ACrashLoopRestartsAtTheUsersRateNotTheLoopsSpeed) {
  StartDaemon({"--restart-rate-per-user", "20"});
  json app = App("storm", {ShRole("r", "exit 1", 64)});
  app["roles"][0]["max_retries"] = 1000;
  app["roles"][0]["retry_policy"] = "REPLICA";
  auto started = std::chrono::steady_clock::now();
  std::string h = Run(app, {{"restart_backoff", 0.1}, {"restart_backoff_max", 0.1}}, "local_cwd");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_TRUE(Answers(2));
  json status = Status(h);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  int attempts = 0;
  for (const auto& r : status["roles"][0]["replicas"]) attempts += r["attempt"].get<int>();
  // Each replica's first start, a burst of one second's worth (20), then 20 a second.
  EXPECT_LE(attempts, 64 + 20 + static_cast<int>(20 * seconds) + 20) << "in " << seconds << " s";
  EXPECT_GE(attempts, 64 + 20) << "restarts must go on, spread out";
  CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
}

TEST_F(HardeningTest, DeeplyNestedJsonIsRefusedBeforeAnyRecursion) {
  StartDaemon();
  std::string deep = R"({"v":1,"id":1,"method":"version","params":{"x":)" + std::string(150000, '[') +
                     std::string(150000, ']') + "}}\n";
  UniqueFd fd = Raw();
  ASSERT_TRUE(SendAll(fd.get(), deep));
  std::string reply;
  char c;
  while (::read(fd.get(), &c, 1) == 1 && c != '\n') reply += c;
  EXPECT_THAT(reply, HasSubstr("request: JSON nested deeper than 64 levels"));
  // An AppDef's metadata nested deep, inside the frame limit.
  json app = App("a", {FakeRole("r", {"--exit", "0"})});
  std::string text = app.dump();
  std::string nested = text.substr(0, text.size() - 1) + R"(,"metadata":{"m":)" + std::string(80000, '[') +
                       std::string(80000, ']') + "}}";
  std::string frame = R"({"v":1,"id":2,"method":"run","params":{"cwd":"/","app":)" + nested + "}}\n";
  ASSERT_TRUE(SendAll(fd.get(), frame));
  reply.clear();
  while (::read(fd.get(), &c, 1) == 1 && c != '\n') reply += c;
  EXPECT_THAT(reply, HasSubstr("nested deeper than 64 levels"));
  EXPECT_TRUE(Answers());
}

// A frame may hold five million empty strings in its 16 MiB, which would
// parse to gigabytes: a request of more values than any AppDef needs is
// refused before it is parsed, naming the bound.
TEST_F(HardeningTest, MillionsOfTinyValuesAreRefusedBeforeTheyAreParsed) {
  StartDaemon();
  std::string args;
  for (int i = 0; i < 5'000'000; ++i) args += i ? ",\"\"" : "\"\"";
  std::string frame = R"({"v":1,"id":1,"method":"run","params":{"cwd":"/","app":{"name":"a","roles":[{"name":"r","entrypoint":"true","args":[)" +
                      args + "]}]}}}\n";
  ASSERT_LT(frame.size(), 16u << 20);
  size_t before = PeakRssKb();
  UniqueFd fd = Raw();
  ASSERT_TRUE(SendAll(fd.get(), frame));
  std::string reply;
  char c;
  while (::read(fd.get(), &c, 1) == 1 && c != '\n') reply += c;
  EXPECT_THAT(reply, HasSubstr("request: JSON of more than 262144 values"));
  EXPECT_TRUE(Answers());
  if (kSanitized) GTEST_SKIP() << "resident sizes are not measured under AddressSanitizer";
  EXPECT_LT(PeakRssKb(), before + 64 * 1024) << "peak RSS " << before << " KiB -> " << PeakRssKb() << " KiB";
}

// What a replica's start copies from the request is bounded where it is
// read: a cwd no process could start in, a device count that would be that
// many entries in every container, a cfg (log_dir, Slurm's partition) of megabytes.
TEST_F(HardeningTest, ACwdPastPathMaxTooManyDevicesAndAHugeCfgAreRefusedNamingTheBound) {
  StartDaemon();
  json params = RunParams(App("a", {ShRole("r", "true")}));
  params["cwd"] = "/" + std::string(8 << 20, 'a');
  auto cwd = Call("run", params);
  ASSERT_FALSE(cwd.has_value());
  EXPECT_THAT(cwd.error().message, HasSubstr("params.cwd: must be shorter than 4096 bytes (PATH_MAX), got 8388609"));
  json role = ShRole("r", "true");
  role["resource"] = {{"devices", {{"vpc.amazonaws.com/efa", 3'000'000}}}};
  auto devices = Call("run", RunParams(App("a", {role})));
  ASSERT_FALSE(devices.has_value());
  EXPECT_THAT(devices.error().message, HasSubstr("devices.vpc.amazonaws.com/efa: must be within [0, 1024], got 3000000"));
  params = RunParams(App("a", {ShRole("r", "true")}), {{"cfg", {{"log_dir", std::string(100000, 'l')}}}});
  auto cfg = Call("run", params);
  ASSERT_FALSE(cfg.has_value());
  EXPECT_THAT(cfg.error().message, HasSubstr("params.cfg: 100014 bytes of JSON; a run's options take at most 65536"));
  // A log directory the system could not make is refused before anything is built for it.
  params = RunParams(App("a", {ShRole("r", "true", 1024)}), {{"cfg", {{"log_dir", "/tmp/" + std::string(300, 'l')}}}});
  auto component = Call("run", params);
  ASSERT_FALSE(component.has_value());
  EXPECT_THAT(component.error().message, HasSubstr("is 300 bytes, more than the system takes (NAME_MAX 255)"));
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += "/" + std::string(250, 'd');
  params = RunParams(App("a", {ShRole("r", "true", 1024)}), {{"cfg", {{"log_dir", deep}}}});
  auto long_path = Call("run", params);
  ASSERT_FALSE(long_path.has_value());
  EXPECT_THAT(long_path.error().message, HasSubstr("more than the system takes (PATH_MAX 4096)"));
  EXPECT_TRUE(Answers());
}

// Reads `count` reply frames from `fd` on a thread (the daemon may wait for us to read).
std::thread ReadReplies(int fd, size_t count, std::vector<json>* out) {
  return std::thread([fd, count, out] {
    std::string buffer;
    char chunk[65536];
    while (out->size() < count) {
      ssize_t n = ::read(fd, chunk, sizeof(chunk));
      if (n <= 0) return;
      buffer.append(chunk, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
        out->push_back(json::parse(buffer.substr(start, nl - start), nullptr, false));
      }
      buffer.erase(0, start);
    }
  });
}

TEST_F(HardeningTest, ThousandsOfPipelinedRequestsBehindAWaitAreAnsweredInOrder) {
  StartDaemon();
  std::string h = Run(App("slow", {FakeRole("r", {"--sleep", "1"})}));
  UniqueFd fd = Raw();
  constexpr int kRequests = 20000;
  std::vector<json> replies;
  std::thread reader = ReadReplies(fd.get(), kRequests + 1, &replies);
  std::string frames = protocol::EncodeRequest({1, "wait", {{"app_handle", h}}});
  for (int i = 0; i < kRequests; ++i) frames += protocol::EncodeRequest({2 + i, "version", json::object()});
  ASSERT_TRUE(SendAll(fd.get(), frames));
  reader.join();
  ASSERT_EQ(replies.size(), static_cast<size_t>(kRequests + 1));
  EXPECT_EQ(replies[0]["result"]["state"], "SUCCEEDED");
  for (int i = 0; i < kRequests; ++i) ASSERT_EQ(replies[static_cast<size_t>(i + 1)]["id"], 2 + i);
  EXPECT_TRUE(Answers());
}

TEST_F(HardeningTest, AFloodOfGarbageFramesGetsOneErrorEach) {
  StartDaemon();
  std::string h = Run(App("slow", {FakeRole("r", {"--sleep", "1"})}));
  UniqueFd fd = Raw();
  // Garbage, then garbage between requests answered at once, all queued
  // behind a wait: every frame used to recurse into the next one.
  constexpr size_t kFrames = 100000;
  std::vector<json> replies;
  std::thread reader = ReadReplies(fd.get(), 2 * kFrames + 1, &replies);
  std::string frames = protocol::EncodeRequest({1, "wait", {{"app_handle", h}}});
  for (size_t i = 0; i < kFrames; ++i) frames += "x\n";
  std::string version = protocol::EncodeRequest({7, "version", json::object()});
  for (size_t i = 0; i < kFrames / 2; ++i) frames += "x\n" + version;
  ASSERT_TRUE(SendAll(fd.get(), frames));
  reader.join();
  ASSERT_EQ(replies.size(), 2 * kFrames + 1);
  EXPECT_EQ(replies[kFrames]["error"]["message"], "request is not valid JSON");
  EXPECT_EQ(replies.back()["id"], 7);
  EXPECT_TRUE(Answers());
}

TEST_F(HardeningTest, AClientThatNeverReadsCostsBoundedMemory) {
  StartDaemon({"--idle-timeout", "2"});
  size_t before = RssKb();
  UniqueFd fd = Raw();
  ASSERT_EQ(::fcntl(fd.get(), F_SETFL, O_NONBLOCK), 0);
  std::string frame = protocol::EncodeRequest({1, "version", json::object()});
  std::string batch;
  for (int i = 0; i < 1000; ++i) batch += frame;
  // Write until the daemon stops taking requests (or 400,000 were taken:
  // about 100 MB of replies it would have had to hold). 60,000 replies are
  // past its 8 MiB pause point; a stall before that is a busy machine.
  const size_t max = 400000 * frame.size(), enough = 60000 * frame.size();
  size_t sent = 0;
  auto last_progress = std::chrono::steady_clock::now();
  while (sent < max) {
    size_t off = sent % batch.size();
    ssize_t n = ::send(fd.get(), batch.data() + off, batch.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      last_progress = std::chrono::steady_clock::now();
      continue;
    }
    if (n < 0 && errno != EAGAIN) break;  // dropped already
    if (sent >= enough && std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(1)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_LT(sent, max) << "the daemon never stopped reading";
  if (!kSanitized) {
    EXPECT_LT(RssKb(), before + 64 * 1024) << "unread replies must stay bounded";
  }
  EXPECT_TRUE(Answers());  // others are served meanwhile
  // It stopped reading and took nothing for --idle-timeout: dropped.
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(daemon_log_).find("stopped reading its replies") != std::string::npos; }));
}

TEST_F(HardeningTest, AFifoOrLinkInTheLogDirectoryNeverBlocksTheDaemon) {
  StartDaemon();
  // The replica replaces its error file and the app's SUCCESS file with FIFOs:
  // opening either for the daemon used to block its loop forever.
  std::string h = Run(App("fifo", {ShRole("r",
                                          "d=$(dirname \"$TORCHELASTIC_ERROR_FILE\"); "
                                          "mkfifo \"$TORCHELASTIC_ERROR_FILE\" \"$d/../../SUCCESS\"; exit 3")}),
                      json::object(), "local_cwd");
  auto done = CallWithin("wait", {{"app_handle", h}}, 10);
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ((*done)["state"], "FAILED");
  EXPECT_EQ(Replica(*done, "r", 0)["exit_code"], 3);
  EXPECT_TRUE(Answers());
}

TEST_F(HardeningTest, ARefusedRunChangesNothing) {
  StartDaemon({"--cache-size", "1"});
  std::string first = Run(App("first", {FakeRole("r", {"--stdout", "kept"})}));
  Wait(first);
  auto bad = Call("run", RunParams(App("second", {FakeRole("r", {"--exit", "0"})}), {{"cfg", {{"log_max_bytes", "abc"}}}}));
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.error().message, HasSubstr("log_max_bytes"));
  // The finished app was not evicted to make room for a run that never came.
  EXPECT_EQ(Status(first)["state"], "SUCCEEDED");
  EXPECT_EQ(ReadLog(first, "r", 0), "kept\n");
  size_t dirs = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(state_dir_ + "/logs/torchx")) ++dirs;
  EXPECT_EQ(dirs, 1u);
}

TEST_F(HardeningTest, TooManyReplicasAreRefusedAtSubmit) {
  StartDaemon();
  auto huge = Call("run", RunParams(App("huge", {FakeRole("r", {"--exit", "0"}, 100000)})));
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(huge.error().message, HasSubstr("100000 replicas; this torchxd runs at most 1024 per app"));
  auto split = Call("run", RunParams(App("split", {FakeRole("a", {"--exit", "0"}, 600), FakeRole("b", {"--exit", "0"}, 600)})));
  ASSERT_FALSE(split.has_value());
  EXPECT_THAT(split.error().message, HasSubstr("1200 replicas"));
  StopDaemon();
  StartDaemon({"--max-replicas-per-app", "3"});
  EXPECT_FALSE(Call("run", RunParams(App("four", {FakeRole("r", {"--exit", "0"}, 4)}))).has_value());
  std::string three = Run(App("three", {FakeRole("r", {"--exit", "0"}, 3)}));
  EXPECT_EQ(Wait(three)["state"], "SUCCEEDED");
}

TEST_F(HardeningTest, RunningOutOfFileDescriptorsFailsReplicasNotTheDaemon) {
  // A daemon with few descriptors (its soft and hard limit both 128): each
  // replica costs about ten, so most of 60 cannot start.
  if (kSanitized) GTEST_SKIP() << "the sanitizer runtimes need descriptors of their own for their checks";
  daemon_nofile_ = 128;
  StartDaemon();
  std::string h = Run(App("many", {FakeRole("r", {"--sleep", "1"}, 60)}), {{"stop_on_failure", false}});
  auto done = CallWithin("wait", {{"app_handle", h}}, 60);
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ((*done)["state"], "FAILED");
  size_t failed = 0, succeeded = 0;
  for (const auto& r : (*done)["roles"][0]["replicas"]) {
    if (r["state_name"] == "SUCCEEDED") ++succeeded;
    if (r["state_name"] != "FAILED") continue;
    ++failed;
    EXPECT_THAT(r["error_message"].get<std::string>(), HasSubstr("Too many open files"));
  }
  EXPECT_GT(failed, 0u);
  EXPECT_GT(succeeded, 0u);
  EXPECT_TRUE(Answers());
  // Said, not repeated per replica.
  std::string log = ReadFile(daemon_log_);
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("Too many open files", at)) != std::string::npos; ++at) ++lines;
  EXPECT_LE(lines, 3u) << log.substr(0, 4000);
}

TEST_F(HardeningTest, EveryReplyFitsTheFrameLimit) {
  StartDaemon();
  // 300 replicas that each fail with a 60 KB error message: 18 MB of
  // messages, more than a frame may hold.
  std::string script =
      "m=$(head -c 60000 /dev/zero | tr '\\0' x); "
      "printf '{\"message\": {\"message\": \"%s\"}}' \"$m\" > \"$TORCHELASTIC_ERROR_FILE\"; exit 1";
  std::string h = Run(App("errors", {ShRole("r", script, 300)}), {{"stop_on_failure", false}});
  auto done = CallWithin("wait", {{"app_handle", h}}, 60);
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ((*done)["state"], "FAILED");
  EXPECT_LT(done->dump().size(), protocol::kMaxFrameBytes);
  std::string message = Replica(*done, "r", 7)["error_message"];
  EXPECT_EQ(message.substr(0, 100), std::string(100, 'x'));
  EXPECT_LE(message.size(), 4096u + 6);
  EXPECT_TRUE(Call("status", {{"app_handle", h}}).has_value());
}

// A wide app's status (encoded on the worker, not the loop) is whole, and
// clients that ask for it and leave before the answer cost nothing.
TEST_F(HardeningTest, AWideAppsStatusIsWholeAndClientsThatLeaveBeforeItCostNothing) {
  StartDaemon();
  constexpr int kReplicas = 96;
  std::string h = Run(App("wide", {FakeRole("r", {"--sleep", "60"}, kReplicas)}));
  json st;
  ASSERT_TRUE(WaitUntil([&] {
    st = Status(h);
    if (st["state"] != "RUNNING") return false;
    for (const auto& r : st["roles"][0]["replicas"]) {
      if (r["state_name"] != "RUNNING") return false;
    }
    return true;
  }, 60)) << st.dump().substr(0, 2000);
  ASSERT_EQ(st["roles"].size(), 1u);
  ASSERT_EQ(st["roles"][0]["replicas"].size(), static_cast<size_t>(kReplicas));
  EXPECT_FALSE(st["user"].get<std::string>().empty()) << st.dump().substr(0, 300);
  EXPECT_EQ(Replica(st, "r", kReplicas - 1)["state_name"], "RUNNING");
  std::string frame = json({{"v", 1}, {"id", 7}, {"method", "status"}, {"params", {{"app_handle", h}}}}).dump() + "\n";
  for (int i = 0; i < 50; ++i) {
    UniqueFd fd = Raw();
    ASSERT_TRUE(SendAll(fd.get(), frame));
  }  // each closed at once
  json again = Status(h);
  EXPECT_EQ(again["roles"][0]["replicas"].size(), static_cast<size_t>(kReplicas));
  CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
  EXPECT_EQ(Wait(h)["state"], "CANCELLED");
}

TEST_F(HardeningTest, ListComesInPagesThatNothingShifts) {
  StartDaemon();
  std::vector<std::string> handles;
  for (int i = 0; i < 5; ++i) {
    handles.push_back(Run(App("app" + std::to_string(i), {FakeRole("r", {"--exit", "0"})})));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::vector<std::string> seen;
  json params = {{"limit", 2}};
  for (int page = 0; page < 10; ++page) {
    json reply = CallOk("list", params);
    EXPECT_LE(reply["apps"].size(), 2u);
    for (const auto& row : reply["apps"]) seen.push_back(row[0]);
    if (page == 0) Run(App("later", {FakeRole("r", {"--exit", "0"})}));  // newer: never on a later page
    if (!reply.contains("next")) break;
    params["after"] = reply["next"];
  }
  std::vector<std::string> newest_first(handles.rbegin(), handles.rend());
  EXPECT_EQ(seen, newest_first);
  auto bad = Call("list", {{"after", "nonsense"}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("params.after"));
}

// `torchx status APP_ID` resolves the id through list: only the apps whose id starts so come back.
TEST_F(HardeningTest, ListByAppIdPrefixSendsOnlyThoseApps) {
  StartDaemon();
  std::vector<std::string> ids;
  for (const char* name : {"alpha", "alphabet", "beta"}) {
    std::string h = Run(App(name, {FakeRole("r", {"--exit", "0"})}));
    ids.push_back(h.substr(h.rfind('/') + 1));
  }
  auto ids_of = [&](const json& params) {
    std::set<std::string> out;
    json reply = CallOk("list", params);
    for (const auto& row : reply["apps"]) out.insert(row[1].get<std::string>());
    return out;
  };
  EXPECT_EQ(ids_of({{"app_id_prefix", "alpha"}}), (std::set<std::string>{ids[0], ids[1]}));
  EXPECT_EQ(ids_of({{"app_id_prefix", ids[0]}}), (std::set<std::string>{ids[0]}));
  EXPECT_EQ(ids_of({{"app_id_prefix", "gamma"}}), std::set<std::string>{});
  EXPECT_EQ(ids_of({{"app_id_prefix", ""}}).size(), 3u) << "an empty prefix is every app";
  json page = CallOk("list", {{"app_id_prefix", "alpha"}, {"limit", 1}});
  ASSERT_EQ(page["apps"].size(), 1u);
  ASSERT_TRUE(page.contains("next"));
  json rest = CallOk("list", {{"app_id_prefix", "alpha"}, {"limit", 1}, {"after", page["next"]}});
  ASSERT_EQ(rest["apps"].size(), 1u);
  EXPECT_FALSE(rest.contains("next"));
  auto bad = Call("list", {{"app_id_prefix", 7}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("params.app_id_prefix: must be a string"));
}

// Mounts a tmpfs of `size` at `dir` in a private mount namespace of this test
// process (ctest runs each test in its own process; the daemons it starts
// share the namespace and the mount goes away with the process).
bool PrivateTmpfs(const fs::path& dir, const std::string& size) {
  if (::geteuid() != 0 || ::unshare(CLONE_NEWNS) != 0) return false;
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  fs::create_directories(dir);
  return ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
}

// Writes zeros to `path` until the filesystem is full.
void Fill(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  static const std::string zeros(4096, '\0');
  while (::write(fd.get(), zeros.data(), zeros.size()) > 0) {
  }
}

TEST_F(HardeningTest, AFullStateDiskRefusesRunsAndLosesNothingAcknowledged) {
  if (!PrivateTmpfs(state_dir_, "512k")) GTEST_SKIP() << "needs root and a private mount namespace for a small tmpfs";
  std::string logs = (dir_ / "logs").string();
  StartDaemon({"--log-dir", logs});
  std::string before = Run(App("before", {FakeRole("r", {"--exit", "0"})}));
  Wait(before);
  Fill(fs::path(state_dir_) / "fill");
  std::vector<std::string> acknowledged{before}, refused_names;
  for (int i = 0; i < 50 && refused_names.size() < 3; ++i) {
    std::string name = "during" + std::to_string(i);
    auto r = Call("run", RunParams(App(name, {FakeRole("r", {"--stdout", "ran"})})));
    if (r) {
      acknowledged.push_back((*r)["app_handle"]);
      continue;
    }
    EXPECT_EQ(r.error().code, ErrorCode::kIo);
    EXPECT_THAT(r.error().message, HasSubstr("could not record the app, so nothing was started"));
    refused_names.push_back(name);
  }
  ASSERT_FALSE(refused_names.empty()) << "the full disk never refused a run";
  fs::remove(fs::path(state_dir_) / "fill");
  std::string after = Run(App("after", {FakeRole("r", {"--exit", "0"})}));
  acknowledged.push_back(after);
  Wait(after);
  StopDaemon();
  StartDaemon({"--log-dir", logs});
  json list = CallOk("list", json::object());
  std::vector<std::string> listed;
  for (const auto& row : list["apps"]) listed.push_back(row[0]);
  for (const auto& h : acknowledged) EXPECT_NE(std::find(listed.begin(), listed.end(), h), listed.end()) << h;
  for (const auto& row : list["apps"]) {
    EXPECT_EQ(std::find(refused_names.begin(), refused_names.end(), row[2]), refused_names.end())
        << row[2] << " was refused yet stored";
  }
  for (const auto& name : refused_names) {  // and nothing of it ran
    for (const auto& e : fs::directory_iterator(logs + "/torchx")) {
      EXPECT_NE(e.path().filename().string().rfind(name + "-", 0), 0u) << e.path();
    }
  }
}

TEST_F(HardeningTest, AFullLogDiskIsSaidOnceAndReadersAreToldWhere) {
  fs::path tiny = dir_ / "tiny";
  if (!PrivateTmpfs(tiny, "256k")) GTEST_SKIP() << "needs root and a private mount namespace for a small tmpfs";
  StartDaemon({"--log-dir", tiny.string()});
  std::string d = dir_.string();
  // "before" fills exactly one page of each file: the next write needs a new one.
  std::string script = "printf '%4095s\\n' before; while [ ! -e " + d + "/full ]; do sleep 0.02; done; echo lost-line; "
                       "while [ ! -e " + d + "/freed ]; do sleep 0.02; done; echo after";
  std::string h = Run(App("gap", {ShRole("r", script, 2)}), {{"log_max_bytes", "0"}});
  auto combined = [&](int replica) {
    return ReadFile(tiny / "torchx" / h.substr(h.rfind('/') + 1) / "r" / std::to_string(replica) / "combined.log");
  };
  ASSERT_TRUE(WaitUntil([&] { return combined(0).find("before") != std::string::npos &&
                                     combined(1).find("before") != std::string::npos; }));
  Fill(tiny / "fill");
  std::ofstream(dir_ / "full").put('x');
  ASSERT_TRUE(WaitUntil([&] {
    json st = Status(h);
    return Replica(st, "r", 0)["log_bytes_lost"] > 0 && Replica(st, "r", 1)["log_bytes_lost"] > 0;
  }));
  fs::remove(tiny / "fill");
  std::ofstream(dir_ / "freed").put('x');
  Wait(h);
  // The gap is marked where it is, before what came after it.
  EXPECT_EQ(combined(0),
            std::string(4089, ' ') + "before\n[torchxd] 10 bytes of output were lost here: the log disk was full\nafter\n");
  // One daemon warning for the whole episode, however many replicas lost output.
  std::string log = ReadFile(daemon_log_);
  size_t warnings = 0;
  for (size_t at = 0; (at = log.find("log disk full", at)) != std::string::npos; ++at) ++warnings;
  EXPECT_EQ(warnings, 1u) << log;
  // A reader is told, per replica, before the lines.
  auto client = DaemonClient::Connect(socket_);
  ASSERT_TRUE(client.has_value());
  std::vector<json> notices;
  ASSERT_TRUE(client->Call("log", {{"app_handle", h}, {"stream", "stdout"}}, [&](const json& e) {
    if (e.contains("lost_bytes")) notices.push_back(e);
  }).has_value());
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_EQ(notices[0]["lost_bytes"], 10);
}

// Two daemons on one box (two users' own) probed a free rendezvous port
// within the seconds before either job bound it, and handed it to both: the
// second job joined the first's store. Here the test holds a claim as another
// daemon would; the port itself stays bindable throughout.
TEST_F(HardeningTest, APortAnotherDaemonClaimedIsPassedOverAndTheOneGivenStaysClaimedUntilTheAppEnds) {
  // Below the kernel's ephemeral range (32768 and up here): the declared port must stay bindable for the
  // whole test, and there any connection could take it. Clear of TorchX's 29500 and the 999 above it, and
  // of the 10000-29000 the next test binds and the 31900-32700 LocalPortsTest claims in.
  int declared = 0;
  for (int p = 30600 + static_cast<int>(::getpid() % 1300); p < 31900 && declared == 0; ++p) {
    if (core::PortIsFree(p)) declared = p;
  }
  ASSERT_NE(declared, 0);
  core::PortClaim neighbours = core::ClaimPort(declared);
  ASSERT_TRUE(neighbours.fd.valid());
  ASSERT_TRUE(core::PortIsBindable(declared));
  StartDaemon({"--live-restore"});
  json role = PortRole(declared);
  std::string h = Run(App("ddp", {role}));
  int port = GivenPort(h);
  ASSERT_GT(port, 0) << Status(h).dump();
  EXPECT_NE(port, declared);
  EXPECT_GT(port, declared);
  EXPECT_LE(port, declared + 999);
  EXPECT_TRUE(core::ClaimPort(port).taken) << "the daemon holds no claim on " << port;
  // A daemon killed and started again claims its running apps' ports again.
  StopDaemon(SIGKILL);
  EXPECT_FALSE(core::ClaimPort(port).taken);
  StartDaemon({"--live-restore"});
  ASSERT_TRUE(WaitUntil([&] { return Status(h)["state"] == "RUNNING"; }));
  EXPECT_TRUE(core::ClaimPort(port).taken);
  CallOk("cancel", {{"app_handle", h}});
  Wait(h);
  ASSERT_TRUE(WaitUntil([&] { return !core::ClaimPort(port).taken; }));
  // With the neighbour's claim gone, the declared port is kept.
  neighbours.fd.reset();
  std::string again = Run(App("ddp", {role}));
  ASSERT_TRUE(WaitUntil([&] { return ReadLog(again, "w", 0) == "localhost:" + std::to_string(declared) + "\n"; }))
      << ReadLog(again, "w", 0);
  CallOk("cancel", {{"app_handle", again}});
  Wait(again);
}

// A user bound the whole range a named port is searched in (29500-30499 for
// dist.ddp): the daemon handed out the declared port anyway, knowing it was
// taken, and the job sent its rendezvous to that user's listener.
TEST_F(HardeningTest, WhenEveryCandidatePortIsTakenTheAppGetsAFreePortElsewhereNeverATakenOne) {
  // 1,000 ports in a row that a listener can take, as the other user's does. They are sought below the
  // kernel's ephemeral range (32768 and up here), where the suite's own connections, TIME_WAIT included,
  // would break a run; a taken port restarts the run just past it.
  int declared = 0;
  std::vector<UniqueFd> listeners;
  constexpr int kLow = 10000, kHigh = 29000;  // and clear of TorchX's 29500
  const int start = kLow + static_cast<int>(::getpid() % 20) * 1000;
  for (int tried = 0, p = start; declared == 0 && tried < kHigh - kLow; ++tried, ++p) {
    if (p >= kHigh) {
      p = kLow;
      listeners.clear();
    }
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(p));
    if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd.get(), 4) != 0) {
      listeners.clear();
      continue;
    }
    listeners.push_back(std::move(fd));
    if (listeners.size() == 1000) declared = p - 999;
  }
  ASSERT_NE(declared, 0) << "no 1,000 free ports in a row";
  ASSERT_FALSE(core::PortIsBindable(declared));
  ASSERT_FALSE(core::PortIsBindable(declared + 999));
  StartDaemon();
  json role = PortRole(declared);
  std::string h = Run(App("ddp", {role}));
  int port = GivenPort(h);
  ASSERT_GT(port, 0) << Status(h).dump();
  EXPECT_TRUE(port < declared || port > declared + 999) << "handed out " << port << ", which a listener holds";
  EXPECT_TRUE(core::ClaimPort(port).taken) << "the daemon holds no claim on " << port;
  EXPECT_TRUE(WaitUntil([&] { return Status(h)["state"] == "RUNNING"; }));
  CallOk("cancel", {{"app_handle", h}});
  Wait(h);
}

// A variable no process could be started with (Linux's MAX_ARG_STRLEN) was
// accepted, and every replica then failed at its exec ("Argument list too
// long"): it is refused at run, naming the variable.
TEST_F(HardeningTest, AnAppNoProcessCouldStartWithIsRefusedNamingWhat) {
  StartDaemon();
  json role = FakeRole("w", {"--sleep", "1"});
  role["num_replicas"] = 4;
  role["env"] = {{"HUGE", std::string(200 * 1024, 'x')}};
  size_t apps = AppCount();
  auto r = Call("run", RunParams(App("e2big", {role})));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr("replica w/0 could never start: the variable HUGE is 204805 bytes"));
  EXPECT_EQ(AppCount(), apps) << "a refused run leaves no app behind";
}

// A role's variables were stored (and held) once per replica: 1 MB of role
// env x 200 replicas made a 203 MB database. Those the same for every replica
// are kept once per role; a variable naming the replica's id stays its own.
// Both survive a daemon restart, and a replica started again after it gets them.
TEST_F(HardeningTest, ARolesVariablesAreStoredOncePerRoleNotPerReplica) {
  StartDaemon({"--live-restore"});
  constexpr int kReplicas = 32;
  json role = ShRole("r", "echo rid=$RID big=${#BIG1}/${#BIG4}; sleep 60", kReplicas);
  role["max_retries"] = 1;
  role["retry_policy"] = "REPLICA";
  for (int i = 1; i <= 4; ++i) role["env"]["BIG" + std::to_string(i)] = std::string(100 * 1024, 'a' + i);
  role["env"]["RID"] = "${replica_id}";
  std::string h = Run(App("shared", {role}));
  std::string app_id = h.substr(h.rfind('/') + 1);
  auto said = [&](int replica) { return "rid=" + std::to_string(replica) + " big=102400/102400\n"; };
  ASSERT_TRUE(WaitUntil([&] { return ReadLog(h, "r", kReplicas - 1) == said(kReplicas - 1); }, 60))
      << ReadLog(h, "r", kReplicas - 1) << Status(h).dump();
  EXPECT_EQ(ReadLog(h, "r", 0), said(0));
  auto stored_bytes = [&] {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2((state_dir_ + "/torchxd.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT COALESCE((SELECT sum(length(text)) FROM app_parts WHERE app_id = ?1), 0) + "
                       "(SELECT length(record) FROM apps WHERE app_id = ?1)",
                       -1, &q, nullptr);
    sqlite3_bind_text(q, 1, app_id.c_str(), -1, SQLITE_TRANSIENT);
    int64_t n = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
  };
  int64_t bytes = stored_bytes();
  // 400 KiB of shared variables: twice (the AppDef, the role's copy) and a little; 12.8 MiB per replica before.
  EXPECT_GT(bytes, 800 * 1024);
  EXPECT_LT(bytes, 1200 * 1024) << "stored " << bytes << " bytes";
  // Killed and started again, the daemon reads the requests back; a replica killed then starts again with them.
  StopDaemon(SIGKILL);
  StartDaemon({"--live-restore"});
  ASSERT_TRUE(WaitUntil([&] { return Status(h)["state"] == "RUNNING"; })) << Status(h).dump();
  json status = Status(h);
  const json& third = Replica(status, "r", 3);
  ASSERT_TRUE(third["pid"].is_number()) << Status(h).dump();
  ASSERT_EQ(::kill(third["pid"].get<pid_t>(), SIGKILL), 0);
  EXPECT_TRUE(WaitUntil([&] { return ReadLog(h, "r", 3) == said(3) + said(3); }, 30)) << ReadLog(h, "r", 3);
  CallOk("cancel", {{"app_handle", h}});
  Wait(h);
}

}  // namespace
}  // namespace torchxd::testing
