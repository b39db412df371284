#include "docker/docker_client.h"

#include "core/json_parse.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace torchxd::docker {
namespace {

using nlohmann::json;

// "1.41" < "1.43", numerically per part.
bool VersionLess(const std::string& a, const std::string& b) {
  int a1 = 0, a2 = 0, b1 = 0, b2 = 0;
  std::sscanf(a.c_str(), "%d.%d", &a1, &a2);
  std::sscanf(b.c_str(), "%d.%d", &b1, &b2);
  return a1 != b1 ? a1 < b1 : a2 < b2;
}

Error EngineError(long status, const std::string& body, const std::string& what) {
  json j = core::ParseJsonOrDiscarded(body);
  std::string message = j.is_object() && j.contains("message") && j["message"].is_string()
                            ? j["message"].get<std::string>()
                            : body.substr(0, 300);
  ErrorCode code = status == 404   ? ErrorCode::kNotFound
                   : status == 409 ? ErrorCode::kAlreadyExists
                   : status == 400 ? ErrorCode::kInvalidArgument
                                   : ErrorCode::kUnavailable;
  return Error{code, "docker engine " + what + ": " + std::to_string(status) + ": " + message};
}

}  // namespace

Result<std::string> DockerSocketFromEnv(const core::EnvLookup& env) {
  auto host = env("DOCKER_HOST");
  if (!host || host->empty()) return std::string("/var/run/docker.sock");
  const std::string prefix = "unix://";
  if (host->rfind(prefix, 0) == 0 && host->size() > prefix.size()) return host->substr(prefix.size());
  return Fail(Error::InvalidArgument("DOCKER_HOST=" + *host +
                                     ": torchxd talks to the engine over a Unix socket only (unix:///path)"));
}

void DockerStreamDemuxer::Feed(std::string_view bytes, const Sink& sink) {
  // Payloads are passed on as they arrive: nothing is buffered but a header,
  // whatever length a frame claims.
  while (!bytes.empty()) {
    if (payload_left_ == 0) {
      size_t take = std::min(bytes.size(), sizeof(header_) - header_have_);
      std::memcpy(header_ + header_have_, bytes.data(), take);
      header_have_ += take;
      bytes.remove_prefix(take);
      if (header_have_ < sizeof(header_)) return;
      header_have_ = 0;
      stream_ = header_[0];
      payload_left_ = (uint32_t{header_[4]} << 24) | (uint32_t{header_[5]} << 16) | (uint32_t{header_[6]} << 8) |
                      uint32_t{header_[7]};
      continue;
    }
    size_t take = static_cast<size_t>(std::min<uint64_t>(bytes.size(), payload_left_));
    std::string_view payload = bytes.substr(0, take);
    bytes.remove_prefix(take);
    payload_left_ -= take;
    if (stream_ == 2) {
      sink(supervisor::OutputStream::kStderr, payload);
    } else if (stream_ == 1 || stream_ == 0) {
      sink(supervisor::OutputStream::kStdout, payload);
    }  // 3: the engine's own error channel
  }
}

net::HttpRequest DockerClient::Request(const std::string& method, const std::string& path) const {
  net::HttpRequest r;
  r.method = method;
  r.unix_socket = socket_;
  r.url = "http://docker" + (version_.empty() ? path : "/v" + version_ + path);
  r.connect_timeout_ms = 5000;
  return r;
}

Error DockerClient::Unreachable(const Error& cause) const {
  return Error::Unavailable("the Docker engine at unix://" + socket_ + " is not reachable (" + cause.message +
                            "); start dockerd or `podman system service`, or set DOCKER_HOST=unix://PATH in torchxd's own "
                            "environment (the daemon's, not the client's: systemctl edit torchxd, or the shell that "
                            "starts it) and restart it");
}

void DockerClient::Negotiate(std::function<void(Result<void>)> then) {
  if (!version_.empty()) return then({});
  waiting_.push_back(std::move(then));
  if (negotiating_) return;
  negotiating_ = true;
  net::HttpRequest r = Request("GET", "/version");
  r.timeout_ms = 30000;  // an engine under load can take many seconds; one that is down refuses at once
  http_->Start(std::move(r), nullptr, [this](Result<net::HttpResponse> resp) {
    negotiating_ = false;
    Result<void> outcome;
    if (!resp) {
      outcome = Fail(Unreachable(resp.error()));
    } else if (resp->status != 200) {
      outcome = Fail(EngineError(resp->status, resp->body, "GET /version"));
    } else {
      json v = core::ParseJsonOrDiscarded(resp->body);
      std::string server = v.is_object() ? v.value("ApiVersion", "1.41") : "1.41";
      version_ = VersionLess(server, kMaxApiVersion) ? server : kMaxApiVersion;
    }
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& w : waiting) w(outcome);
  });
}

void DockerClient::Call(const std::string& method, const std::string& path, const json* body, JsonDone done,
                        int64_t timeout_ms) {
  std::string payload = body != nullptr ? body->dump() : std::string();
  Negotiate([this, method, path, payload, done, timeout_ms](Result<void> ready) {
    if (!ready) return done(Fail(ready.error()));
    net::HttpRequest r = Request(method, path);
    r.timeout_ms = timeout_ms;
    if (!payload.empty()) {
      r.body = payload;
      r.headers.push_back("Content-Type: application/json");
    }
    std::string what = method + " " + path;
    http_->Start(std::move(r), nullptr, [this, what, done](Result<net::HttpResponse> resp) {
      if (!resp) return done(Fail(Unreachable(resp.error())));
      if (resp->status < 200 || resp->status >= 300) return done(Fail(EngineError(resp->status, resp->body, what)));
      if (resp->body.empty()) return done(json());
      json parsed = core::ParseJsonOrDiscarded(resp->body);
      done(parsed.is_discarded() ? json(resp->body) : parsed);
    });
  });
}

void DockerClient::Stream(const std::string& method, const std::string& path,
                          std::function<void(std::string_view)> on_data, std::function<void(Result<void>)> done,
                          std::function<void(net::HttpClient::RequestId)> started, int64_t timeout_ms) {
  Negotiate([this, method, path, on_data, done, started, timeout_ms](Result<void> ready) {
    if (!ready) return done(Fail(ready.error()));
    net::HttpRequest r = Request(method, path);
    r.stream = true;
    r.timeout_ms = timeout_ms;
    std::string what = method + " " + path;
    auto id = http_->Start(std::move(r), on_data, [this, what, done](Result<net::HttpResponse> resp) {
      if (!resp) return done(Fail(Unreachable(resp.error())));
      if (resp->status < 200 || resp->status >= 300) return done(Fail(EngineError(resp->status, resp->body, what)));
      done({});
    });
    if (started) started(id);
  });
}

}  // namespace torchxd::docker
