#include "core/client.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core/json_parse.h"
#include "core/protocol.h"

namespace torchxd {

Result<DaemonClient> DaemonClient::Connect(const std::string& socket_path) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Fail(Error::InvalidArgument("socket path too long: " + socket_path));
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Fail(Error::Io(std::string("socket: ") + strerror(errno)));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Fail(Error::Disconnected("connect " + socket_path + ": " + strerror(errno)));
  }
  return DaemonClient(std::move(fd));
}

Result<std::string> DaemonClient::ReadFrame() {
  // Bytes already searched for the frame's end are not searched again (a list page is a megabyte).
  size_t searched = 0;
  for (;;) {
    size_t nl = buffer_.find('\n', searched);
    if (nl != std::string::npos) {
      std::string frame;
      if (nl + 1 == buffer_.size()) {
        frame.swap(buffer_);
        frame.pop_back();
      } else {
        frame = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
      }
      return frame;
    }
    searched = buffer_.size();
    if (buffer_.size() > protocol::kMaxFrameBytes) {
      return Fail(Error::Disconnected("torchxd sent a reply frame larger than the protocol limit"));
    }
    char chunk[65536];
    ssize_t n = ::read(fd_.get(), chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail(Error::Disconnected(std::string("read from torchxd: ") + strerror(errno)));
    if (n == 0) return Fail(Error::Disconnected("torchxd closed the connection"));
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

Result<void> DaemonClient::Send(const std::string& method, const nlohmann::json& params) {
  protocol::Request request{next_id_++, method, params};
  std::string frame = protocol::EncodeRequest(request);
  for (size_t off = 0; off < frame.size();) {
    ssize_t n = ::send(fd_.get(), frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      // The daemon may have refused us before reading (connection limit,
      // wrong uid): its reason is waiting to be read.
      std::string write_error = std::string("write to torchxd: ") + strerror(errno);
      auto pending = ReadFrame();
      if (pending) {
        auto reply = core::ParseJsonOrDiscarded(*pending);
        if (reply.is_object() && reply.contains("error")) return Fail(protocol::ErrorFromJson(reply["error"]));
      }
      return Fail(Error::Disconnected(write_error));
    }
    off += static_cast<size_t>(n);
  }
  return {};
}

Result<std::string> DaemonClient::CallForFrame(const std::string& method, const nlohmann::json& params) {
  if (auto sent = Send(method, params); !sent) return Fail(sent.error());
  return ReadFrame();
}

Result<nlohmann::json> DaemonClient::Call(const std::string& method, const nlohmann::json& params,
                                          const EventCallback& on_event) {
  if (auto sent = Send(method, params); !sent) return Fail(sent.error());
  for (;;) {
    auto text = ReadFrame();
    if (!text) return Fail(text.error());
    auto reply = core::ParseJsonOrDiscarded(*text);
    if (reply.is_discarded() || !reply.is_object()) {
      return Fail(Error::Internal("torchxd sent a malformed frame"));
    }
    if (reply.contains("event")) {
      if (on_event) on_event(reply["event"]);
      continue;
    }
    if (reply.contains("error")) return Fail(protocol::ErrorFromJson(reply["error"]));
    if (auto result = reply.find("result"); result != reply.end()) return std::move(*result);
    return Fail(Error::Internal("torchxd reply has neither result nor error"));
  }
}

}  // namespace torchxd
