// An app's timeline (`events`, `torchx events`, and what attached commands
// print of it): each step once, in order, with what an exit means and what
// comes next; followed live until the app ends; kept across a restart;
// bounded under a crash loop.
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/app_status.h"
#include "core/client.h"
#include "tests/cli/pty.h"
#include "tests/cli/shell.h"
#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class EventsTest : public DaemonFixture {
 protected:
  // A box of two GPUs (a topology file), for queueing.
  void StartWithGpus(std::vector<std::string> extra = {}) {
    std::string topology = (dir_ / "gpus.json").string();
    std::ofstream(topology) << R"({"gpus": [{"index": 0, "uuid": "GPU-0"}, {"index": 1, "uuid": "GPU-1"}]})";
    extra.insert(extra.begin(), {"--gpu-topology", topology});
    StartDaemon(extra);
  }
  json Events(const std::string& handle) { return CallOk("events", {{"app_handle", handle}})["events"]; }
  // "type replica: text" per event, for the order.
  static std::vector<std::string> Steps(const json& events) {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e["type"].get<std::string>() + (e.contains("replica") ? " " + e["replica"].get<std::string>() : ""));
    return out;
  }
  Output Torchx(const std::string& args) {
    return RunShell("cd " + dir_.string() + " && " + std::string(TORCHX_BIN) + " --socket " + socket_ + " " + args,
                    (dir_ / "torchx.err").string());
  }
  static json GpuRole(int gpus, const std::vector<std::string>& args) {
    json role = FakeRole("w", args);
    role["resource"] = {{"gpu", gpus}};
    return role;
  }
};

TEST_F(EventsTest, AQueuedAppThatRetriesTellsEachStepOnceInOrderWithWhatItsExitMeans) {
  StartWithGpus();
  std::string big = Run(App("big", {GpuRole(2, {"--sleep", "3"})}));  // holds the box while the next is submitted
  json flaky = GpuRole(1, {"--exit", "137"});
  flaky["max_retries"] = 1;
  std::string h = Run(App("flaky", {flaky}));
  json done = Wait(h);
  EXPECT_EQ(done["state"], "FAILED");
  json events = Events(h);
  EXPECT_EQ(Steps(events),
            (std::vector<std::string>{"submitted", "queued", "admitted", "started w/0", "exited w/0", "retrying w/0",
                                      "started w/0", "exited w/0", "ended"}))
      << events.dump(1);
  uint64_t last = 0;
  for (const auto& e : events) {
    EXPECT_GT(e["seq"].get<uint64_t>(), last);
    last = e["seq"].get<uint64_t>();
  }
  EXPECT_THAT(events[1]["text"].get<std::string>(), HasSubstr("queued: 1st in queue default, next to start: waiting for 1 GPU"));
  EXPECT_EQ(events[1]["data"]["position"], 1);
  EXPECT_THAT(events[2]["text"].get<std::string>(), HasSubstr("admitted: GPU "));
  EXPECT_EQ(events[3]["data"]["attempt"], 1);
  EXPECT_TRUE(events[3]["data"]["pid"].is_number());
  EXPECT_THAT(events[4]["text"].get<std::string>(),
              HasSubstr("failed (attempt 1): exit code 137 = SIGKILL, by the kernel's OOM killer"));
  EXPECT_EQ(events[4]["data"]["exit_code"], 137);
  EXPECT_THAT(events[5]["text"].get<std::string>(), HasSubstr("(0 of 1 retry left)"));
  EXPECT_EQ(events[5]["data"]["left"], 0);
  EXPECT_EQ(events[6]["data"]["attempt"], 2);
  EXPECT_THAT(events[8]["text"].get<std::string>(), HasSubstr("FAILED"));
  // After a cursor: the rest only.
  json rest = CallOk("events", {{"app_handle", h}, {"after", events[6]["seq"]}})["events"];
  EXPECT_EQ(Steps(rest), (std::vector<std::string>{"exited w/0", "ended"}));
  // The same after a restart: stored with the app.
  StopDaemon();
  StartWithGpus();
  EXPECT_EQ(Events(h), events);
  // torchx events prints a line each.
  Output out = Torchx("events " + h);
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(out.out, HasSubstr("exited      w/0 failed (attempt 2): exit code 137"));
  EXPECT_EQ(Torchx("events local_cwd://torchx/nope").exit_code, 1);
  Wait(big);
}

TEST_F(EventsTest, AFollowerHearsEachEventAsItHappensAndTheEndClosesIt) {
  StartDaemon();
  std::string h = Run(App("f", {FakeRole("w", {"--sleep", "0.5"})}));
  auto client = DaemonClient::Connect(socket_);
  ASSERT_TRUE(client.has_value());
  std::vector<std::string> heard;
  // Followed from before it starts: it hears the start and the end as they happen.
  auto reply = client->Call("events", {{"app_handle", h}, {"follow", true}}, [&](const json& e) {
    heard.push_back(e["event"]["type"].get<std::string>());
  });
  ASSERT_TRUE(reply.has_value()) << reply.error().message;
  EXPECT_EQ((*reply)["state"], "SUCCEEDED");
  EXPECT_EQ(heard, (std::vector<std::string>{"submitted", "admitted", "started", "exited", "ended"}));
  // A finished app's follow ends at once, after what it has.
  heard.clear();
  reply = client->Call("events", {{"app_handle", h}, {"follow", true}}, [&](const json& e) {
    heard.push_back(e["event"]["type"].get<std::string>());
  });
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(heard.size(), 5u);
  // Bad input names the field.
  auto bad = Call("events", {{"app_handle", h}, {"after", -1}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("params.after"));
}

// A log follower that asks for the app's events ("all") first hears the
// stored ones (read off the loop), then each new one as it happens: each
// once, in order, up to the end.
TEST_F(EventsTest, ALogFollowerHearsTheStoredEventsThenTheNewOnesEachOnce) {
  StartDaemon();
  std::string h = Run(App("f", {FakeRole("w", {"--sleep", "1"})}));
  for (int i = 0; i < 200 && Status(h)["state"] != "RUNNING"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto client = DaemonClient::Connect(socket_);
  ASSERT_TRUE(client.has_value());
  std::vector<std::string> heard;
  std::vector<uint64_t> seqs;
  auto reply = client->Call("log", {{"app_handle", h}, {"follow", true}, {"app_events", "all"}}, [&](const json& e) {
    if (!e.contains("app_event")) return;
    heard.push_back(e["app_event"]["type"].get<std::string>());
    seqs.push_back(e["app_event"]["seq"].get<uint64_t>());
  });
  ASSERT_TRUE(reply.has_value()) << reply.error().message;
  EXPECT_EQ(heard, (std::vector<std::string>{"submitted", "admitted", "started", "exited", "ended"}));
  EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  EXPECT_EQ(std::adjacent_find(seqs.begin(), seqs.end()), seqs.end()) << "an event twice";
}

TEST_F(EventsTest, RunPrintsWhatHappensToStderrAndQuietHidesIt) {
  StartWithGpus();
  std::string big = Run(App("big", {GpuRole(2, {"--sleep", "3"})}));  // holds the box while the next is submitted
  std::ofstream(dir_ / "flaky.json")
      << R"({"name": "flaky", "roles": [{"name": "w", "entrypoint": ")" << FAKE_JOB
      << R"(", "args": ["--stdout", "hello", "--exit", "3"], "max_retries": 1, "resource": {"gpu": 1}}]})";
  Output run = Torchx("run flaky.json");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("torchx: queued: 1st in queue default"));
  EXPECT_THAT(run.err, HasSubstr("torchx: admitted: GPU "));
  EXPECT_THAT(run.err, HasSubstr("torchx: w/0 failed (attempt 1): exit code 3"));
  EXPECT_THAT(run.err, HasSubstr("torchx: w/0 restarting in "));
  EXPECT_THAT(run.err, HasSubstr("w/0 hello"));
  // Each step once, though two attempts wrote to the log.
  EXPECT_EQ(run.err.find("torchx: admitted"), run.err.rfind("torchx: admitted"));
  Output quiet = Torchx("run -q flaky.json");
  EXPECT_EQ(quiet.exit_code, 1);
  EXPECT_EQ(quiet.err.find("torchx: w/0 failed"), std::string::npos) << quiet.err;
  EXPECT_THAT(quiet.err, HasSubstr("w/0 hello"));
  Wait(big);
}

TEST_F(EventsTest, ACrashLoopKeepsABoundedTimeline) {
  StartDaemon({"--restart-rate-per-user", "1000"});
  json loop = FakeRole("w", {"--exit", "1"});
  loop["max_retries"] = 60;  // 3 events a retry: far more than are kept
  std::string h = Run(App("loop", {loop}), {{"restart_backoff", 0.1}, {"restart_backoff_max", 0.1}});
  json done = Wait(h);
  EXPECT_EQ(done["state"], "FAILED");
  EXPECT_EQ(done["num_restarts"], 60);
  json events = Events(h);
  // EventsKept: 64 + 32 per replica (the store trims a quarter past it).
  EXPECT_LE(events.size(), (64u + 32u) * 5 / 4) << events.size();
  EXPECT_EQ(events.back()["type"], "ended") << "the newest are kept";
}

TEST_F(EventsTest, ListSaysWhyAnAppFailedAndGivesNoStartToOneThatNeverStarted) {
  StartWithGpus({"--ui-listen", "127.0.0.1:0"});
  std::string big = Run(App("big", {GpuRole(2, {"--sleep", "30"})}));
  std::string queued = Run(App("queued", {GpuRole(1, {"--sleep", "1"})}));
  std::string failed = Run(App("failed", {FakeRole("w", {"--exit", "3"})}));
  Wait(failed);
  json list = CallOk("list", json::object());
  std::vector<std::string> fields = list["fields"];
  auto col = [&](const std::string& name) { return std::find(fields.begin(), fields.end(), name) - fields.begin(); };
  for (const auto& row : list["apps"]) {
    if (row[0] == queued) {
      EXPECT_TRUE(row[col("started_ms")].is_null()) << row.dump();
      EXPECT_THAT(row[col("msg")].get<std::string>(), HasSubstr("1st in queue default, next to start: waiting for 1 GPU"));
    } else if (row[0] == failed) {
      EXPECT_TRUE(row[col("started_ms")].is_number());
      EXPECT_THAT(row[col("msg")].get<std::string>(), HasSubstr("w/0 failed"));
    }
  }
  Output text = RunShell("COLUMNS=200 " + std::string(TORCHX_BIN) + " --socket " + socket_ + " list",
                         (dir_ / "list.err").string());
  EXPECT_THAT(text.out, HasSubstr("REASON"));
  EXPECT_THAT(text.out, HasSubstr("PENDING     -                    -"));
  EXPECT_THAT(text.out, HasSubstr("w/0 failed: exited with code 3"));
  // A served page: status's UI URL is the app on it.
  json st = Status(failed);
  ASSERT_TRUE(st.contains("page_url")) << st.dump();
  EXPECT_THAT(st["page_url"].get<std::string>(), HasSubstr("http://127.0.0.1:"));
  EXPECT_THAT(st["page_url"].get<std::string>(), HasSubstr("/apps/local_cwd%3A%2F%2F"));
  Output status = Torchx("status " + failed);
  EXPECT_THAT(status.out, HasSubstr("UI URL: http://127.0.0.1:"));
  EXPECT_THAT(status.out, HasSubstr(" *w[0]:FAILED"));
  CallOk("cancel", {{"app_handle", big}});
}

TEST_F(EventsTest, TheCliTakesAppIdsAndTheirStartsFiltersListAndSaysWhatWasMeant) {
  StartDaemon();
  std::string a = Run(App("alpha", {FakeRole("w", {"--stdout", "from-alpha"})}));
  std::string b = Run(App("alpine", {FakeRole("w", {"--exit", "2"})}));
  Wait(a);
  Wait(b);
  std::string id = a.substr(a.rfind('/') + 1);
  // An app id, or the unique start of one, for a handle; a start shared by two lists them.
  Output st = Torchx("status " + id.substr(0, 7));
  EXPECT_EQ(st.exit_code, 0) << st.err;
  EXPECT_THAT(st.out, HasSubstr("State: SUCCEEDED"));
  EXPECT_EQ(Torchx("log " + id + "/w/0").out, "w/0 from-alpha\n");
  Output both = Torchx("status al");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("is the start of 2 apps' ids"));
  EXPECT_THAT(both.err, HasSubstr(a));
  Output none = Torchx("status zzz");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("nor an app id or the start of one"));
  // list: by state, newest N; an unknown scheduler or state is a usage error.
  Output failed = Torchx("list --state failed");
  EXPECT_THAT(failed.out, HasSubstr(b));
  EXPECT_EQ(failed.out.find(a), std::string::npos);
  EXPECT_EQ(json::parse(Torchx("list -n 1 --json").out).size(), 1u);
  EXPECT_EQ(Torchx("list -s bogus").exit_code, 2);
  EXPECT_EQ(Torchx("list --state bogus").exit_code, 2);
  // A misspelt command names the closest; a command's usage error points at its own help.
  Output typo = Torchx("statu " + a);
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("unknown command `statu`. Did you mean `status`?"));
  EXPECT_THAT(Torchx("status").err, HasSubstr("(see `torchx status --help`)"));
  // Nothing close: the choices, as TorchX's argparse; an unknown run option before the component.
  Output far = Torchx("frobnicate");
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_THAT(far.err, HasSubstr("unknown command `frobnicate`. Choose from: builtins, cancel,"));
  Output flag = Torchx("run --nosuchflag utils.echo");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_THAT(flag.err, HasSubstr("unrecognized arguments: --nosuchflag"));
  // log -f follows, as -t does.
  EXPECT_EQ(Torchx("log -f " + a).out, "w/0 from-alpha\n");
  // A progress bar's '\r'-separated redraws each keep the replica's name, as TorchX prints them.
  std::string bar = Run(App("bar", {json{{"name", "p"}, {"entrypoint", "sh"}, {"args", {"-c", "printf 'x 10%%\\rx 100%%\\n'"}}}}));
  Wait(bar);
  EXPECT_EQ(Torchx("log " + bar).out, "p/0 x 10%\rp/0 x 100%\n");
}

TEST_F(EventsTest, OnATerminalTablesFitItsWidthAndRunSaysWhatHappensApartFromTheLogs) {
  StartWithGpus();
  std::string big = Run(App("big", {GpuRole(2, {"--sleep", "60"})}));
  std::string waiting = Run(App("a-rather-long-application-name-for-a-narrow-terminal", {GpuRole(1, {"--sleep", "1"})}));
  std::string torchx = std::string(TORCHX_BIN) + " --socket " + socket_;
  // 60 columns, no COLUMNS: the widest column gives way, cut with "…"; every line fits.
  Output list = RunInPty(torchx + " list", 60);
  ASSERT_EQ(list.exit_code, 0) << list.out;
  EXPECT_THAT(list.out, HasSubstr("…"));
  size_t start = 0;
  for (size_t eol; (eol = list.out.find("\r\n", start)) != std::string::npos; start = eol + 2) {
    std::string line = list.out.substr(start, eol - start);
    size_t width = 0;  // display columns: UTF-8 continuation bytes take none
    for (unsigned char c : line) width += (c & 0xC0) != 0x80;
    EXPECT_LE(width, 60u) << line;
  }
  // The same list into a pipe is not cut.
  Output piped = RunShell(torchx + " list | cat", (dir_ / "list.err").string());
  EXPECT_THAT(piped.out, HasSubstr(waiting));
  // An attached run on a terminal: its events as `torchx: ` lines between the replica's own.
  CallOk("cancel", {{"app_handle", big}});
  std::string app = (dir_ / "talk.json").string();
  std::ofstream(app) << App("talk", {FakeRole("w", {"--stdout", "hello", "--exit", "3"})}).dump();
  // (On a terminal the replica prefix is coloured: the test reads the text without it.)
  auto plain = [](std::string s) {
    for (size_t esc; (esc = s.find("\x1b[")) != std::string::npos;) s.erase(esc, s.find('m', esc) - esc + 1);
    return s;
  };
  Output run = RunInPty("cd " + dir_.string() + " && " + torchx + " run " + app, 200);
  run.out = plain(run.out);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_THAT(run.out, HasSubstr("w/0 hello"));
  EXPECT_THAT(run.out, HasSubstr("torchx: w/0 started (attempt 1"));
  EXPECT_THAT(run.out, HasSubstr("torchx: w/0 failed (attempt 1): exit code 3"));
  Output quiet = RunInPty("cd " + dir_.string() + " && " + torchx + " run -q " + app, 200);
  quiet.out = plain(quiet.out);
  EXPECT_THAT(quiet.out, HasSubstr("w/0 hello"));
  EXPECT_THAT(quiet.out, Not(HasSubstr("torchx: w/0 started")));
}

TEST_F(EventsTest, TheQueueHeadIsToldWhenItStartsAtTheLatest) {
  StartWithGpus();
  std::string big = Run(App("big", {GpuRole(2, {"--sleep", "60"})}), {{"max_duration", "10m"}});
  std::string head = Run(App("head", {GpuRole(1, {"--sleep", "1"})}));
  json queued;
  ASSERT_TRUE(WaitUntil([&] {
    for (const auto& e : Events(head)) {
      if (e["type"] == "queued") queued = e;
    }
    return !queued.is_null();
  }));
  ASSERT_TRUE(queued["data"].contains("starts_by_ms")) << queued.dump();
  int64_t by = queued["data"]["starts_by_ms"].get<int64_t>();
  EXPECT_NEAR(static_cast<double>(by), static_cast<double>(core::UnixNowMs() + 600'000), 30'000.0);
  // The text has no clock time of the daemon's; each reader's CLI writes it in their own.
  EXPECT_EQ(queued["text"].get<std::string>().find("starts"), std::string::npos) << queued.dump();
  std::time_t at = static_cast<std::time_t>(by / 1000);
  std::tm tm{};
  localtime_r(&at, &tm);
  char hhmm[8];
  std::strftime(hhmm, sizeof hhmm, "%H:%M", &tm);
  Output text = Torchx("events " + head);
  EXPECT_THAT(text.out, HasSubstr("; starts by ")) << text.out;
  EXPECT_THAT(text.out, HasSubstr(std::string(hhmm) + " at the latest")) << text.out;
  // Status says it relative to now.
  EXPECT_THAT(Status(head)["msg"].get<std::string>(), HasSubstr("at the latest (max_duration of what it waits on)"));
  CallOk("cancel", {{"app_handle", big}});
}

TEST_F(EventsTest, ACancelTellsWhenItHadToUseSigkill) {
  StartDaemon();
  fs::path pids_a = dir_ / "a.pids", pids_b = dir_ / "b.pids";
  std::string stubborn = Run(App("stubborn", {FakeRole("w", {"--ignore-term", "--pidfile", pids_a.string(), "--sleep", "60"})}));
  std::string polite = Run(App("polite", {FakeRole("w", {"--pidfile", pids_b.string(), "--sleep", "60"})}));
  // The pid files say the replicas ignore (or not) SIGTERM by now; the daemon hears of their start
  // from the shim, which can come after the file, so the cancel waits for that too.
  auto started = [&](const std::string& app) {
    for (const auto& e : Events(app)) {
      if (e["type"] == "started") return true;
    }
    return false;
  };
  ASSERT_TRUE(WaitUntil([&] { return !ReadPids(pids_a).empty() && !ReadPids(pids_b).empty() && started(stubborn) && started(polite); }));
  CallOk("cancel", {{"app_handle", stubborn}, {"grace_period", 0.5}});
  CallOk("cancel", {{"app_handle", polite}, {"grace_period", 30}});
  Wait(stubborn);
  Wait(polite);
  json events = Events(stubborn);
  EXPECT_EQ(Steps(events), (std::vector<std::string>{"submitted", "admitted", "started w/0", "cancel", "killed w/0", "exited w/0", "ended"}))
      << events.dump(1);
  EXPECT_THAT(events[4]["text"].get<std::string>(), HasSubstr("still running 0.5 s after SIGTERM: SIGKILL sent"));
  EXPECT_THAT(events[5]["text"].get<std::string>(), HasSubstr("cancelled (attempt 1): killed by SIGKILL after the 0.5 s grace period"));
  json gentle = Events(polite);
  EXPECT_EQ(Steps(gentle), (std::vector<std::string>{"submitted", "admitted", "started w/0", "cancel", "exited w/0", "ended"})) << gentle.dump(1);
  EXPECT_THAT(gentle[4]["text"].get<std::string>(), HasSubstr("cancelled (attempt 1): stopped by SIGTERM"));
}

}  // namespace
}  // namespace torchxd::testing
