// The shim's read of its spec (supervisor/shim_spec_read.h): whole however it
// arrives (a byte at a time or a million arguments), what came behind it
// kept, and a spec cut short refused.
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "core/unique_fd.h"
#include "supervisor/shim_protocol.h"
#include "supervisor/shim_spec_read.h"

namespace torchxd::supervisor {
namespace {

struct Pair {
  UniqueFd daemon, shim;
};
Pair Sockets() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

ShimSpec Spec(size_t args) {
  ShimSpec spec;
  spec.cwd = "/";
  spec.argv = {"/bin/true"};
  for (size_t i = 0; i < args; ++i) spec.argv.push_back(std::to_string(i));
  spec.env = {"A=1"};
  spec.credentials.uid = ::geteuid();
  spec.credentials.gid = ::getegid();
  return spec;
}

void WriteIn(int fd, const std::string& text, size_t piece) {
  for (size_t at = 0; at < text.size(); at += piece) {
    size_t n = std::min(piece, text.size() - at);
    ASSERT_EQ(::write(fd, text.data() + at, n), static_cast<ssize_t>(n));
  }
}

TEST(ReadSpecTest, ASpecIsReadWholeHoweverItArrivesAndWhatFollowsIsKept) {
  for (size_t piece : {size_t{1}, size_t{4096}, size_t{1} << 20}) {
    SCOPED_TRACE(piece);
    Pair p = Sockets();
    ShimSpec sent = Spec(piece == 1 ? 50 : 300'000);
    std::thread writer([&] {
      WriteIn(p.daemon.get(), EncodeShimSpec(sent) + "stop\n", piece);
      ::shutdown(p.daemon.get(), SHUT_WR);  // the daemon died at once: what it sent still counts
    });
    ShimSpec got;
    std::string rest, error;
    EXPECT_TRUE(ReadSpec(p.shim.get(), got, rest, error)) << error;
    writer.join();
    EXPECT_EQ(got.argv, sent.argv);
    // What it read past the spec is kept; the rest is still in the socket for the control loop
    // (a byte at a time, the read may end when the spec decodes and nothing more is there yet).
    std::string after = rest;
    char buf[64];
    for (ssize_t n; (n = ::read(p.shim.get(), buf, sizeof buf)) > 0;) after.append(buf, static_cast<size_t>(n));
    EXPECT_EQ(after, "stop\n");
    EXPECT_EQ(std::string("stop\n").compare(0, rest.size(), rest), 0) << "kept: " << rest;
  }
}

// The daemon waits for the shim's answer after its spec: the read must not wait for more.
TEST(ReadSpecTest, ASpecFollowedByNothingYetIsTakenWithoutWaitingForMore) {
  Pair p = Sockets();
  ShimSpec sent = Spec(100'000);
  std::string text = EncodeShimSpec(sent);
  std::thread writer([&] { WriteIn(p.daemon.get(), text, 65536); });
  auto read = std::async(std::launch::async, [&] {
    ShimSpec got;
    std::string rest, error;
    return ReadSpec(p.shim.get(), got, rest, error) && got.argv == sent.argv && rest.empty();
  });
  bool answered = read.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  writer.join();
  if (!answered) ::shutdown(p.daemon.get(), SHUT_WR);  // let it end, then fail
  EXPECT_TRUE(answered) << "the read waited for bytes that were never coming";
  EXPECT_TRUE(read.get());
}

TEST(ReadSpecTest, ASpecCutShortIsRefused) {
  Pair p = Sockets();
  std::string text = EncodeShimSpec(Spec(1000));
  WriteIn(p.daemon.get(), text.substr(0, text.size() / 2), 4096);
  ::shutdown(p.daemon.get(), SHUT_WR);
  ShimSpec got;
  std::string rest, error;
  EXPECT_FALSE(ReadSpec(p.shim.get(), got, rest, error));
  EXPECT_EQ(error, "the spec ended early");
}

}  // namespace
}  // namespace torchxd::supervisor
