// A shared box: one system torchxd, several users (tests/systemd/shared_box.h).
// What one user can and cannot see or do to another.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/client.h"
#include "tests/daemon/http_get.h"
#include "tests/systemd/shared_box.h"

namespace torchxd::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

SHARED_BOX_TEST(UsersSeeAndActOnlyOnTheirOwnApps) {
  SHARED_BOX_DIR(t);
  SharedBox box(t);
  ASSERT_TRUE(box.MakeUsers());
  ASSERT_TRUE(box.Start({"--ui-listen", "127.0.0.1:0"}));
  struct stat st;
  ASSERT_EQ(::stat(box.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);  // group-accessible, never world-writable
  EXPECT_EQ(st.st_gid, SharedBox::kTorchxGid);

  auto run = box.As("alice", "run --wait utils.sh -- sh -c 'echo uid=$(id -u) gid=$(id -g) user=$USER; sleep 0.1'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string h = SharedBox::HandleOf(run);
  auto log = box.As("alice", "log " + h);
  EXPECT_EQ(log.out, "sh/0 uid=5001 gid=5001 user=alice\n");  // replicas run as the caller
  std::string app_id = h.substr(h.rfind('/') + 1);
  ASSERT_EQ(::stat((box.logs() / "torchx" / app_id / "sh/0/stdout.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 5001u);  // its logs are its own

  auto bob_status = box.As("bob", "status " + h);
  EXPECT_EQ(bob_status.exit_code, 1);
  EXPECT_THAT(bob_status.err, HasSubstr("belongs to uid 5001; uid 5002 may not see it"));
  auto bob_cancel = box.As("bob", "cancel " + h);
  EXPECT_EQ(bob_cancel.exit_code, 1);
  EXPECT_THAT(bob_cancel.err, HasSubstr("may not cancel it"));
  EXPECT_THAT(box.As("bob", "log " + h).err, HasSubstr("may not read the logs of it"));
  EXPECT_THAT(box.As("bob", "delete " + h).err, HasSubstr("may not delete it"));
  // Nor its timeline: once, followed, or by the app id's start.
  auto bob_events = box.As("bob", "events " + h);
  EXPECT_EQ(bob_events.exit_code, 1);
  EXPECT_THAT(bob_events.err, HasSubstr("may not see"));
  EXPECT_EQ(bob_events.out.find("started"), std::string::npos);
  EXPECT_THAT(box.As("bob", "events -f " + h).err, HasSubstr("may not see"));
  EXPECT_NE(box.As("bob", "events " + app_id.substr(0, 6)).exit_code, 0);
  EXPECT_THAT(box.As("alice", "events " + h).out, HasSubstr("sh/0 started"));
  EXPECT_THAT(box.As("dave", "events " + h).out, HasSubstr("sh/0 started"));  // the admin group
  EXPECT_EQ(box.As("bob", "list --json").out.find(app_id), std::string::npos);  // bob sees only his apps
  EXPECT_NE(box.As("alice", "list --json").out.find(app_id), std::string::npos);
  EXPECT_NE(box.Root("list --json").out.find(app_id), std::string::npos);  // root sees all
  EXPECT_EQ(box.Root("status " + h).exit_code, 0);
  EXPECT_THAT(box.As("bob", "daemon stop").err, HasSubstr("only root"));
  // The admin group acts on every app.
  EXPECT_NE(box.As("dave", "list --json").out.find(app_id), std::string::npos);
  EXPECT_EQ(box.As("dave", "status " + h).exit_code, 0);

  fs::create_directory_symlink("/etc", box.Home("alice") / "evil");
  auto evil = box.As("alice", "run -cfg log_dir=" + (box.Home("alice") / "evil").string() + " utils.echo");
  EXPECT_EQ(evil.exit_code, 2);
  EXPECT_THAT(evil.err, HasSubstr("is a symbolic link"));
  // A user-chosen log_dir is created as the caller: alice cannot make root write where she cannot.
  auto denied = box.As("alice", "run -cfg log_dir=/root/nope utils.echo");
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_FALSE(fs::exists("/root/nope"));

  // local_docker gives the engine's rights (root's, for dockerd): not for every user of the box.
  auto docker = box.As("alice", "run -s local_docker utils.echo");
  EXPECT_EQ(docker.exit_code, 1);
  EXPECT_THAT(docker.err, HasSubstr("only root and the admin group may use it"));

  auto carol = box.As("carol", "list");
  EXPECT_EQ(carol.exit_code, 3);  // outside group torchx: the socket refuses her
  EXPECT_THAT(carol.err, HasSubstr("Permission denied"));

  // A NUL smuggled into an argument once injected fields that made the shim
  // skip dropping to alice: refused at submit now, and nothing runs at all.
  std::ofstream(box.Home("alice") / "nul.json")
      << R"({"name": "nul", "roles": [{"name": "r", "entrypoint": "/bin/sh", "args": ["-c", "id -u > )"
      << (box.Home("alice") / "ran").string() << R"(\u00000\u00000"]}]})";
  ASSERT_EQ(::chown((box.Home("alice") / "nul.json").c_str(), 5001, 5001), 0);
  auto nul = box.As("alice", "run --wait ./nul.json");
  EXPECT_EQ(nul.exit_code, 2);
  EXPECT_THAT(nul.err, HasSubstr("roles[0].args[1]: must not contain a NUL character"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(fs::exists(box.Home("alice") / "ran")) << "something ran";

  // Her replica swaps its log file for a link to a file only root may read:
  // the daemon reads her logs with her rights, so she gets nothing of it.
  std::ofstream(t / "secret") << "root only\n";
  fs::permissions(t / "secret", fs::perms::owner_read | fs::perms::owner_write);
  auto linked = box.As("alice", "run --wait utils.sh -- sh -c 'ln -sf " + (t / "secret").string() +
                                    " \"$(dirname $TORCHELASTIC_ERROR_FILE)/stderr.log\"'");
  ASSERT_EQ(linked.exit_code, 0) << linked.err;
  std::string lh = SharedBox::HandleOf(linked);
  auto leak = box.As("alice", "log --streams stderr " + lh);
  EXPECT_EQ(leak.out.find("root only"), std::string::npos) << leak.out;
  // Her logs are deleted with her rights: the link goes, its target stays.
  EXPECT_EQ(box.As("alice", "delete " + lh).exit_code, 0);
  std::string lid = lh.substr(lh.rfind('/') + 1);
  for (int i = 0; i < 200 && fs::exists(box.logs() / "torchx" / (lid + ".evicted")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(fs::exists(box.logs() / "torchx" / lid));
  EXPECT_FALSE(fs::exists(box.logs() / "torchx" / (lid + ".evicted")));
  EXPECT_TRUE(fs::exists(t / "secret"));

  // The web page applies the same rules: a user's token is theirs alone.
  ASSERT_EQ(::stat((t / "run" / "ui.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, SharedBox::kTorchxGid);
  auto sleeper = box.As("alice", "run -d utils.sh sleep 60");
  ASSERT_EQ(sleeper.exit_code, 0) << sleeper.err;
  std::string sh = SharedBox::HandleOf(sleeper);
  auto token_of = [&](const std::string& user) {
    auto ui = nlohmann::json::parse(box.As(user, "ui --json").out);
    return std::pair{ui["token"].get<std::string>(), std::stoi(ui["url"].get<std::string>().substr(17))};
  };
  auto [alice_token, port] = token_of("alice");
  auto [bob_token, bob_port] = token_of("bob");
  EXPECT_EQ(port, bob_port);
  EXPECT_NE(alice_token, bob_token);
  HttpTarget web{"", port};
  std::string host = "127.0.0.1:" + std::to_string(port);
  auto get = [&](const std::string& token, const std::string& path) {
    return HttpGet(web, path, {"Authorization: token " + token}, host);
  };
  auto cancel = [&](const std::string& token) {
    std::string csrf = nlohmann::json::parse(get(token, "/api/session").body)["csrf"].get<std::string>();
    return HttpExchangeRaw(web, "POST /api/cancel HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: token " + token +
                                    "\r\nX-Torchxd-Csrf: " + csrf + "\r\nContent-Type: application/json",
                           nlohmann::json{{"app_handle", sh}}.dump());
  };
  EXPECT_EQ(nlohmann::json::parse(get(alice_token, "/api/session").body)["user"], "alice");
  auto bob_sees = get(bob_token, "/api/status?app_handle=" + sh);
  EXPECT_EQ(bob_sees.status, 403);
  EXPECT_THAT(bob_sees.body, HasSubstr("may not see it"));
  EXPECT_EQ(get(bob_token, "/api/list").body.find(sh), std::string::npos);  // bob's list has only his apps
  auto bob_cancels = cancel(bob_token);
  EXPECT_EQ(bob_cancels.status, 403) << bob_cancels.body;
  EXPECT_THAT(box.As("alice", "status " + sh).out, HasSubstr("RUNNING"));
  auto alice_cancels = cancel(alice_token);
  EXPECT_EQ(alice_cancels.status, 200) << alice_cancels.body;
  EXPECT_THAT(alice_cancels.body, HasSubstr("CANCELLED"));
  EXPECT_EQ(box.As("carol", "ui --json").exit_code, 3);  // no socket, no token
}

// Every path the system daemon makes, with the owner and mode it must have.
struct Expected {
  uid_t uid;
  mode_t mode;
};

SHARED_BOX_TEST(EveryPathTheDaemonMakesHasTheNarrowestModeThatWorks) {
  SHARED_BOX_DIR(t);
  SharedBox box(t);
  ASSERT_TRUE(box.MakeUsers());
  ASSERT_TRUE(box.Start({"--ui-listen", "127.0.0.1:0"}));  // web tokens are kept in the state dir
  const std::string secret = "sk-live-8c1e5a0f33d94b1e";
  auto run = box.As("alice", "run -d utils.sh -- sh -c 'echo started; sleep 30' " + secret);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string h = SharedBox::HandleOf(run);
  // Her whole environment goes to the daemon with every submit.
  auto done = box.Sh("alice", "SECRET_API_KEY=" + secret + " TORCHX_NO_AUTOSTART=1 " + std::string(TORCHX_BIN) +
                                  " --socket " + box.socket() + " run --wait utils.echo --msg hi");
  ASSERT_EQ(done.exit_code, 0) << done.err;
  std::string app_id = h.substr(h.rfind('/') + 1);
  for (int i = 0; i < 200 && box.As("alice", "log " + h).out.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Nothing of it reaches another user, in group torchx or not, whatever they read.
  for (const char* user : {"bob", "carol"}) {
    auto grep = box.Sh(user, "grep -rsl -e " + secret + " " + t.string() + "/state " + t.string() + "/logs " +
                                 t.string() + "/run; true");
    EXPECT_EQ(grep.out, "") << user << " read it";
  }
  auto root_grep = RunShell("grep -rl -e " + secret + " " + (t / "state").string() + " | head -1", (t / "rg").string());
  EXPECT_NE(root_grep.out, "") << "the test sees nothing: it would pass whatever the modes";
  EXPECT_THAT(box.As("bob", "describe " + h).err, HasSubstr("may not see it"));
  ASSERT_EQ(box.As("alice", "ui --json").exit_code, 0);  // her web token

  uid_t alice = box.Uid("alice");
  std::map<fs::path, Expected> expected = {
      {t / "state", {0, 0700}},
      {t / "state/torchxd.db", {0, 0600}},
      {t / "state/torchxd.db-wal", {0, 0600}},
      {t / "state/torchxd.db-shm", {0, 0600}},
      {t / "state/torchxd.lock", {0, 0600}},
      {t / "state/ui-tokens.json", {0, 0600}},
      {t / "state/shims", {0, 0700}},
      {t / "logs", {0, 0711}},
      {t / "logs/torchx", {0, 0711}},
      {t / "run", {0, 0755}},
      {t / "run/torchxd.sock", {0, 0660 | S_IFSOCK}},
      {t / "run/ui.sock", {0, 0660 | S_IFSOCK}},
  };
  // The shims' run dir: beside the socket on a tmpfs, else in the state dir.
  fs::path run_dir = fs::exists(t / "run/torchxd.shims") ? t / "run/torchxd.shims" : t / "state/shims";
  expected.erase(t / "state/shims");
  expected[run_dir] = {0, 0700};
  int checked = 0, owned = 0;
  for (const fs::path& root : {t / "state", t / "logs", t / "run"}) {
    std::vector<fs::path> paths{root};
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
      paths.push_back(it->path());
    }
    for (const fs::path& p : paths) {
      struct stat st;
      ASSERT_EQ(::lstat(p.c_str(), &st), 0) << p;
      mode_t mode = (st.st_mode & 07777) | (S_ISSOCK(st.st_mode) ? S_IFSOCK : 0);
      auto want = expected.find(p);
      if (want != expected.end()) {
        ++checked;
        EXPECT_EQ(st.st_uid, want->second.uid) << p;
        EXPECT_EQ(mode, want->second.mode) << p << " is " << std::oct << mode;
        continue;
      }
      fs::path rel = p.lexically_relative(t);
      if (rel.string().rfind("logs/torchx/", 0) == 0) {
        // An app's directory and everything in it: its owner's; the directory hers alone.
        ++owned;
        EXPECT_EQ(st.st_uid, alice) << p;
        if (p.parent_path() == t / "logs/torchx") {
          EXPECT_EQ(st.st_mode & 07777, 0700u) << p;
        }
        if (S_ISREG(st.st_mode)) {
          EXPECT_EQ(st.st_mode & 077, 0u) << p << " is readable by others";
        }
      } else if (p.parent_path() == run_dir || p.parent_path().parent_path() == run_dir) {
        // A running attempt's monitor: the replica's user's, 0700 for its directory.
        ++owned;
        EXPECT_EQ(st.st_uid, alice) << p;
        if (S_ISDIR(st.st_mode)) {
          EXPECT_EQ(st.st_mode & 07777, 0700u) << p;
        }
        EXPECT_EQ(st.st_mode & 077, 0u) << p;
      } else {
        ADD_FAILURE() << "unexpected path " << p << " mode " << std::oct << (st.st_mode & 07777);
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(expected.size()));
  for (const auto& [path, want] : expected) EXPECT_TRUE(fs::exists(fs::symlink_status(path))) << path;
  EXPECT_GT(owned, 4);
  EXPECT_EQ(box.As("alice", "cancel " + h).exit_code, 0);
}

// Names and ids the machine already has do not matter: its own group torchx
// (as the .deb makes) and user alice are left out of the box's copies.
SHARED_BOX_TEST(MachineUsersAndGroupsOfTheSameNamesChangeNothing) {
  SHARED_BOX_DIR(t);
  // Stand-ins for what the machine has, with other ids: bound before the box makes its own.
  fs::create_directories(t / "machine");
  std::ofstream(t / "machine/passwd") << std::ifstream("/etc/passwd").rdbuf() << "alice:x:4711:4711::/nonexistent:/bin/sh\n";
  std::ofstream(t / "machine/group") << std::ifstream("/etc/group").rdbuf() << "torchx:x:4712:\nalice:x:4711:\n";
  ASSERT_EQ(std::system(("mount --bind " + (t / "machine/passwd").string() + " /etc/passwd && mount --bind " +
                         (t / "machine/group").string() + " /etc/group").c_str()), 0);
  SharedBox box(t);
  ASSERT_TRUE(box.MakeUsers());
  ASSERT_TRUE(box.Start());
  struct stat st;
  ASSERT_EQ(::stat(box.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, SharedBox::kTorchxGid);
  auto run = box.As("alice", "run --wait utils.sh -- sh -c 'id -u'");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(box.As("alice", "log " + SharedBox::HandleOf(run)).out, "sh/0 5001\n");
}

// One user holding connections (each in a `wait`, say) cannot lock out the
// others, nor root and the admin group once the users' slots are all taken.
SHARED_BOX_TEST(OneUserCannotTakeEveryConnection) {
  SHARED_BOX_DIR(t);
  SharedBox box(t);
  ASSERT_TRUE(box.MakeUsers());
  ASSERT_TRUE(box.Start({"--max-connections", "40", "--max-connections-per-user", "20"}));
  auto bob = box.Hold("bob", 25);
  EXPECT_EQ(bob.accepted, 20);
  EXPECT_THAT(bob.refusal, HasSubstr("uid 5002 already has 20 connections"));
  EXPECT_THAT(bob.refusal, HasSubstr("--max-connections-per-user"));
  EXPECT_EQ(box.As("alice", "list").exit_code, 0);
  EXPECT_EQ(box.Root("list").exit_code, 0);
  // 32 of 40 are the users'; the last 8 are kept for root and the admin group.
  auto alice = box.Hold("alice", 15);
  EXPECT_EQ(alice.accepted, 12);
  EXPECT_THAT(alice.refusal, HasSubstr("8 more are kept for root and the admin group"));
  auto refused = box.As("alice", "list");
  EXPECT_NE(refused.exit_code, 0) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("kept for root"));
  EXPECT_EQ(box.Root("list").exit_code, 0);
  EXPECT_EQ(box.As("dave", "list").exit_code, 0);
  auto root_cancel = box.Root("cancel local_cwd://torchx/none-0");
  EXPECT_THAT(root_cancel.err, HasSubstr("does not exist"));  // answered, not refused
  SharedBox::Release(bob);
  for (int i = 0; i < 100 && box.As("alice", "list").exit_code != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(box.As("alice", "list").exit_code, 0);  // bob's slots came back
  SharedBox::Release(alice);
}

// Each user keeps their own finished apps: another's many runs evict none of
// them, and another's running apps never refuse anyone's run.
SHARED_BOX_TEST(OneUsersAppsNeitherEvictNorBlockAnothers) {
  SHARED_BOX_DIR(t);
  SharedBox box(t);
  ASSERT_TRUE(box.MakeUsers());
  ASSERT_TRUE(box.Start({"--cache-size", "3", "--max-running-per-user", "4", "--no-admission"}));
  auto alice = box.As("alice", "run --wait utils.echo --msg mine");
  ASSERT_EQ(alice.exit_code, 0) << alice.err;
  std::string h = SharedBox::HandleOf(alice);
  for (int i = 0; i < 6; ++i) {
    auto bob = box.As("bob", "run --wait utils.sh true");
    ASSERT_EQ(bob.exit_code, 0) << bob.err;
  }
  EXPECT_EQ(box.As("alice", "status " + h).exit_code, 0);
  EXPECT_EQ(box.As("alice", "log " + h).out, "echo/0 mine\n");
  auto bob_list = box.As("bob", "list --json");
  EXPECT_EQ(nlohmann::json::parse(bob_list.out).size(), 3u) << bob_list.out;  // his own oldest went
  // Bob's running apps: his fifth is refused, naming the limit; nobody else's run is.
  std::vector<std::string> sleepers;
  for (int i = 0; i < 4; ++i) {
    auto run = box.As("bob", "run -d utils.sh sleep 60");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    sleepers.push_back(SharedBox::HandleOf(run));
  }
  auto fifth = box.As("bob", "run -d utils.sh sleep 60");
  EXPECT_NE(fifth.exit_code, 0);
  EXPECT_THAT(fifth.err, HasSubstr("--max-running-per-user 4"));
  EXPECT_EQ(box.As("alice", "run --wait utils.sh true").exit_code, 0);
  EXPECT_EQ(box.Root("run --wait utils.sh true").exit_code, 0);
  EXPECT_EQ(box.As("alice", "status " + h).exit_code, 0);  // still hers
  for (const auto& s : sleepers) EXPECT_EQ(box.As("bob", "cancel " + s).exit_code, 0);
}

// The log budget is one for the box: bob's noisy apps, each bigger than
// alice's one, evicted her finished logs first (hers was the oldest). Split
// among the users who have logs, bob's over his share lose only his own.
SHARED_BOX_TEST(OneUsersNoisyLogsNeverEvictAnothersFinishedLogs) {
  SHARED_BOX_DIR(t);
  SharedBox box(t);
  ASSERT_TRUE(box.MakeUsers());
  ASSERT_TRUE(box.Start({"--log-max-total", "400K", "--no-admission"}));
  auto alice = box.As("alice", "run --wait utils.echo --msg mine");
  ASSERT_EQ(alice.exit_code, 0) << alice.err;
  std::string h = SharedBox::HandleOf(alice);
  std::vector<std::string> bobs;
  for (int i = 0; i < 4; ++i) {  // each ~200 KB on disk (stdout.log and combined.log)
    auto bob = box.As("bob", "run --wait utils.sh -- seq 1 20000");
    ASSERT_EQ(bob.exit_code, 0) << bob.err;
    bobs.push_back(SharedBox::HandleOf(bob));
  }
  auto mine = box.As("alice", "log " + h);
  EXPECT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_EQ(mine.out, "echo/0 mine\n");
  auto first = box.As("bob", "log " + bobs.front());
  EXPECT_NE(first.exit_code, 0) << "bob's oldest logs stayed: nothing was evicted, so this test proves nothing";
  EXPECT_THAT(first.err, HasSubstr("were evicted"));
  auto last = box.As("bob", "log " + bobs.back());
  EXPECT_EQ(last.exit_code, 0) << last.err;
}

// GPUs on a shared box: every user sees who holds which GPU (as nvidia-smi
// shows processes), only admins drain one, and usage shows everyone's totals
// but only a user's own apps.
SHARED_BOX_TEST(GpusAreSeenByAllDrainedByAdminsAloneAndUsageListsOnlyOnesOwnApps) {
  SHARED_BOX_DIR(t);
  SharedBox box(t);
  ASSERT_TRUE(box.MakeUsers());
  {
    std::ofstream(t / "gpus.json") << R"({"gpus": [{"index": 0, "uuid": "GPU-0"}, {"index": 1, "uuid": "GPU-1"}]})";
  }
  ASSERT_TRUE(box.Start({"--gpu-topology", (t / "gpus.json").string()}));  // dave is in the admin group
  auto run = box.As("alice", "run -d utils.sh --gpu 1 sleep 60");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string h = SharedBox::HandleOf(run);
  std::string app_id = h.substr(h.rfind('/') + 1);
  nlohmann::json gpus;
  for (int i = 0; i < 200; ++i) {
    gpus = nlohmann::json::parse(box.As("bob", "gpus --json").out);
    if (gpus["gpus"][0]["held_by"].is_object() || gpus["gpus"][1]["held_by"].is_object()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int held = gpus["gpus"][0]["held_by"].is_object() ? 0 : 1;
  ASSERT_TRUE(gpus["gpus"][held]["held_by"].is_object()) << gpus.dump();
  EXPECT_EQ(gpus["gpus"][held]["held_by"]["user_name"], "alice");

  auto bob = box.As("bob", "gpus --drain " + std::to_string(1 - held));
  EXPECT_EQ(bob.exit_code, 1);
  EXPECT_THAT(bob.err, HasSubstr("only root, torchxd's own user and the admin group may drain a GPU"));
  EXPECT_EQ(box.As("alice", "gpus --undrain 0").exit_code, 1);
  auto dave = box.As("dave", "gpus --drain " + std::to_string(1 - held));
  EXPECT_EQ(dave.exit_code, 0) << dave.err;
  EXPECT_THAT(dave.out, HasSubstr("drained by dave"));
  struct stat st;
  ASSERT_EQ(::stat((t / "state/gpu-service.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(box.As("dave", "gpus --undrain " + std::to_string(1 - held)).exit_code, 0);

  EXPECT_EQ(box.As("alice", "cancel " + h).exit_code, 0);
  auto mine = nlohmann::json::parse(box.As("alice", "usage --json").out);
  ASSERT_EQ(mine["apps"].size(), 1u) << mine.dump();
  EXPECT_EQ(mine["apps"][0]["app_handle"], h);
  auto theirs = nlohmann::json::parse(box.As("bob", "usage --json").out);
  EXPECT_TRUE(theirs["apps"].empty()) << "bob sees no app of alice's";
  ASSERT_EQ(theirs["users"].size(), 1u);
  EXPECT_EQ(theirs["users"][0]["user_name"], "alice");
  EXPECT_GT(theirs["users"][0]["gpu_seconds_held"].get<double>(), 0);
  EXPECT_EQ(nlohmann::json::parse(box.As("dave", "usage --json").out)["apps"].size(), 1u);  // an admin sees all
  EXPECT_EQ(box.As("bob", "usage --user alice --json").exit_code, 0);
}

}  // namespace
}  // namespace torchxd::testing
