// The Docker engine's multiplexed log framing and DOCKER_HOST.
#include "docker/docker_client.h"

#include <gtest/gtest.h>

namespace torchxd::docker {
namespace {

std::string Frame(char stream, const std::string& payload) {
  std::string h(8, '\0');
  h[0] = stream;
  uint32_t n = static_cast<uint32_t>(payload.size());
  h[4] = static_cast<char>(n >> 24);
  h[5] = static_cast<char>(n >> 16);
  h[6] = static_cast<char>(n >> 8);
  h[7] = static_cast<char>(n);
  return h + payload;
}

TEST(DockerStreamDemuxerTest, SplitsStreamsAcrossAnyChunking) {
  std::string wire = Frame(1, "out 1\n") + Frame(2, "err\n") + Frame(1, std::string(300, 'x'));
  for (size_t chunk : {1u, 3u, 8u, 9u, 1000u}) {
    SCOPED_TRACE(chunk);
    DockerStreamDemuxer d;
    std::string out, err;
    for (size_t i = 0; i < wire.size(); i += chunk) {
      d.Feed(std::string_view(wire).substr(i, chunk), [&](supervisor::OutputStream s, std::string_view b) {
        (s == supervisor::OutputStream::kStdout ? out : err).append(b);
      });
    }
    EXPECT_EQ(out, "out 1\n" + std::string(300, 'x'));
    EXPECT_EQ(err, "err\n");
  }
}

TEST(DockerSocketTest, FromDockerHost) {
  EXPECT_EQ(*DockerSocketFromEnv(core::MapEnv({})), "/var/run/docker.sock");
  EXPECT_EQ(*DockerSocketFromEnv(core::MapEnv({{"DOCKER_HOST", "unix:///run/podman/podman.sock"}})),
            "/run/podman/podman.sock");
  auto tcp = DockerSocketFromEnv(core::MapEnv({{"DOCKER_HOST", "tcp://1.2.3.4:2375"}}));
  ASSERT_FALSE(tcp.has_value());
  EXPECT_NE(tcp.error().message.find("Unix socket only"), std::string::npos);
}

}  // namespace
}  // namespace torchxd::docker
