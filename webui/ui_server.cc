#include "webui/ui_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>


#include "core/log.h"
#include "core/replica_key.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "core/user_db.h"
#include "webui/assets.h"
#include "webui/bridge.h"
#include "webui/event_stream.h"

namespace torchxd::webui {
namespace {

using nlohmann::json;

// Operations a page may read with GET; the only change it may ask for is cancel (POST).
const std::vector<std::string> kReadMethods = {"version", "list", "status", "describe", "queue",
                                               "gpus", "gpu_history", "gpu_timeline", "usage", "events"};
const std::vector<std::string> kChangeMethods = {"cancel"};

const char kCsp[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

HttpHeaders Secured(HttpHeaders headers) {
  headers.emplace_back("X-Content-Type-Options", "nosniff");
  headers.emplace_back("Content-Security-Policy", kCsp);
  headers.emplace_back("X-Frame-Options", "DENY");
  headers.emplace_back("Referrer-Policy", "no-referrer");
  headers.emplace_back("Cross-Origin-Resource-Policy", "same-origin");
  return headers;
}

void ReplyJson(const std::shared_ptr<HttpExchange>& exchange, int status, std::string body) {
  exchange->Reply(status, Secured({{"Content-Type", "application/json"}, {"Cache-Control", "no-store"}}),
                  std::move(body));
}

void ReplyError(const std::shared_ptr<HttpExchange>& exchange, const Error& error) {
  ReplyJson(exchange, HttpStatusOf(error), ErrorJson(error));
}

void ReplyText(const std::shared_ptr<HttpExchange>& exchange, int status, std::string text, HttpHeaders extra = {}) {
  extra.emplace_back("Content-Type", "text/plain; charset=utf-8");
  extra.emplace_back("Cache-Control", "no-store");
  exchange->Reply(status, Secured(std::move(extra)), std::move(text) + "\n");
}

bool IsPageRoute(const std::string& path) {
  return path == "/" || path == "/queue" || core::StartsWith(path, "/apps/");
}

std::string SafeFileName(std::string text) {
  for (char& c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return text;
}

}  // namespace

UiServer::UiServer(uv_loop_t* loop, protocol::RequestHandler* handler, UiOptions options)
    : loop_(loop), handler_(handler), options_(std::move(options)), tokens_(options_.tokens_path) {}

UiServer::~UiServer() { Stop(); }

Result<void> UiServer::Start() {
  if (auto loaded = tokens_.Load(); !loaded) return Fail(loaded.error());
  if (!options_.unix_path.empty()) {
    auto fd = ListenUnix();
    if (!fd) return Fail(fd.error());
    unix_ = std::make_unique<HttpServer>(loop_, this, options_.limits);
    if (auto ok = unix_->Start(*fd, true); !ok) return Fail(ok.error());
  }
  if (!options_.tcp_listen.empty()) {
    auto fd = ListenTcp();
    if (!fd) return Fail(fd.error());
    tcp_ = std::make_unique<HttpServer>(loop_, this, options_.limits);
    if (auto ok = tcp_->Start(*fd, false); !ok) return Fail(ok.error());
  }
  return {};
}

void UiServer::Stop() {
  if (unix_) unix_->Stop();
  if (tcp_) tcp_->Stop();
  unix_.reset();
  tcp_.reset();
}

Result<int> UiServer::ListenUnix() {
  const std::string& path = options_.unix_path;
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Fail(Error::InvalidArgument("web socket path " + path + " is longer than 107 bytes"));
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Fail(Error::Io(std::string("socket: ") + std::strerror(errno)));
  ::unlink(path.c_str());  // a dead daemon's: this one holds the state directory's lock
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  mode_t old = ::umask(0177);
  int bound = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (bound != 0) return Fail(Error::Io("bind " + path + ": " + std::strerror(errno)));
  if (options_.group) {
    if (::chown(path.c_str(), static_cast<uid_t>(-1), *options_.group) != 0 || ::chmod(path.c_str(), 0660) != 0) {
      return Fail(Error::Io("chown/chmod " + path + ": " + std::strerror(errno)));
    }
  }
  if (::listen(fd.get(), 128) != 0) return Fail(Error::Io("listen " + path + ": " + std::strerror(errno)));
  return fd.release();
}

Result<int> UiServer::ListenTcp() {
  const std::string& spec = options_.tcp_listen;
  size_t colon = spec.rfind(':');
  if (colon == std::string::npos) {
    return Fail(Error::InvalidArgument("--ui-listen " + spec + ": expected HOST:PORT (e.g. 127.0.0.1:8080)"));
  }
  std::string host = spec.substr(0, colon);
  std::string port = spec.substr(colon + 1);
  if (host.empty()) host = "127.0.0.1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Fail(Error::InvalidArgument("--ui-listen " + spec + ": " + gai_strerror(rc) +
                                       " (give a numeric address and port, e.g. 127.0.0.1:8080)"));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  bool loopback = (found->ai_family == AF_INET &&
                   (ntohl(reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr.s_addr) >> 24) == 127) ||
                  (found->ai_family == AF_INET6 &&
                   IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr));
  if (!loopback && !options_.allow_remote) {
    return Fail(Error::InvalidArgument("--ui-listen " + spec +
                                       " is not a loopback address: anyone who can reach it could try tokens; "
                                       "add --ui-allow-remote to serve it anyway (token only)"));
  }
  UniqueFd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Fail(Error::Io(std::string("socket: ") + std::strerror(errno)));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0) {
    return Fail(Error::Io("--ui-listen " + spec + ": bind: " + std::strerror(errno)));
  }
  if (::listen(fd.get(), 128) != 0) return Fail(Error::Io("listen " + spec + ": " + std::strerror(errno)));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  tcp_port_ = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                               : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  tcp_host_ = host;
  if (!loopback && host != "0.0.0.0" && host != "::") options_.allowed_hosts.push_back(host);
  return fd.release();
}

std::string UiServer::CookieName() const { return "torchxd_token_" + std::to_string(tcp_port_); }

std::optional<protocol::PeerInfo> UiServer::Caller(const HttpRequest& r) const {
  protocol::PeerInfo peer;
  if (r.peer.unix_socket) {
    if (!r.peer.uid) return std::nullopt;
    if (options_.only_uid && *r.peer.uid != *options_.only_uid && *r.peer.uid != 0) return std::nullopt;
    peer.uid = *r.peer.uid;
    peer.gid = r.peer.gid;
    peer.pid = r.peer.pid;
    return peer;
  }
  auto cookie = r.cookies.find(CookieName());
  std::string token = TokenOf(r.Header("authorization"), cookie == r.cookies.end() ? "" : cookie->second);
  if (token.empty()) return std::nullopt;
  auto uid = tokens_.UserOf(token);
  if (!uid) return std::nullopt;
  peer.uid = *uid;
  peer.gid = core::PrimaryGidOf(*uid, 0);
  return peer;
}

void UiServer::Handle(const std::shared_ptr<HttpExchange>& exchange) {
  const HttpRequest& r = exchange->request();
  if (!HostAllowed(r.Header("host"), options_.allowed_hosts)) {
    return ReplyText(exchange, 403,
                     "torchxd: Host `" + r.Header("host") +
                         "` is not this server's name (use 127.0.0.1 or localhost, or start torchxd with "
                         "--ui-allow-host NAME)");
  }
  if (!r.peer.unix_socket && r.query.count("token") != 0 && (r.method == "GET" || r.method == "HEAD")) {
    return SignInLink(exchange);
  }
  if (!r.peer.unix_socket && r.path == "/signin" && r.method == "POST") return SignInConfirmed(exchange);
  auto peer = Caller(r);
  if (!peer) {
    bool api = core::StartsWith(r.path, "/api/") || r.path == "/metrics";
    std::string why = r.peer.unix_socket ? "this torchxd serves another user"
                                         : "no valid token: open the address `torchx ui` prints (it carries your token)";
    if (api) return ReplyError(exchange, Error::PermissionDenied(why));
    return exchange->Reply(401, Secured({{"Content-Type", "text/html; charset=utf-8"}, {"Cache-Control", "no-store"}}),
                           "<!doctype html><title>torchxd</title><h1>torchxd</h1><p>" +
                               std::string(r.peer.unix_socket ? "This torchxd serves another user."
                                                              : "Open the address <code>torchx ui</code> prints: "
                                                                "it carries your token.") +
                               "</p>\n");
  }
  if (r.method != "GET" && r.method != "HEAD") {
    if (auto refusal = CsrfRefusal(r.method, r.Header("host"), r.Header("origin"), r.Header("sec-fetch-site"),
                                   r.Header("x-torchxd-csrf"), tokens_.CsrfOf(peer->uid))) {
      return ReplyError(exchange, Error::PermissionDenied(*refusal));
    }
  }
  Route(exchange, *peer);
}

void UiServer::SignInLink(const std::shared_ptr<HttpExchange>& exchange) {
  const HttpRequest& r = exchange->request();
  if (auto refusal = SignInRefusal(r.Header("sec-fetch-site"))) return ReplyText(exchange, 403, "torchxd: " + *refusal);
  const std::string& token = r.query.at("token");
  auto as = tokens_.UserOf(token);
  if (!as) return ReplyText(exchange, 401, "torchxd: that token is not valid");
  std::string location = LocalRedirect(r.path, r.query);
  auto now = Caller(r);
  if (!now || now->uid == *as) return SetCookieAndGo(exchange, token, location);  // `torchx ui`'s first visit
  // Signed in as someone else: the token leaves the address bar, the session stays until its user says so.
  std::string who = HtmlEscape(core::UserName(now->uid)), other = HtmlEscape(core::UserName(*as));
  exchange->Reply(
      200, Secured({{"Content-Type", "text/html; charset=utf-8"}, {"Cache-Control", "no-store"}}),
      "<!doctype html><title>torchxd: sign in as " + other + "?</title><h1>torchxd</h1>\n<p>This browser is signed in as <b>" +
          who + "</b>. The address you opened carries the token of <b>" + other + "</b>: signed in with it, this page "
          "shows and cancels " + other + "'s apps, and what you do here is done as " + other + ".</p>\n"
          "<form method=\"post\" action=\"/signin\">"
          "<input type=\"hidden\" name=\"token\" value=\"" + HtmlEscape(token) + "\">"
          "<input type=\"hidden\" name=\"csrf\" value=\"" + HtmlEscape(tokens_.CsrfOf(now->uid)) + "\">"
          "<input type=\"hidden\" name=\"next\" value=\"" + HtmlEscape(location) + "\">"
          "<button type=\"submit\">Sign in as " + other + "</button></form>\n"
          "<p><a href=\"" + HtmlEscape(location) + "\">Stay signed in as " + who + "</a></p>\n");
}

void UiServer::SignInConfirmed(const std::shared_ptr<HttpExchange>& exchange) {
  const HttpRequest& r = exchange->request();
  auto form = ParseForm(r.body);
  auto now = Caller(r);
  if (!now) return ReplyText(exchange, 403, "torchxd: nothing to switch from: open the address with the token again");
  // Only the question this server asked in this browser answers it: the session's own CSRF value, same origin.
  if (auto refusal = CsrfRefusal(r.method, r.Header("host"), r.Header("origin"), r.Header("sec-fetch-site"),
                                 form["csrf"], tokens_.CsrfOf(now->uid))) {
    return ReplyText(exchange, 403, "torchxd: " + *refusal);
  }
  if (!tokens_.UserOf(form["token"])) return ReplyText(exchange, 401, "torchxd: that token is not valid");
  SetCookieAndGo(exchange, form["token"], LocalNext(form["next"]));
}

void UiServer::SetCookieAndGo(const std::shared_ptr<HttpExchange>& exchange, const std::string& token,
                              const std::string& location) {
  // The token becomes a cookie and leaves the address bar (and the history).
  exchange->Reply(303,
                  Secured({{"Location", location},
                           {"Set-Cookie", CookieName() + "=" + token + "; HttpOnly; SameSite=Strict; Path=/"},
                           {"Cache-Control", "no-store"}}),
                  "");
}

void UiServer::Route(const std::shared_ptr<HttpExchange>& exchange, const protocol::PeerInfo& peer) {
  const HttpRequest& r = exchange->request();
  bool get = r.method == "GET" || r.method == "HEAD";
  std::string api_method = core::StartsWith(r.path, "/api/") ? r.path.substr(5) : "";
  bool change = std::find(kChangeMethods.begin(), kChangeMethods.end(), api_method) != kChangeMethods.end();
  if (change) {
    if (r.method != "POST") {
      return exchange->Reply(405, Secured({{"Allow", "POST"}, {"Content-Type", "text/plain"}}),
                             "torchxd: " + r.path + " changes something: POST only\n");
    }
    if (options_.read_only) return ReplyError(exchange, Error::PermissionDenied("this page is read-only"));
    if (r.body_too_large) return ReplyError(exchange, Error::InvalidArgument("request body over 1 MiB"));
    auto params = json::parse(r.body, nullptr, false);
    if (!params.is_object()) return ReplyError(exchange, Error::InvalidArgument("body: must be a JSON object"));
    return Api(exchange, peer, api_method, std::move(params));
  }
  if (!get) {
    return exchange->Reply(405, Secured({{"Allow", "GET, HEAD"}, {"Content-Type", "text/plain"}}),
                           "torchxd: " + r.path + " is read-only: GET\n");
  }
  if (IsPageRoute(r.path)) return Static(exchange, "index.html");
  if (core::StartsWith(r.path, "/static/")) return Static(exchange, r.path.substr(8));
  if (r.path == "/metrics") {
    return exchange->Reply(200,
                           Secured({{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"},
                                    {"Cache-Control", "no-store"}}),
                           options_.metrics ? options_.metrics() : "");
  }
  if (r.path == "/api/session") return Session(exchange, peer);
  if (r.path == "/api/events") {
    size_t& open = streams_[peer.uid];
    if (open >= kMaxStreamsPerUser) {
      return exchange->Reply(429, Secured({{"Content-Type", "application/json"}, {"Retry-After", "5"}}),
                             ErrorJson(Error::Unavailable(
                                 "uid " + std::to_string(peer.uid) + " already has " +
                                 std::to_string(kMaxStreamsPerUser) +
                                 " open event streams (pages), the most one user may hold; close a tab")));
    }
    ++open;
    uid_t uid = peer.uid;
    auto on_end = [this, uid] {
      auto it = streams_.find(uid);
      if (it != streams_.end() && --it->second == 0) streams_.erase(it);
    };
    return std::make_shared<EventStream>(loop_, handler_, peer, exchange, &changes_, on_end)->Start();
  }
  if (r.path == "/api/log.txt") return Download(exchange, peer);
  // An app's timeline, once (/api/events is the page's event stream).
  if (api_method == "timeline") api_method = "events";
  if (std::find(kReadMethods.begin(), kReadMethods.end(), api_method) != kReadMethods.end()) {
    json params = json::object();
    for (const auto& [key, value] : r.query) {
      if (key != "params") params[key] = value;
    }
    if (auto it = r.query.find("params"); it != r.query.end()) {
      auto extra = json::parse(it->second, nullptr, false);
      if (!extra.is_object()) return ReplyError(exchange, Error::InvalidArgument("params: must be a JSON object"));
      params.update(extra);
    }
    // A GET answers at once: a follow is the CLI's (the page has its event stream).
    if (api_method == "events") params["follow"] = false;
    // A GET never changes anything: draining a GPU is the CLI's.
    if (api_method == "gpus" && (params.contains("drain") || params.contains("undrain"))) {
      return ReplyError(exchange, Error::PermissionDenied("the page does not drain GPUs: torchx gpus --drain N"));
    }
    return Api(exchange, peer, api_method, std::move(params));
  }
  ReplyText(exchange, 404, "torchxd: no page at " + r.path);
}

void UiServer::Api(const std::shared_ptr<HttpExchange>& exchange, const protocol::PeerInfo& peer,
                   const std::string& method, json params) {
  std::weak_ptr<HttpExchange> weak = exchange;
  auto responder = std::make_shared<CallbackResponder>(
      exchange, CallbackResponder::Callbacks{
                    nullptr,
                    [weak](const std::string& result) {
                      if (auto e = weak.lock()) ReplyJson(e, 200, result);
                    },
                    [weak](const Error& error) {
                      if (auto e = weak.lock()) ReplyError(e, error);
                    }});
  handler_->Handle(protocol::Request{next_id_++, method, std::move(params)}, peer, responder);
}

std::string UiServer::BaseUrl() const {
  if (tcp_port_ == 0) return "";
  std::string host = tcp_host_ == "0.0.0.0" || tcp_host_ == "::" ? "127.0.0.1" : tcp_host_;
  return "http://" + host + ":" + std::to_string(tcp_port_);
}

void UiServer::Session(const std::shared_ptr<HttpExchange>& exchange, const protocol::PeerInfo& peer) {
  auto secrets = tokens_.For(peer.uid);  // makes the CSRF value on a user's first visit
  if (!secrets) return ReplyError(exchange, secrets.error());
  std::string user = core::UserName(peer.uid);
  bool admin = options_.may_act_on_all && options_.may_act_on_all(peer);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  ReplyJson(exchange, 200,
            json{{"uid", peer.uid}, {"user", user}, {"csrf", secrets->csrf}, {"read_only", options_.read_only},
                 {"admin", admin}, {"version", options_.version}, {"host", host}}
                .dump(-1, ' ', false, json::error_handler_t::replace));
}

void UiServer::Static(const std::shared_ptr<HttpExchange>& exchange, const std::string& name) {
  for (const Asset& asset : Assets()) {
    if (asset.name != name) continue;
    HttpHeaders headers = Secured({{"Content-Type", std::string(asset.content_type)},
                                   {"ETag", std::string(asset.etag)},
                                   {"Cache-Control", "no-cache"}});
    if (exchange->request().Header("if-none-match") == asset.etag) return exchange->Reply(304, headers, "");
    return exchange->Reply(200, headers, std::string(asset.body));
  }
  ReplyText(exchange, 404, "torchxd: no file " + name);
}

void UiServer::Download(const std::shared_ptr<HttpExchange>& exchange, const protocol::PeerInfo& peer) {
  const HttpRequest& r = exchange->request();
  auto query = [&r](const char* key, const char* fallback) {
    auto it = r.query.find(key);
    return it == r.query.end() || it->second.empty() ? std::string(fallback) : it->second;
  };
  json params = {{"app_handle", query("app", "")}, {"stream", query("stream", "combined")}};
  std::string role = query("role", "");
  if (!role.empty()) params["role"] = role;
  std::string replica = query("replica", "");
  if (!replica.empty()) {
    auto id = QueryInt(replica, 0, 1 << 20);
    if (!id) return ReplyError(exchange, Error::InvalidArgument("replica: not an id"));
    params["replicas"] = json::array({*id});
  }
  if (!query("regex", "").empty()) params["regex"] = query("regex", "");
  std::string file = SafeFileName(params["app_handle"].get<std::string>().substr(
                         params["app_handle"].get<std::string>().rfind('/') + 1)) +
                     (role.empty() ? "" : "-" + SafeFileName(role)) + (replica.empty() ? "" : "-" + replica) + "-" +
                     SafeFileName(params["stream"].get<std::string>()) + ".log";
  auto started = std::make_shared<bool>(false);
  std::weak_ptr<HttpExchange> weak = exchange;
  auto start = [weak, started, file] {
    auto e = weak.lock();
    if (!e || *started) return;
    *started = true;
    e->StartStream(200, Secured({{"Content-Type", "text/plain; charset=utf-8"},
                                 {"Content-Disposition", "attachment; filename=\"" + file + "\""},
                                 {"Cache-Control", "no-store"}}));
  };
  auto responder = std::make_shared<CallbackResponder>(
      exchange,
      CallbackResponder::Callbacks{
          // The same text `torchx log` prints on stdout: "role/replica line" per line.
          [weak, start](const json& event) {
            auto e = weak.lock();
            if (!e || !event.contains("lines")) return;
            start();
            std::string prefix = core::ReplicaKeyOf(event).String();
            std::string out;
            for (const auto& entry : event["lines"]) {
              out += prefix + " " + entry[1].get<std::string>() + "\n";
            }
            e->Write(out);
          },
          [weak, start](const std::string&) {
            start();
            if (auto e = weak.lock()) e->End();
          },
          [weak, started](const Error& error) {
            auto e = weak.lock();
            if (!e) return;
            if (*started) return e->End();  // what was sent stays; the error ends it short
            ReplyError(e, error);
          }});
  handler_->Handle(protocol::Request{next_id_++, "log", std::move(params)}, peer, responder);
}

Result<json> UiServer::InfoFor(const protocol::PeerInfo& peer) {
  json info = {{"socket", options_.unix_path}, {"read_only", options_.read_only}};
  if (tcp_) {
    auto secrets = tokens_.For(peer.uid);
    if (!secrets) return Fail(secrets.error());
    std::string host = tcp_host_ == "0.0.0.0" || tcp_host_ == "::" ? "127.0.0.1" : tcp_host_;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    info["url"] = "http://" + host + ":" + std::to_string(tcp_port_) + "/?token=" + secrets->token;
    info["token"] = secrets->token;
  }
  if (unix_) {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    info["ssh"] = "ssh -N -L 127.0.0.1:8080:" + options_.unix_path + " " + std::string(name);
    info["ssh_url"] = "http://127.0.0.1:8080/";
  }
  return info;
}

}  // namespace torchxd::webui
