// local_docker against a fake engine (tests/docker/fake_engine.py) that shows,
// on demand, the faults a real one shows now and then: a log follow that ends
// before the output does, one that never ends, a wait answer with an error.
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <gmock/gmock.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "core/unique_fd.h"
#include "tests/daemon/daemon_fixture.h"

extern char** environ;

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

class DockerFaultTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    engine_socket_ = (dir_ / "engine.sock").string();
    std::vector<std::string> args = {"/usr/bin/setpriv", "--pdeathsig", "KILL", "/usr/bin/python3", FAKE_ENGINE,
                                     "--socket", engine_socket_};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(::posix_spawn(&engine_, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    ASSERT_TRUE(WaitUntil([&] { return fs::exists(engine_socket_); }));
    ::setenv("DOCKER_HOST", ("unix://" + engine_socket_).c_str(), 1);
    StartDaemon();
  }
  void TearDown() override {
    DaemonFixture::TearDown();
    if (engine_ > 0) {
      ::kill(engine_, SIGKILL);
      ::waitpid(engine_, nullptr, 0);
    }
  }

  // One request to the engine (HTTP/1.0: the answer ends with the connection).
  json Engine(const std::string& path, const std::string& method = "GET") {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, engine_socket_.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return json();
    std::string request = method + " " + path + " HTTP/1.0\r\nHost: docker\r\n\r\n";
    if (::write(fd.get(), request.data(), request.size()) < 0) return json();
    std::string answer;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd.get(), buf, sizeof(buf))) > 0;) answer.append(buf, static_cast<size_t>(n));
    size_t body = answer.find("\r\n\r\n");
    return body == std::string::npos ? json() : json::parse(answer.substr(body + 4), nullptr, false);
  }
  size_t ContainersOf(const std::string& handle) {
    std::string app_id = handle.substr(handle.rfind('/') + 1);
    std::string filters = "%7B%22label%22%3A%5B%22torchx.pytorch.org%2Fapp-id%3D" + app_id + "%22%5D%7D";
    json list = Engine("/v1.41/containers/json?all=1&filters=" + filters);
    return list.is_array() ? list.size() : 999;
  }

  static json Role(const std::string& name, const json& env, int replicas = 1, const std::string& image = "fake:1") {
    return {{"name", name}, {"image", image}, {"entrypoint", "run"}, {"env", env}, {"num_replicas", replicas}};
  }
  json Events(const std::string& handle) { return CallOk("events", {{"app_handle", handle}})["events"]; }
  // The texts of the app's events of `type`.
  std::vector<std::string> Said(const std::string& handle, const std::string& type) {
    std::vector<std::string> out;
    for (const auto& e : Events(handle)) {
      if (e["type"] == type) out.push_back(e["text"]);
    }
    return out;
  }
  std::vector<std::string> Lines(const std::string& handle) {
    std::vector<std::string> lines;
    auto client = DaemonClient::Connect(socket_);
    if (!client) return lines;
    auto done = client->Call("log", {{"app_handle", handle}}, [&](const json& e) {
      for (const auto& l : e.value("lines", json::array())) lines.push_back(l[1]);
    });
    EXPECT_TRUE(done.has_value());
    return lines;
  }
  static std::vector<std::string> Numbered(int n) {
    std::vector<std::string> out;
    for (int i = 1; i <= n; ++i) out.push_back("line " + std::to_string(i));
    return out;
  }

  std::string engine_socket_;
  pid_t engine_ = -1;
};

TEST_F(DockerFaultTest, AFollowThatEndsEarlyLosesNoLine) {
  // The engine ends the follow after 3 frames though 200 lines come: what it
  // held back is read once the container is waited for, each line once.
  std::string h = Run(App("early", {Role("w", {{"FAKE_LINES", "200"}, {"FAKE_FOLLOW", "early"}})}), json::object(),
                      "local_docker");
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(Lines(h), Numbered(200));
}

TEST_F(DockerFaultTest, AFollowThatEndsEarlyWhileRunningIsResumed) {
  std::string h = Run(App("slow", {Role("w", {{"FAKE_LINES", "20"}, {"FAKE_INTERVAL", "0.05"}, {"FAKE_FOLLOW", "early"}})}),
                      json::object(), "local_docker");
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(Lines(h), Numbered(20));
}

TEST_F(DockerFaultTest, AFollowThatNeverEndsDoesNotHoldTheReplica) {
  std::string h = Run(App("forever", {Role("w", {{"FAKE_LINES", "5"}, {"FAKE_EXIT", "2"}, {"FAKE_FOLLOW", "forever"}})}),
                      json::object(), "local_docker");
  auto start = std::chrono::steady_clock::now();
  json st = Wait(h);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(Replica(st, "w", 0)["exit_code"], 2);
  EXPECT_EQ(Lines(h), Numbered(5));
  // Cancel and the daemon's shutdown do not hang on such a stream either.
  std::string running = Run(App("stuck", {Role("w", {{"FAKE_SLEEP", "600"}, {"FAKE_FOLLOW", "forever"}})}),
                            json::object(), "local_docker");
  ASSERT_TRUE(WaitUntil([&] { return Status(running)["state"] == "RUNNING"; }));
  json cancelled = CallOk("cancel", {{"app_handle", running}});
  EXPECT_EQ(cancelled["state"], "CANCELLED");
  std::string other = Run(App("stuck2", {Role("w", {{"FAKE_SLEEP", "600"}, {"FAKE_FOLLOW", "forever"}})}),
                          json::object(), "local_docker");
  ASSERT_TRUE(WaitUntil([&] { return Status(other)["state"] == "RUNNING"; }));
  auto stop = std::chrono::steady_clock::now();
  EXPECT_EQ(StopDaemon(SIGTERM), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - stop, std::chrono::seconds(15));
}

TEST_F(DockerFaultTest, TheWaitAnswersErrorIsTheReplicasMessage) {
  std::string h = Run(App("err", {Role("w", {{"FAKE_EXIT", "127"}, {"FAKE_WAIT_ERROR", "OCI runtime exec failed: no such file"}})}),
                      json::object(), "local_docker");
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_THAT(Replica(st, "w", 0)["error_message"].get<std::string>(), HasSubstr("OCI runtime exec failed: no such file"));
}

TEST_F(DockerFaultTest, AnEngineOutageCuttingTheWaitDoesNotFailTheReplica) {
  // The wait is cut and the engine answers nothing for 2 s while the
  // container runs on (4 s): the replica is waited for again, and its own exit
  // code is what the app reports.
  std::string h = Run(App("outage", {Role("w", {{"FAKE_LINES", "3"}, {"FAKE_SLEEP", "4"}, {"FAKE_EXIT", "5"},
                                                {"FAKE_OUTAGE", "2"}})}),
                      json::object(), "local_docker");
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(Replica(st, "w", 0)["exit_code"], 5) << st.dump();
  EXPECT_EQ(Lines(h), Numbered(3));
}

TEST_F(DockerFaultTest, ARestartedDaemonWaitsOutAnEngineOutage) {
  // torchxd comes back while the engine is still down: its containers are
  // not declared gone; they are adopted once the engine answers again.
  std::string h = Run(App("adopt", {Role("w", {{"FAKE_LINES", "2"}, {"FAKE_SLEEP", "3"}, {"FAKE_EXIT", "6"}})}),
                      json::object(), "local_docker");
  ASSERT_TRUE(WaitUntil([&] { return Replica(Status(h), "w", 0)["pid"].is_number(); }));  // started
  StopDaemon(SIGKILL);
  Engine("/fake/outage?seconds=3", "POST");
  ASSERT_TRUE(Engine("/v1.41/version").is_null()) << "the engine is down";
  StartDaemon();
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(Replica(st, "w", 0)["exit_code"], 6) << st.dump();
  EXPECT_EQ(Lines(h), Numbered(2));
}

TEST_F(DockerFaultTest, AContainerCreatedButNotStartedIsStartedByTheNextDaemon) {
  // torchxd is killed while its start request is still unanswered; the engine
  // never starts it (it drops the request later, whether or not the next
  // torchxd is up by then). The next torchxd starts it rather than reading
  // the created container's exit code 0 as a success.
  std::string h = Run(App("created", {Role("w", {{"FAKE_LINES", "2"}, {"FAKE_EXIT", "6"}, {"FAKE_START_HANG", "2"}})}),
                      json::object(), "local_docker");
  ASSERT_TRUE(WaitUntil([&] { return ContainersOf(h) == 1; }));
  StopDaemon(SIGKILL);
  StartDaemon();
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(Replica(st, "w", 0)["exit_code"], 6) << st.dump();
  EXPECT_EQ(Lines(h), Numbered(2));
}

TEST_F(DockerFaultTest, AStartStillUnderWayWhenTheDaemonDiedIsWaitedForNotRepeated) {
  // torchxd is killed while the engine is still starting its container (it
  // runs, but reads "created" and refuses another start for 2 s). The next
  // torchxd looks again rather than failing the replica on that refusal.
  std::string h = Run(App("racing", {Role("w", {{"FAKE_LINES", "6"}, {"FAKE_INTERVAL", "0.5"}, {"FAKE_EXIT", "4"},
                                                {"FAKE_START_RACE", "2"}})}),
                      json::object(), "local_docker");
  ASSERT_TRUE(WaitUntil([&] { return ContainersOf(h) == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the start is under way
  StopDaemon(SIGKILL);
  StartDaemon();
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(Replica(st, "w", 0)["exit_code"], 4) << st.dump();
  EXPECT_EQ(Lines(h), Numbered(6));
}

TEST_F(DockerFaultTest, AWaitAnsweredWhileTheContainerStillRunsIsNotItsExit) {
  // A busy engine answers the first waits at once with StatusCode 0 while
  // the container runs on: its exit is what its state says once it ended.
  std::string h = Run(App("early", {Role("w", {{"FAKE_LINES", "3"}, {"FAKE_INTERVAL", "0.2"}, {"FAKE_EXIT", "3"},
                                               {"FAKE_WAIT_EARLY", "3"}})}),
                      json::object(), "local_docker");
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED") << st.dump();
  EXPECT_EQ(Replica(st, "w", 0)["exit_code"], 3) << st.dump();
  EXPECT_EQ(Lines(h), Numbered(3));
}

TEST_F(DockerFaultTest, ContainersAreRemovedWhenTheAppEndsNotEachReplica) {
  // Replica a ends at once; b still runs and may resolve a's name meanwhile.
  std::string h = Run(App("pair", {Role("a", {{"FAKE_LINES", "1"}}), Role("b", {{"FAKE_SLEEP", "5"}})}),
                      json::object(), "local_docker");
  // (b's container may be created after a ended on a loaded machine: wait for both.)
  ASSERT_TRUE(WaitUntil([&] {
    json st = Status(h);
    return Replica(st, "a", 0)["state_name"] == "SUCCEEDED" && Replica(st, "b", 0)["state_name"] == "RUNNING";
  }));
  EXPECT_EQ(Status(h)["state"], "RUNNING");
  EXPECT_EQ(ContainersOf(h), 2u) << "a finished replica's container stays while its app runs";
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(ContainersOf(h), 0u) << "an ended app leaves no container";
}

TEST_F(DockerFaultTest, AnImagePullDoesNotHoldTheSubmitAndSaysHowFarItIs) {
  auto before = std::chrono::steady_clock::now();
  std::string h = Run(App("pull", {Role("w", {{"FAKE_LINES", "1"}}, 1, "fake/slow:3")}), json::object(), "local_docker");
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(2)) << "the submit waited for the pull";
  json st = Status(h);
  EXPECT_EQ(st["state"], "PENDING");
  EXPECT_THAT(st["msg"].get<std::string>(), HasSubstr("pulling image fake/slow:3"));
  json list = CallOk("list", json::object());
  bool listed = false;
  for (const auto& row : list["apps"]) {
    if (row[0] != h) continue;
    listed = true;
    EXPECT_THAT(row[10].get<std::string>(), HasSubstr("pulling image fake/slow:3")) << "list's reason";
  }
  EXPECT_TRUE(listed) << "a pulling app is in list: " << list.dump();
  // Progress, at most once a second, while it lasts.
  ASSERT_TRUE(WaitUntil([&] {
    for (const auto& t : Said(h, "pulling")) {
      if (t.find(" of 1.2 GB, ") != std::string::npos) return true;
    }
    return false;
  })) << Events(h).dump(1);
  EXPECT_THAT(Status(h)["msg"].get<std::string>(), HasSubstr("MB of 1.2 GB"));
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(Lines(h), Numbered(1));
  std::vector<std::string> pulling = Said(h, "pulling");
  EXPECT_GE(pulling.size(), 2u);
  EXPECT_LE(pulling.size(), 6u) << "progress is said at most each second";
  std::vector<std::string> pulled = Said(h, "pulled");
  ASSERT_EQ(pulled.size(), 1u);
  EXPECT_THAT(pulled[0], HasSubstr("pulled image fake/slow:3 in "));
  EXPECT_THAT(pulled[0], HasSubstr("(1.2 GB)"));
  // Pulled before it was admitted and started.
  std::vector<std::string> order;
  for (const auto& e : Events(h)) order.push_back(e["type"]);
  auto at = [&](const std::string& type) { return std::find(order.begin(), order.end(), type) - order.begin(); };
  EXPECT_LT(at("pulled"), at("started"));
}

TEST_F(DockerFaultTest, AMissingImageFailsTheAppWithTheEnginesReason) {
  std::string h = Run(App("nope", {Role("w", {}, 1, "fake/missing:1")}), json::object(), "local_docker");
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_THAT(st["msg"].get<std::string>(),
              HasSubstr("image fake/missing:1 is not available: the pull failed (pull access denied for fake/missing:1)"));
  EXPECT_EQ(ContainersOf(h), 0u);
}

TEST_F(DockerFaultTest, ACancelStopsAPullAndARestartPullsAgain) {
  std::string cancelled = Run(App("c", {Role("w", {}, 1, "fake/slow:30")}), json::object(), "local_docker");
  std::string resumed = Run(App("r", {Role("w", {{"FAKE_LINES", "1"}}, 1, "fake/slow:4")}), json::object(), "local_docker");
  ASSERT_TRUE(WaitUntil([&] { return Said(cancelled, "pulling").size() >= 2 && Said(resumed, "pulling").size() >= 2; }));
  CallOk("cancel", {{"app_handle", cancelled}});
  json st = Wait(cancelled);
  EXPECT_EQ(st["state"], "CANCELLED");
  EXPECT_THAT(st["msg"].get<std::string>(), HasSubstr("cancelled by user while pulling image fake/slow:30"));
  // A daemon killed mid-pull: the next one pulls again and runs the app.
  int pulls = Engine("/fake/pulls")["pulls"];
  StopDaemon(SIGKILL);
  StartDaemon();
  EXPECT_EQ(Wait(resumed)["state"], "SUCCEEDED");
  EXPECT_EQ(Lines(resumed), Numbered(1));
  EXPECT_GT(Engine("/fake/pulls")["pulls"].get<int>(), pulls);
  EXPECT_EQ(Status(cancelled)["state"], "CANCELLED") << "a cancelled pull stays cancelled";
}

}  // namespace
}  // namespace torchxd::testing
