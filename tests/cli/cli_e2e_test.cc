// The real torchx and torchxd, end to end, in a private XDG_RUNTIME_DIR and
// state dir: autostart, every command, text and --json outputs, exit codes,
// and the distributed example.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/client.h"
#include "tests/cli/shell.h"
#include "tests/cli/torchx_sandbox.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

using torchxd::testing::Output;
using torchxd::testing::Quote;
using torchxd::testing::RunShell;
using torchxd::DaemonClient;

class CliE2eTest : public torchxd::testing::TorchxSandbox {
 protected:
  CliE2eTest() : TorchxSandbox("txc_") {}
  std::string Socket() { return (dir_ / "xdg/torchxd/torchxd.sock").string(); }
};

TEST_F(CliE2eTest, RunDetachedAutostartsADetachedDaemonAndReturnsTheHandleAtOnce) {
  auto run = Torchx({"run", "-d", "utils.echo", "--msg", "hello"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, ::testing::MatchesRegex("local_cwd://torchx/echo-[a-z0-9]+\n"));
  EXPECT_TRUE(fs::exists(Socket()));
  auto status = Torchx({"daemon", "status"});
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_THAT(status.out, HasSubstr("torchxd 0.1.0 running (pid "));
  // The daemon is detached: its own session, not our child, no terminal.
  int pid = std::atoi(status.out.c_str() + status.out.find("pid ") + 4);
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), {});
  std::istringstream fields(s.substr(s.rfind(')') + 2));
  std::string state;
  int ppid, pgrp, session;
  fields >> state >> ppid >> pgrp >> session;
  EXPECT_NE(session, ::getsid(0));  // a new session: it holds no terminal of ours
  EXPECT_NE(ppid, ::getpid());
}

TEST_F(CliE2eTest, TwoClisAutostartingAtOnceShareOneDaemon) {
  Output a, b;
  std::thread t([&] { a = Torchx({"run", "-d", "utils.echo"}); });
  b = Torchx({"run", "-d", "utils.echo"});
  t.join();
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(b.exit_code, 0) << b.err;
  auto list = Torchx({"list", "--json"});
  EXPECT_EQ(json::parse(list.out).size(), 2u);  // both apps in one daemon's store
}

TEST_F(CliE2eTest, WaitLogStatusDescribeListCancelDelete) {
  auto ok = Torchx({"run", "--wait", "utils.echo", "--msg", "hi", "--num_replicas", "2"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  std::string h = Handle(ok);

  auto status = Torchx({"status", h});
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_THAT(status.out, HasSubstr("AppStatus:\n    State: SUCCEEDED\n    Num Restarts: 0\n    Roles: \n *echo[0]:SUCCEEDED pid="));
  EXPECT_THAT(status.out, HasSubstr("\n  echo[1]:SUCCEEDED pid="));
  auto sj_text = Torchx({"status", "--json", h}).out;
  EXPECT_EQ(std::count(sj_text.begin(), sj_text.end(), '\n'), 1) << "one line, as TorchX's json.dumps";
  EXPECT_THAT(sj_text, HasSubstr("\"state\": \"SUCCEEDED\", "));
  auto sj = json::parse(sj_text);
  EXPECT_EQ(sj["state"], "SUCCEEDED");
  EXPECT_EQ(sj["app_handle"], h);
  EXPECT_EQ(sj["roles"][0]["replicas"][1]["state"], 4);
  EXPECT_EQ(sj["roles"][0]["replicas"][1]["state_name"], "SUCCEEDED");

  auto log = Torchx({"log", h});
  EXPECT_EQ(log.out, "echo/0 hi\necho/1 hi\n");
  EXPECT_EQ(Torchx({"log", h + "/echo/1"}).out, "echo/1 hi\n");
  auto lj = json::parse(Torchx({"log", "--json", h + "/echo/0"}).out);
  EXPECT_EQ(lj["line"], "hi");
  EXPECT_EQ(lj["role"], "echo");

  // describe prints the AppDef as stored, which `torchx run` takes back.
  auto desc = Torchx({"describe", h});
  ASSERT_EQ(desc.exit_code, 0);
  std::ofstream(dir_ / "work/again.json") << desc.out;
  auto again = Torchx({"run", "--wait", "./again.json"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Torchx({"log", Handle(again)}).out, "echo/0 hi\necho/1 hi\n");

  auto list = Torchx({"list"});
  EXPECT_THAT(list.out, HasSubstr("APP HANDLE"));
  EXPECT_THAT(list.out, HasSubstr("APP NAME  APP STATUS  STARTED"));
  EXPECT_THAT(list.out, HasSubstr("DURATION  QUEUE\n"));
  EXPECT_THAT(list.out, HasSubstr("  default\n"));
  auto lines = std::count(list.out.begin(), list.out.end(), '\n');
  EXPECT_EQ(lines, 4);  // header, dashes, two apps
  auto listj = json::parse(Torchx({"list", "--json"}).out);
  EXPECT_EQ(listj[0]["app_handle"], Handle(again));  // newest first
  EXPECT_EQ(listj[0]["queue"], "default");

  auto already = Torchx({"cancel", h});
  EXPECT_EQ(already.exit_code, 0);
  EXPECT_EQ(already.out, h + " already SUCCEEDED\n");
  auto del = Torchx({"delete", h});
  EXPECT_EQ(del.exit_code, 0);
  auto gone = Torchx({"status", h});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("does not exist or has been removed from `local_cwd`'s data plane"));
}

TEST_F(CliE2eTest, CancelReturnsWhenTheAppIsGone) {
  auto run = Torchx({"run", "-d", "utils.sh", "--", "sh", "-c", "trap '' TERM; sleep 60"});
  ASSERT_EQ(run.exit_code, 0);
  std::string h = Handle(run);
  auto cancel = Torchx({"cancel", "--grace-period", "0.2", h});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.out, h + " CANCELLED\n");
  EXPECT_THAT(Torchx({"status", h}).out, HasSubstr("State: CANCELLED"));
}

TEST_F(CliE2eTest, WaitOnAFailingAppExitsOneWithTheStatusOnStderr) {
  auto r = Torchx({"run", "--wait", "utils.sh", "--", "sh", "-c", "echo boom >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("local_cwd://torchx/sh-"));
  EXPECT_THAT(r.err, HasSubstr("State: FAILED"));
  EXPECT_THAT(r.err, HasSubstr("sh[0]:FAILED (exited with code 3)"));
}

TEST_F(CliE2eTest, LogFlagStreamsEveryReplicaToStderrWithAPrefix) {
  auto r = Torchx({"run", "--log", "utils.sh", "--num_replicas", "2", "--", "sh", "-c", "echo one; echo two"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"sh/0 one\n", "sh/0 two\n", "sh/1 one\n", "sh/1 two\n"}) {
    EXPECT_THAT(r.err, HasSubstr(line));
  }
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);  // only the handle on stdout
}

TEST_F(CliE2eTest, ExitCodesAndMessages) {
  ASSERT_EQ(Torchx({"run", "utils.echo"}).exit_code, 0);  // a daemon is up
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir_ / "work" / name) << text; };
  write("long.json", R"({"name": ")" + std::string(5000, 'a') + R"(", "roles": [{"name": "r", "entrypoint": "true"}]})");
  write("longrole.json", R"({"name": "a", "roles": [{"name": ")" + std::string(300, 'r') + R"(", "entrypoint": "true"}]})");
  write("deep.json", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "true", "metadata": {"m": )" +
                         std::string(80000, '[') + std::string(80000, ']') + "}}]}");
  write("nul.json", R"({"name": "a", "roles": [{"name": "r", "entrypoint": "sh", "args": ["-c", "id\u00000"]}]})");
  struct Case {
    std::string name;
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const Case cases[] = {
      {"unknown app", {"status", "local_cwd://torchx/nope-123"}, 1, "AppDef `nope-123` does not exist"},
      {"malformed handle", {"status", "nope"}, 2, "is not of the form: <scheduler_backend>://<session_name>/<app_id>"},
      {"bad log selector", {"log", "local_cwd://torchx"}, 2, "is not of the form SCHEDULER://[SESSION]/APP_ID"},
      {"bad since", {"log", "--since", "yesterday", "local_cwd://torchx/x"}, 2, "--since: `yesterday` is not a time"},
      {"bad regex", {"log", "--regex", "(", "local_cwd://torchx/x"}, 2, "--regex `(`"},
      {"unknown role", {"log", "local_cwd://torchx/nope-1/r"}, 1, "does not exist"},
      {"bad grace", {"cancel", "--grace-period", "-1", "local_cwd://torchx/x"}, 2, "--grace-period"},
      {"missing handle", {"status"}, 2, "app_handle is required"},
      {"bad daemon action", {"daemon", "reload"}, 2, "reload not in {status,stop,restart}"},
      {"5,000-byte app name", {"run", "./long.json"}, 2, "name: must be at most 128 bytes, got 5000"},
      {"300-byte role name", {"run", "./longrole.json"}, 2, "roles[0].name: must be at most 128 bytes, got 300"},
      {"nested 80,000 deep", {"run", "./deep.json"}, 2, "an AppDef may nest at most 32 levels"},
      {"NUL in an argument", {"run", "./nul.json"}, 2, "roles[0].args[1]: must not contain a NUL character"},
      {"a 50,000-digit -j", {"run", "dist.ddp", "-j", std::string(50000, '1'), "--script", "x.py"}, 2,
       "Invalid format for -j"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto o = Torchx(c.args);
    EXPECT_EQ(o.exit_code, c.code) << o.err;
    EXPECT_THAT(o.err, HasSubstr(c.message));
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
}

TEST_F(CliE2eTest, NoAutostartMeansExitThreeAndInfoCommandsNeedNoDaemon) {
  const std::string no = "TORCHX_NO_AUTOSTART=1";
  auto status = Torchx({"status", "local_cwd://torchx/x"}, no);
  EXPECT_EQ(status.exit_code, 3);
  EXPECT_THAT(status.err, HasSubstr("no torchxd is running"));
  EXPECT_THAT(status.err, HasSubstr("TORCHX_NO_AUTOSTART=1 is set"));
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"builtins"}, {"runopts"}, {"--version"}, {"--help"}, {"run", "utils.echo", "--help"},
           {"run", "--dryrun", "utils.echo"}}) {
    EXPECT_EQ(Torchx(args, no).exit_code, 0) << args[0];
  }
  EXPECT_FALSE(fs::exists(Socket()));  // none of them started a daemon
  auto stopped = Torchx({"daemon", "stop"}, no);
  EXPECT_EQ(stopped.exit_code, 0);
  EXPECT_EQ(stopped.out, "torchxd is not running\n");
  EXPECT_EQ(Torchx({"daemon", "status"}, no).exit_code, 3);
}

TEST_F(CliE2eTest, AnAutostartedDaemonThatExitsIsReportedAtOnceWithWhatItSaid) {
  // Its lock file cannot be opened: the daemon says so and exits.
  fs::create_directories(dir_ / "state/torchxd/torchxd.lock");
  {  // earlier autostarts' lines, which the reply must not be
    std::ofstream earlier(dir_ / "state/torchxd/torchxd.out");
    for (int i = 0; i < 20000; ++i) earlier << "2026-01-01T00:00:00.000 info an earlier daemon's line " << i << "\n";
  }
  auto start = std::chrono::steady_clock::now();
  auto run = Torchx({"run", "-d", "utils.echo"});
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_THAT(run.err, HasSubstr("torchxd exited before it answered on " + Socket()));
  EXPECT_THAT(run.err, HasSubstr("torchxd.lock"));  // its own last line, not a pointer to a file alone
  EXPECT_LT(took, 8.0);  // not the limit a live daemon gets (60 s)
}

TEST_F(CliE2eTest, ADaemonThatRefusesTheConnectionSaysWhy) {
  ASSERT_EQ(Torchx({"daemon", "stop"}).exit_code, 0);
  std::string sock = (dir_ / "one.sock").string();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    std::string out = (dir_ / "one.out").string();
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(TORCHXD_BIN, TORCHXD_BIN, "--socket", sock.c_str(), "--state-dir", (dir_ / "one").c_str(),
            "--max-connections", "1", nullptr);
    ::_exit(127);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{pid};
  std::optional<DaemonClient> holder;
  for (int i = 0; i < 500 && !holder; ++i) {
    if (auto c = DaemonClient::Connect(sock); c && c->Call("version", json::object())) holder.emplace(std::move(*c));
    if (!holder) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(holder.has_value());
  auto o = Torchx({"--socket", sock, "list"});
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_THAT(o.err, HasSubstr("torchxd is serving its maximum of 1 connections; try again"));
}

TEST_F(CliE2eTest, ExplicitSocketThatDoesNotAnswerExitsThree) {
  auto o = Torchx({"--socket", (dir_ / "nothing.sock").string(), "list"});
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_THAT(o.err, HasSubstr("torchxd is not answering on"));
  auto env = Torchx({"list"}, "TORCHXD_SOCKET=" + (dir_ / "nothing.sock").string());
  EXPECT_EQ(env.exit_code, 3);
}

TEST_F(CliE2eTest, DaemonStopStopsItsAppsAndTheDaemon) {
  auto run = Torchx({"run", "--detach", "utils.sh", "--", "sleep", "60"});
  ASSERT_EQ(run.exit_code, 0);
  auto stop = Torchx({"daemon", "stop"});
  EXPECT_EQ(stop.exit_code, 0);
  EXPECT_THAT(stop.out, HasSubstr("stopped"));
  EXPECT_FALSE(fs::exists(Socket()));
  auto st = Torchx({"status", Handle(run)});  // autostarts a new daemon that remembers
  EXPECT_THAT(st.out, HasSubstr("State: CANCELLED"));
  EXPECT_THAT(st.out, HasSubstr("Msg: torchxd was stopped"));
}

TEST_F(CliE2eTest, DistributedExampleTrainsWithTwoReplicas) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-torch is not installed (/usr/bin/python3 -c 'import torch' failed)";
  }
  std::string port = std::to_string(20000 + (::getpid() % 20000));
  auto r = Torchx({"run", "--wait", "dist.ddp", "-j", "2x1", "--tee", "1", "--env", "PET_REDIRECTS=1",
                   "--rdzv_port", port, "--script", std::string(TORCHXD_SOURCE_DIR) + "/examples/train.py",
                   "--", "--steps", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string h = Handle(r);
  auto log = Torchx({"log", "--regex", "in_sync=True", h});
  // torchrun's c10d rendezvous hands out ranks in arrival order: either replica may be rank 0.
  EXPECT_THAT(log.out, HasSubstr("[0]:rank 0/2"));
  EXPECT_THAT(log.out, HasSubstr("[0]:rank 1/2"));
  EXPECT_THAT(log.out, HasSubstr("train/0 [0]:rank "));
  EXPECT_THAT(log.out, HasSubstr("train/1 [0]:rank "));
  EXPECT_THAT(Torchx({"log", "--regex", "step 2 loss", h}).out, HasSubstr("world_size 2"));
}

// Elastic: torchrun with --nnodes 1:2 under `torchx scale`. The role starts
// with 2, is scaled to 1 at once (so replica 0 hosts the c10d store: on one
// box every replica matches the endpoint and the first to bind hosts it),
// then to 2 and back to 1; the app keeps running and torchrun's rendezvous
// follows each change.
TEST_F(CliE2eTest, ATorchrunJobScalesBetweenOneAndTwoReplicasAndKeepsRunning) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-torch is not installed (/usr/bin/python3 -c 'import torch' failed)";
  }
  std::ofstream(dir_ / "work/elastic.py") << R"(import os
import time

import torch
import torch.distributed as dist

dist.init_process_group(backend="gloo")
print(f"joined world_size {dist.get_world_size()} restart {os.environ.get('TORCHELASTIC_RESTART_COUNT')}", flush=True)
while True:
    t = torch.ones(1)
    dist.all_reduce(t)
    time.sleep(0.2)
)";
  std::string port = std::to_string(20000 + ((::getpid() + 7919) % 20000));
  auto run = Torchx({"run", "-d", "dist.ddp", "-j", "1:2x1", "--tee", "1", "--env",
                     "PET_REDIRECTS=1,PET_MAX_RESTARTS=20,PET_MONITOR_INTERVAL=1", "--rdzv_conf",
                     "last_call_timeout=1", "--rdzv_port", port, "--script", (dir_ / "work/elastic.py").string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string h = Handle(run);
  auto scale = [&](const std::string& n) {
    auto r = Torchx({"scale", h, "elastic=" + n});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, h + " scaled: elastic=" + n + "\n");
  };
  // The lines "joined world_size N" replica `id` logged, in order.
  auto joined = [&](int id) {
    std::vector<std::string> sizes;
    std::string out = Torchx({"log", "--regex", "joined world_size", h + "/elastic/" + std::to_string(id)}).out;
    for (size_t at = out.find("world_size "); at != std::string::npos; at = out.find("world_size ", at + 1)) {
      sizes.push_back(out.substr(at + 11, 1));
    }
    return sizes;
  };
  auto wait_for = [&](int id, const std::vector<std::string>& want) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (std::chrono::steady_clock::now() < end) {
      if (joined(id) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "replica " << id << " never logged the rendezvous sizes wanted; log:\n" << Torchx({"log", h}).out;
    return false;
  };
  scale("1");
  ASSERT_TRUE(wait_for(0, {"1"}));
  scale("2");
  ASSERT_TRUE(wait_for(0, {"1", "2"}));
  ASSERT_TRUE(wait_for(1, {"2"}));
  scale("1");
  ASSERT_TRUE(wait_for(0, {"1", "2", "1"}));
  json st = json::parse(Torchx({"status", "--json", h}).out);
  EXPECT_EQ(st["state"], "RUNNING");
  const json& replicas = st["roles"][0]["replicas"];
  EXPECT_EQ(replicas[0]["state_name"], "RUNNING");
  EXPECT_EQ(replicas[0]["attempt"], 1) << "replica 0 ran through every change";
  EXPECT_EQ(replicas[1]["state_name"], "CANCELLED");
  EXPECT_EQ(replicas[1]["error_message"], "scaled down: role elastic runs 1 of 2 replicas");
  EXPECT_EQ(Torchx({"cancel", h}).exit_code, 0);
}

// Two 2-node dist.ddp jobs started together on one box, both on TorchX's
// default rendezvous port: each gets its own (the second bound 29500 too, or
// joined the first one's store), and both train to the end.
TEST_F(CliE2eTest, TwoMultiNodeDdpJobsAtOnceEachHaveTheirOwnRendezvous) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-torch is not installed (/usr/bin/python3 -c 'import torch' failed)";
  }
  std::ofstream(dir_ / "work/twice.py") << R"(import os

import torch
import torch.distributed as dist

dist.init_process_group(backend="gloo")
t = torch.ones(1)
for _ in range(20):
    dist.all_reduce(t)
print(f"world {dist.get_world_size()} job {os.environ['TORCHX_JOB_ID'].rsplit('/', 1)[1]}", flush=True)
)";
  // One retry each, as a user of torch 1.13 would set: its agent picks the
  // workers' MASTER_PORT by binding port 0 and closing it, and rank 1's store
  // client, retrying its connect while rank 0 still imports torch, walks the
  // ephemeral ports and can meet that very one (a TCP self-connect: rank 0's
  // bind then fails "Address already in use"; seen once, on a loaded machine).
  // That each job has its own rendezvous port is read from the daemon's log below.
  std::vector<std::string> handles;
  for (int i = 0; i < 2; ++i) {
    auto run = Torchx({"run", "-d", "dist.ddp", "-j", "2x1", "--max_retries", "1", "--tee", "1", "--env",
                       "PET_REDIRECTS=1", "--script", (dir_ / "work/twice.py").string()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    handles.push_back(Handle(run));
  }
  for (const auto& h : handles) {
    std::string state;
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < end) {
      state = json::parse(Torchx({"status", "--json", h}).out)["state"].get<std::string>();
      if (state != "RUNNING" && state != "PENDING" && state != "SUBMITTED") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::string log = Torchx({"log", h}).out;
    EXPECT_EQ(state, "SUCCEEDED") << log;
    std::string id = h.substr(h.rfind('/') + 1);
    EXPECT_NE(log.find("world 2 job " + id), std::string::npos) << log;
  }
  // The daemon says which port each got.
  std::ifstream in(dir_ / "state/torchxd/torchxd.out");
  std::string daemon_log((std::istreambuf_iterator<char>(in)), {});
  size_t first = daemon_log.find("app ports"), second = daemon_log.find("app ports", first + 1);
  ASSERT_NE(second, std::string::npos) << daemon_log;
  std::string a = daemon_log.substr(first, daemon_log.find('\n', first) - first);
  std::string b = daemon_log.substr(second, daemon_log.find('\n', second) - second);
  EXPECT_NE(a.substr(a.find("c10d=")), b.substr(b.find("c10d="))) << a << "\n" << b;
}

}  // namespace
