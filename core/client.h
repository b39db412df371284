// DaemonClient: a small blocking client of the torchxd protocol, for the CLI
// and tests (never used inside the daemon's event loop).
//
// Thread contract: one instance per thread.
#ifndef TORCHXD_CORE_CLIENT_H_
#define TORCHXD_CORE_CLIENT_H_

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "core/unique_fd.h"

namespace torchxd {

class DaemonClient {
 public:
  // Unavailable (with the socket path and errno) when nothing answers.
  [[nodiscard]] static Result<DaemonClient> Connect(const std::string& socket_path);

  using EventCallback = std::function<void(const nlohmann::json& event)>;
  // Sends one request and waits for its result; events go to `on_event`.
  // A daemon-side error comes back as that Error; a broken connection is Io.
  [[nodiscard]] Result<nlohmann::json> Call(const std::string& method, const nlohmann::json& params,
                                            const EventCallback& on_event = nullptr);

  // The reply frame of a request that sends no events, as text: {"id":N,"result":...} or
  // {"id":N,"error":...}. For replies so large (a `list` page) that the caller reads them
  // without building a JSON DOM. Errors as Call's.
  [[nodiscard]] Result<std::string> CallForFrame(const std::string& method, const nlohmann::json& params);

  int fd() const { return fd_.get(); }

 private:
  explicit DaemonClient(UniqueFd fd) : fd_(std::move(fd)) {}
  [[nodiscard]] Result<void> Send(const std::string& method, const nlohmann::json& params);
  [[nodiscard]] Result<std::string> ReadFrame();

  UniqueFd fd_;
  std::string buffer_;
  int64_t next_id_ = 1;
};

}  // namespace torchxd

#endif  // TORCHXD_CORE_CLIENT_H_
