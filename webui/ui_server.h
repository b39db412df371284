// UiServer: the web page and /metrics (docs/web-ui.md), on the daemon's loop.
//
// Listeners: the Unix socket `ui.sock` beside the protocol socket (who calls
// is known from SO_PEERCRED, as on the protocol socket), and with --ui-listen
// a TCP address (127.0.0.1 by default; another address needs
// --ui-allow-remote), where only a user's token lets anyone in.
//
// Every request passes, in order: the Host check (DNS rebinding), who is
// calling (peer uid, or token from the Authorization header or the cookie
// that `?token=` sets once, after asking a visitor signed in as someone
// else), the method check (GET never changes anything;
// POST only where something changes; anything else 405), the CSRF check on
// every non-GET request, then the route. Operations run through the same
// RequestHandler as the CLI's, with the caller's uid: the daemon's own rules
// decide who may see or cancel what.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_WEBUI_UI_SERVER_H_
#define TORCHXD_WEBUI_UI_SERVER_H_

#include <sys/types.h>
#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/request_handler.h"
#include "core/result.h"
#include "webui/auth.h"
#include "webui/change_feed.h"
#include "webui/http_server.h"

namespace torchxd::webui {

// Event streams (open pages) one user may hold at once: a page streams from
// at most four tabs (Web Locks), so this leaves room for several browsers.
inline constexpr size_t kMaxStreamsPerUser = 16;

struct UiOptions {
  std::string unix_path;           // "" = no Unix listener
  std::optional<gid_t> group;      // the socket is 0660 to this group (system mode), else 0600
  std::optional<uid_t> only_uid;   // a user-mode daemon serves its own user only
  std::string tcp_listen;          // "127.0.0.1:8080", ":0" picks a port; "" = none
  bool allow_remote = false;       // a non-loopback tcp_listen needs it
  std::vector<std::string> allowed_hosts;  // Host names besides loopback
  bool read_only = false;          // every change refused, cancel buttons hidden
  std::string tokens_path;         // the token file ("" = in memory)
  std::function<bool(const protocol::PeerInfo&)> may_act_on_all;
  std::function<std::string()> metrics;  // Prometheus text
  std::string version;
  HttpLimits limits;  // each listener's connections (per peer, in total, the admins' reserve)
};

class UiServer : public HttpHandler {
 public:
  UiServer(uv_loop_t* loop, protocol::RequestHandler* handler, UiOptions options);
  ~UiServer() override;
  [[nodiscard]] Result<void> Start();
  void Stop();
  // What `torchx ui` prints for `peer`: {"socket", "url"?, "token"?, "ssh"?}.
  [[nodiscard]] Result<nlohmann::json> InfoFor(const protocol::PeerInfo& peer);
  int tcp_port() const { return tcp_port_; }
  // "http://HOST:PORT" of the TCP listener (no token in it), or "" without one.
  std::string BaseUrl() const;
  // The apps changed (a record was written): open pages fetch what they show.
  ChangeFeed& changes() { return changes_; }
  // Requests in progress on both listeners (streams included).
  size_t exchanges() const { return (unix_ ? unix_->exchanges() : 0) + (tcp_ ? tcp_->exchanges() : 0); }

  void Handle(const std::shared_ptr<HttpExchange>& exchange) override;

 private:
  [[nodiscard]] Result<int> ListenUnix();
  [[nodiscard]] Result<int> ListenTcp();
  std::optional<protocol::PeerInfo> Caller(const HttpRequest& r) const;
  // `GET ...?token=T`: a visitor with no session (or T's user's) is signed in
  // at once; one signed in as someone else is asked first (login CSRF: a link
  // someone sent would otherwise switch the visitor's page to their user).
  void SignInLink(const std::shared_ptr<HttpExchange>& exchange);
  // `POST /signin` from that question's button.
  void SignInConfirmed(const std::shared_ptr<HttpExchange>& exchange);
  void SetCookieAndGo(const std::shared_ptr<HttpExchange>& exchange, const std::string& token,
                      const std::string& location);
  void Route(const std::shared_ptr<HttpExchange>& exchange, const protocol::PeerInfo& peer);
  void Api(const std::shared_ptr<HttpExchange>& exchange, const protocol::PeerInfo& peer, const std::string& method,
           nlohmann::json params);
  void Download(const std::shared_ptr<HttpExchange>& exchange, const protocol::PeerInfo& peer);
  void Session(const std::shared_ptr<HttpExchange>& exchange, const protocol::PeerInfo& peer);
  void Static(const std::shared_ptr<HttpExchange>& exchange, const std::string& name);
  std::string CookieName() const;

  uv_loop_t* loop_;
  protocol::RequestHandler* handler_;
  UiOptions options_;
  UiTokens tokens_;
  std::unique_ptr<HttpServer> unix_;
  std::unique_ptr<HttpServer> tcp_;
  int tcp_port_ = 0;
  std::string tcp_host_;
  int64_t next_id_ = 1;
  ChangeFeed changes_;
  std::map<uid_t, size_t> streams_;  // open event streams per user
};

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_UI_SERVER_H_
