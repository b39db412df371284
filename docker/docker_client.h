// DockerClient: the Docker Engine API over its Unix socket (dockerd, or a
// `podman system service` socket), on the loop through net::HttpClient.
// The API version is negotiated once (GET /version: the engine's ApiVersion,
// capped at the newest this client speaks); calls made meanwhile wait for it.
// An absent or unreachable engine is an Unavailable error naming the socket
// and what to do, never a hang (connect timeout).
//
// DockerStreamDemuxer decodes the engine's multiplexed log stream (8-byte
// frame headers: stream 1 = stdout, 2 = stderr, then a big-endian length).
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DOCKER_DOCKER_CLIENT_H_
#define TORCHXD_DOCKER_DOCKER_CLIENT_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/environment.h"
#include "core/result.h"
#include "net/http_client.h"
#include "supervisor/replica_runtime.h"

namespace torchxd::docker {

// The engine's socket from $DOCKER_HOST (unix://PATH), default /var/run/docker.sock.
[[nodiscard]] Result<std::string> DockerSocketFromEnv(const core::EnvLookup& env);

class DockerStreamDemuxer {
 public:
  using Sink = std::function<void(supervisor::OutputStream stream, std::string_view bytes)>;
  // A frame's payload may reach `sink` in several pieces.
  void Feed(std::string_view bytes, const Sink& sink);

 private:
  unsigned char header_[8] = {};
  size_t header_have_ = 0;
  uint64_t payload_left_ = 0;
  unsigned char stream_ = 0;
};

class DockerClient {
 public:
  static constexpr const char* kMaxApiVersion = "1.43";
  using JsonDone = std::function<void(Result<nlohmann::json>)>;

  DockerClient(net::HttpClient* http, std::string socket) : http_(http), socket_(std::move(socket)) {}

  // `path` starts with '/' and has no version prefix. A 2xx answer's JSON
  // (null when empty); other statuses become errors with the engine's message.
  void Call(const std::string& method, const std::string& path, const nlohmann::json* body, JsonDone done,
            int64_t timeout_ms = 60000);
  // A streamed GET/POST; `done` when it ends (timeout 0: none).
  void Stream(const std::string& method, const std::string& path, std::function<void(std::string_view)> on_data,
              std::function<void(Result<void>)> done, std::function<void(net::HttpClient::RequestId)> started = nullptr,
              int64_t timeout_ms = 0);
  void Cancel(net::HttpClient::RequestId id) { http_->Cancel(id); }

 private:
  void Negotiate(std::function<void(Result<void>)> then);
  net::HttpRequest Request(const std::string& method, const std::string& path) const;
  Error Unreachable(const Error& cause) const;

  net::HttpClient* http_;
  std::string socket_;
  std::string version_;  // "" until negotiated
  bool negotiating_ = false;
  std::vector<std::function<void(Result<void>)>> waiting_;
};

}  // namespace torchxd::docker

#endif  // TORCHXD_DOCKER_DOCKER_CLIENT_H_
