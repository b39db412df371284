// The socket protocol: malformed and hostile input never takes the daemon down.
#include <sys/socket.h>
#include <sys/un.h>

#include <gmock/gmock.h>

#include <cstring>
#include <optional>
#include <vector>

#include "core/protocol.h"

#include "core/unique_fd.h"
#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

class ProtocolTest : public DaemonFixture {
 protected:
  // Sends raw bytes and returns the first reply line (or "" on EOF).
  std::string Exchange(const std::string& bytes) {
    UniqueFd fd = Raw();
    for (size_t off = 0; off < bytes.size();) {
      ssize_t n = ::send(fd.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    std::string reply;
    char c;
    while (::read(fd.get(), &c, 1) == 1 && c != '\n') reply += c;
    return reply;
  }
};

TEST_F(ProtocolTest, MalformedRequestsGetErrorReplies) {
  StartDaemon();
  struct Case {
    const char* name;
    std::string frame;
    const char* message;
  };
  const Case cases[] = {
      {"not json", "{nope\n", "request is not valid JSON"},
      {"not an object", "[1,2]\n", "request must be a JSON object"},
      {"no version", R"({"id":1,"method":"version"})" "\n", "request.v: protocol version required"},
      {"future version", R"({"v":99,"id":1,"method":"version"})" "\n", "unsupported protocol version 99"},
      {"no id", R"({"v":1,"method":"version"})" "\n", "request.id: must be an integer"},
      {"unknown method", R"({"v":1,"id":1,"method":"statsu"})" "\n", "unknown method \"statsu\". Did you mean `status`?"},
      {"params not object", R"({"v":1,"id":1,"method":"status","params":[]})" "\n", "request.params: must be an object"},
      {"missing handle", R"({"v":1,"id":1,"method":"status","params":{}})" "\n", "params.app_handle: required"},
      {"bad handle", R"({"v":1,"id":1,"method":"status","params":{"app_handle":"nope"}})" "\n", "is not of the form"},
      {"wrong type", R"({"v":1,"id":1,"method":"list","params":{"scheduler":5}})" "\n", "params.scheduler: must be a string"},
      {"wrong type in status", R"({"v":1,"id":1,"method":"cancel","params":{"app_handle":7}})" "\n", "params.app_handle: required"},
      {"run without app", R"({"v":1,"id":1,"method":"run","params":{"cwd":"/"}})" "\n", "params.app: required"},
      {"run relative cwd", R"({"v":1,"id":1,"method":"run","params":{"cwd":"x","app":{}}})" "\n", "params.cwd: must be an absolute path"},
      {"run bad appdef", R"({"v":1,"id":1,"method":"run","params":{"cwd":"/","app":{"name":"a","roles":[{"name":"r"}]}}})" "\n",
       "params.app: roles[0].entrypoint: must be set"},
      {"run unknown cfg", R"({"v":1,"id":1,"method":"run","params":{"cwd":"/","cfg":{"logdir":"/x"},"app":{"name":"a","roles":[{"name":"r","entrypoint":"x"}]}}})" "\n",
       "cfg.logdir: unknown run option. Did you mean `log_dir`?"},
      {"run bad cfg type", R"({"v":1,"id":1,"method":"run","params":{"cwd":"/","cfg":{"prepend_cwd":"yes"}, "app":{"name":"a","roles":[{"name":"r","entrypoint":"x"}]}}})" "\n",
       "Run option: prepend_cwd, must be of type: bool"},
      {"unknown scheduler", R"({"v":1,"id":1,"method":"run","params":{"cwd":"/","scheduler":"lsf","app":{"name":"a","roles":[{"name":"r","entrypoint":"x"}]}}})" "\n",
       "unknown scheduler `lsf`"},
      {"cancel bad grace", R"({"v":1,"id":1,"method":"cancel","params":{"app_handle":"local_cwd://t/x","grace_period":-1}})" "\n",
       "does not exist"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string reply = Exchange(c.frame);
    json j = json::parse(reply, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << reply;
    ASSERT_TRUE(j.contains("error")) << reply;
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr(c.message));
  }
  EXPECT_EQ(CallOk("version", json::object())["protocol"], 1);
}

TEST_F(ProtocolTest, OversizedFrameIsRefusedAndOthersAreUndisturbed) {
  StartDaemon();
  auto bystander = DaemonClient::Connect(socket_);
  ASSERT_TRUE(bystander.has_value());
  std::string huge(protocol::kMaxFrameBytes + 1024, 'x');
  std::string reply = Exchange(huge);
  EXPECT_THAT(reply, HasSubstr("frame larger than"));
  EXPECT_TRUE(bystander->Call("version", json::object()).has_value());
}

// Large frames are parsed off the loop: sent together with small ones on one
// connection, each is answered, in order, as a small one would be.
TEST_F(ProtocolTest, LargeFramesAreAnsweredInOrderWithTheSmallOnesBehindThem) {
  StartDaemon();
  std::string bad = "{" + std::string(1 << 20, 'x') + "\n";
  std::string padded = R"({"v":1,"id":7,"method":"list","params":{"scheduler":"local_cwd"})" +
                       std::string(600 << 10, ' ') + "}\n";
  std::string small = R"({"v":1,"id":8,"method":"version"})" "\n";
  UniqueFd fd = Raw();
  std::string bytes = bad + padded + small + padded;
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = ::send(fd.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << strerror(errno);
    off += static_cast<size_t>(n);
  }
  std::vector<json> replies;
  std::string line;
  char c;
  while (replies.size() < 4 && ::read(fd.get(), &c, 1) == 1) {
    if (c != '\n') {
      line += c;
      continue;
    }
    replies.push_back(json::parse(line, nullptr, false));
    line.clear();
  }
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_THAT(replies[0]["error"]["message"].get<std::string>(), HasSubstr("request is not valid JSON"));
  EXPECT_EQ(replies[1]["id"], 7);
  EXPECT_TRUE(replies[1].contains("result")) << replies[1].dump();
  EXPECT_EQ(replies[2]["id"], 8);
  EXPECT_EQ(replies[2]["result"]["protocol"], 1);
  EXPECT_EQ(replies[3]["id"], 7);
  EXPECT_TRUE(replies[3].contains("result")) << replies[3].dump();
}

TEST_F(ProtocolTest, GarbageAndAbruptDisconnectsDoNotHurt) {
  StartDaemon();
  std::string noise;
  for (int i = 0; i < 100000; ++i) noise += static_cast<char>((i * 7919) % 256);
  Exchange(noise + "\n");
  { UniqueFd half = Raw(); std::string partial = R"({"v":1,"id":1,"meth)"; (void)::send(half.get(), partial.data(), partial.size(), MSG_NOSIGNAL); }
  EXPECT_EQ(CallOk("version", json::object())["protocol"], 1);
}

TEST_F(ProtocolTest, SeveralRequestsOnOneConnectionAreAnsweredInOrder) {
  StartDaemon();
  auto c = DaemonClient::Connect(socket_);
  ASSERT_TRUE(c.has_value());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(c->Call("version", json::object()).has_value());
  EXPECT_FALSE(c->Call("nope", json::object()).has_value());
  EXPECT_TRUE(c->Call("list", json::object()).has_value());
}

TEST_F(ProtocolTest, ConnectionLimitRefusesExtraClientsWithAnError) {
  StartDaemon({"--max-connections", "2"});
  // The daemon may not have seen StartDaemon's probe connection close yet: retry until both fit.
  std::optional<DaemonClient> a, b;
  ASSERT_TRUE(WaitUntil([&] {
    for (auto* c : {&a, &b}) {
      if (*c && (*c)->Call("version", json::object()).has_value()) continue;
      auto fresh = DaemonClient::Connect(socket_);
      if (!fresh || !fresh->Call("version", json::object()).has_value()) return false;
      c->emplace(std::move(*fresh));
    }
    return true;
  }));
  auto third = DaemonClient::Connect(socket_);
  ASSERT_TRUE(third.has_value());
  auto refused = third->Call("version", json::object());
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().message, HasSubstr("maximum of 2 connections"));
  EXPECT_TRUE(a->Call("version", json::object()).has_value());
}

TEST_F(ProtocolTest, OverlongSocketPathIsRefusedNotTruncated) {
  std::string long_socket = (dir_ / std::string(120, 's')).string();
  std::string out = (dir_ / "d.log").string();
  int rc = std::system((std::string(TORCHXD_BIN) + " --socket " + long_socket + " --state-dir " +
                        (dir_ / "st").string() + " > " + out + " 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  EXPECT_THAT(ReadFile(out), HasSubstr("Unix sockets allow at most 107"));
}

TEST_F(ProtocolTest, IdleClientsAreDroppedButAWaitingOneIsNot) {
  StartDaemon({"--idle-timeout", "0.3"});
  auto idle = DaemonClient::Connect(socket_);
  ASSERT_TRUE(idle.has_value());
  std::string h = Run(App("slow", {FakeRole("r", {"--sleep", "0.8"})}));
  auto waiter = DaemonClient::Connect(socket_);
  ASSERT_TRUE(waiter.has_value());
  auto done = waiter->Call("wait", {{"app_handle", h}});  // lasts longer than the idle limit
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ((*done)["state"], "SUCCEEDED");
  auto dropped = idle->Call("version", json::object());
  EXPECT_FALSE(dropped.has_value());
}

}  // namespace
}  // namespace torchxd::testing
