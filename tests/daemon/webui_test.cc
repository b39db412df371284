// The web page's HTTP contract against the real torchxd: listeners, tokens and
// cookies, Host/CSRF/method checks, the event stream's resume ids, the log
// download, /metrics (docs/web-ui.md, docs/metrics.md). The browser itself is
// driven by tests/browser.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <gmock/gmock.h>

#include "tests/daemon/daemon_fixture.h"
#include "tests/daemon/http_get.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A Prometheus sample line: NAME, optional {k="v",...} (values with \\ \" \n escapes), a space, a value.
bool SampleLine(const std::string& line, std::string& name) {
  auto name_char = [](char c, bool first) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  size_t i = 0;
  while (i < line.size() && name_char(line[i], i == 0)) ++i;
  if (i == 0) return false;
  name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      size_t key = i;
      while (i < line.size() && name_char(line[i], i == key)) ++i;
      if (i == key || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') return false;
      for (i += 2; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\') ++i;
      }
      if (i >= line.size()) return false;
      ++i;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return false;
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') return false;
  std::string value = line.substr(i + 1);
  if (value.empty() || value.find(' ') != std::string::npos) return false;
  if (value == "+Inf" || value == "-Inf" || value == "NaN") return true;
  char* end = nullptr;
  std::strtod(value.c_str(), &end);
  return *end == '\0';
}

class WebUiTest : public DaemonFixture {
 protected:
  // Starts the daemon with a TCP listener and reads this user's token and port.
  void StartWithTcp(std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--ui-listen", "127.0.0.1:0"});
    StartDaemon(extra);
    json ui = CallOk("ui", json::object());
    token_ = ui["token"].get<std::string>();
    std::string url = ui["url"].get<std::string>();
    const std::string prefix = "http://127.0.0.1:";
    ASSERT_EQ(url.rfind(prefix, 0), 0u) << url;
    size_t slash = url.find('/', prefix.size());
    ASSERT_NE(slash, std::string::npos) << url;
    EXPECT_EQ(url.substr(slash), "/?token=" + token_);
    EXPECT_EQ(token_.size(), 64u);
    EXPECT_EQ(token_.find_first_not_of("0123456789abcdef"), std::string::npos);
    tcp_.port = std::stoi(url.substr(prefix.size(), slash - prefix.size()));
    unix_.unix_path = ui["socket"].get<std::string>();
  }
  HttpAnswer Get(const std::string& path, std::vector<std::string> headers = {}, const std::string& stop_at = "") {
    headers.push_back("Authorization: token " + token_);
    return HttpGet(tcp_, path, headers, Host(), stop_at);
  }
  std::string Host() const { return "127.0.0.1:" + std::to_string(tcp_.port); }
  HttpAnswer Post(const std::string& path, const std::string& body, const std::vector<std::string>& headers,
                  const std::string& method = "POST") {
    std::string head = method + " " + path + " HTTP/1.1\r\nHost: " + Host() + "\r\nAuthorization: token " + token_ +
                       "\r\nContent-Type: application/json";
    for (const auto& h : headers) head += "\r\n" + h;
    return HttpExchangeRaw(tcp_, head, body);
  }
  std::string Csrf() { return json::parse(Get("/api/session").body)["csrf"].get<std::string>(); }

  std::string token_;
  HttpTarget tcp_;
  HttpTarget unix_;
};

TEST_F(WebUiTest, TheUnixSocketServesItsOwnUserThePageWithItsSecurityHeaders) {
  StartDaemon();
  HttpTarget ui{(fs::path(socket_).parent_path() / "ui.sock").string()};
  struct stat st {};
  ASSERT_EQ(::stat(ui.unix_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto page = HttpGet(ui, "/", {}, "localhost");
  ASSERT_EQ(page.status, 200);
  EXPECT_THAT(page.Header("content-type"), HasSubstr("text/html"));
  EXPECT_THAT(page.Header("content-security-policy"), HasSubstr("script-src 'self'"));
  EXPECT_EQ(page.Header("x-content-type-options"), "nosniff");
  EXPECT_THAT(page.body, HasSubstr("<script src=\"/static/app.js\" defer></script>"));
  EXPECT_THAT(page.body, Not(HasSubstr("<script>")));  // no inline script: the CSP forbids it

  auto js = HttpGet(ui, "/static/app.js", {}, "localhost");
  ASSERT_EQ(js.status, 200);
  EXPECT_THAT(js.Header("content-type"), HasSubstr("text/javascript"));
  ASSERT_FALSE(js.Header("etag").empty());
  EXPECT_EQ(HttpGet(ui, "/static/app.js", {"If-None-Match: " + js.Header("etag")}, "localhost").status, 304);
  EXPECT_EQ(HttpGet(ui, "/static/app.js", {"If-None-Match: \"other\""}, "localhost").status, 200);
  EXPECT_EQ(HttpGet(ui, "/static/none.js", {}, "localhost").status, 404);
  // Deep links are the page too; the page reads its route from the address.
  EXPECT_EQ(HttpGet(ui, "/apps/local_cwd%3A%2F%2Ftorchx%2Fx?role=r", {}, "localhost").status, 200);
  // DNS rebinding: a page on evil.example resolving to us still sends its own Host.
  auto rebound = HttpGet(ui, "/api/session", {}, "evil.example");
  EXPECT_EQ(rebound.status, 403);
  EXPECT_THAT(rebound.body, HasSubstr("evil.example"));
  EXPECT_EQ(HttpGet(ui, "/api/session", {}, "localhost:8080").status, 200);  // through ssh -L
  EXPECT_EQ(HttpGet(ui, "/api/session", {}, "[::1]:8080").status, 200);
}

TEST_F(WebUiTest, TcpLetsInOnlyATokenWhichBecomesAStrictCookieOnce) {
  StartWithTcp();
  EXPECT_EQ(HttpGet(tcp_, "/", {}, Host()).status, 401);
  auto api = HttpGet(tcp_, "/api/list", {}, Host());
  EXPECT_EQ(api.status, 403);
  EXPECT_THAT(api.body, HasSubstr("torchx ui"));
  EXPECT_EQ(HttpGet(tcp_, "/?token=" + std::string(64, 'a'), {}, Host()).status, 401);
  EXPECT_EQ(HttpGet(tcp_, "/api/list", {"Authorization: token " + std::string(64, 'a')}, Host()).status, 403);
  EXPECT_EQ(HttpGet(tcp_, "/metrics", {}, Host()).status, 403);

  auto login = HttpGet(tcp_, "/apps/x?role=r&token=" + token_, {}, Host());
  ASSERT_EQ(login.status, 303);
  EXPECT_EQ(login.Header("location"), "/apps/x?role=r");  // the token leaves the address bar
  std::string cookie = login.Header("set-cookie");
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("SameSite=Strict"));
  std::string pair = cookie.substr(0, cookie.find(';'));
  EXPECT_EQ(pair, "torchxd_token_" + std::to_string(tcp_.port) + "=" + token_);
  auto session = HttpGet(tcp_, "/api/session", {"Cookie: " + pair}, Host());
  ASSERT_EQ(session.status, 200);
  EXPECT_EQ(json::parse(session.body)["uid"], ::getuid());
  EXPECT_EQ(HttpGet(tcp_, "/api/session", {"Authorization: Bearer " + token_}, Host()).status, 200);
  EXPECT_EQ(HttpGet(tcp_, "/api/session", {"Authorization: token " + token_}, "evil.example:1").status, 403);

  // The sign-in sends the browser to a path of this server, never to another site.
  for (const char* path : {"//evil.example/phish", "///evil.example/x", "/\\evil.example/x"}) {
    auto away = HttpGet(tcp_, std::string(path) + "?token=" + token_, {}, Host());
    ASSERT_EQ(away.status, 303) << path;
    std::string location = away.Header("location");
    EXPECT_EQ(location.rfind("/", 0), 0u) << location;
    EXPECT_NE(location.rfind("//", 0), 0u) << path << " -> " << location;
    EXPECT_EQ(location.find('\\'), std::string::npos) << location;
  }
  EXPECT_EQ(HttpGet(tcp_, "//evil.example/phish?token=" + token_, {}, Host()).Header("location"), "/evil.example/phish");
  // A sign-in link another site opened would sign the visitor in as someone else (login CSRF).
  auto foreign = HttpGet(tcp_, "/?token=" + token_, {"Sec-Fetch-Site: cross-site"}, Host());
  EXPECT_EQ(foreign.status, 403);
  EXPECT_EQ(foreign.Header("set-cookie"), "");
  EXPECT_EQ(HttpGet(tcp_, "/?token=" + token_, {"Sec-Fetch-Site: none"}, Host()).status, 303);

  // The token outlives the daemon: open pages and cookies keep working after a restart.
  StopDaemon();
  StartWithTcp();
  EXPECT_EQ(token_, pair.substr(pair.find('=') + 1));
}

// Alice, signed in, opened a link that carried bob's token: it set bob's
// cookie, and her page went on as bob (login CSRF). A link signs in at once
// only a visitor with no session; one signed in as someone else is asked,
// and only that question's button, from this page, switches the session.
TEST_F(WebUiTest, ATokenLinkSignsInOnlyAVisitorWithoutASessionAndAsksOneSignedInAsSomeoneElse) {
  StartWithTcp();
  StopDaemon();
  // A second user's token, as the daemon made it for them (the file is the daemon's: root's alone).
  const std::string other_token(64, 'b'), other_csrf(64, 'c');
  uid_t other_uid = ::getuid() == 65534 ? 65533 : 65534;
  fs::path tokens = fs::path(state_dir_) / "ui-tokens.json";
  json file = json::parse(std::ifstream(tokens));
  file["users"][std::to_string(other_uid)] = {{"token", other_token}, {"csrf", other_csrf}};
  std::ofstream(tokens) << file.dump();
  StartWithTcp();
  std::string cookie = "Cookie: torchxd_token_" + std::to_string(tcp_.port) + "=" + token_;
  auto whose = [&](const std::string& header) {
    auto session = HttpGet(tcp_, "/api/session", {header}, Host());
    return session.status == 200 ? json::parse(session.body)["uid"].get<int64_t>() : -1;
  };
  ASSERT_EQ(whose(cookie), static_cast<int64_t>(::getuid()));

  // Signed in: the other user's link asks, and changes nothing.
  auto asked = HttpGet(tcp_, "//evil.example/phish?token=" + other_token, {cookie}, Host());
  EXPECT_EQ(asked.status, 200);
  EXPECT_EQ(asked.Header("set-cookie"), "") << "the visitor's session was replaced without asking";
  const passwd* pw = ::getpwuid(other_uid);
  EXPECT_THAT(asked.body, HasSubstr("Sign in as " + (pw ? std::string(pw->pw_name) : std::to_string(other_uid))));
  EXPECT_THAT(asked.body, HasSubstr("<form method=\"post\" action=\"/signin\">"));
  EXPECT_THAT(asked.body, HasSubstr("name=\"next\" value=\"/evil.example/phish\""));
  EXPECT_EQ(whose(cookie), static_cast<int64_t>(::getuid()));
  // Its own link signs a signed-in visitor in again, as before.
  EXPECT_EQ(HttpGet(tcp_, "/?token=" + token_, {cookie}, Host()).status, 303);

  // The button: only with this session's CSRF value, from this page.
  std::string csrf = Csrf();
  std::string form = "token=" + other_token + "&csrf=" + csrf + "&next=%2Fapps%2Fx%3Frole%3Dr";
  auto post = [&](const std::string& body, const std::vector<std::string>& extra) {
    std::string head = "POST /signin HTTP/1.1\r\nHost: " + Host() + "\r\n" + cookie +
                       "\r\nContent-Type: application/x-www-form-urlencoded";
    for (const auto& h : extra) head += "\r\n" + h;
    return HttpExchangeRaw(tcp_, head, body);
  };
  std::string origin = "Origin: http://" + Host();
  auto forged = post("token=" + other_token + "&csrf=" + std::string(64, '0') + "&next=%2F", {origin});
  EXPECT_EQ(forged.status, 403);
  EXPECT_EQ(forged.Header("set-cookie"), "");
  auto cross = post(form, {"Origin: http://evil.example", "Sec-Fetch-Site: cross-site"});
  EXPECT_EQ(cross.status, 403);
  EXPECT_EQ(cross.Header("set-cookie"), "");
  auto away = post("token=" + other_token + "&csrf=" + csrf + "&next=%2F%2Fevil.example%2Fx", {origin});
  ASSERT_EQ(away.status, 303);
  EXPECT_EQ(away.Header("location"), "/") << "the form's next is never another site";
  auto yes = post(form, {origin, "Sec-Fetch-Site: same-origin"});
  ASSERT_EQ(yes.status, 303) << yes.body;
  EXPECT_EQ(yes.Header("location"), "/apps/x?role=r");
  std::string set = yes.Header("set-cookie");
  EXPECT_EQ(set.substr(0, set.find(';')), "torchxd_token_" + std::to_string(tcp_.port) + "=" + other_token);

  // No session: the link signs in at once (`torchx ui`'s first visit).
  auto fresh = HttpGet(tcp_, "/?token=" + other_token, {}, Host());
  EXPECT_EQ(fresh.status, 303);
  EXPECT_THAT(fresh.Header("set-cookie"), HasSubstr(other_token));
}

// Connections that never send a request, held as another local user: they
// count against that user (the kernel says whose a loopback socket is), and
// nobody else's page is locked out.
struct Held {
  pid_t pid = -1;
  int accepted = 0, refused = 0;
  std::string refusal;
};

Held HoldWebConnections(int port, uid_t uid, int count) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  Held held;
  held.pid = ::fork();
  if (held.pid == 0) {
    ::close(fds[0]);
    if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(1);
    std::vector<pollfd> conns;
    for (int i = 0; i < count; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) ::_exit(2);
      conns.push_back({fd, POLLIN, 0});
    }
    // A refusal is answered at once; an accepted connection waits for a request and says nothing.
    int refused = 0;
    std::string refusal;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
    while (std::chrono::steady_clock::now() < until) {
      if (::poll(conns.data(), conns.size(), 100) <= 0) continue;
      for (auto& p : conns) {
        if (p.fd < 0 || (p.revents & (POLLIN | POLLHUP)) == 0) continue;
        char buf[512];
        ssize_t n = ::recv(p.fd, buf, sizeof(buf), 0);
        if (n > 0 && refusal.empty()) refusal.assign(buf, static_cast<size_t>(n));
        ++refused;
        ::close(p.fd);
        p.fd = -1;
      }
    }
    std::string report = std::to_string(count - refused) + " " + std::to_string(refused) + "\n" + refusal;
    (void)!::write(fds[1], report.data(), report.size());
    ::close(fds[1]);
    for (;;) ::pause();
  }
  ::close(fds[1]);
  std::string report;
  char buf[1024];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) report.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  std::istringstream in(report);
  in >> held.accepted >> held.refused;
  std::getline(in, held.refusal);
  std::getline(in, held.refusal, '\0');
  return held;
}

void Release(Held& held) {
  if (held.pid <= 0) return;
  ::kill(held.pid, SIGKILL);
  ::waitpid(held.pid, nullptr, 0);
  held.pid = -1;
}

TEST_F(WebUiTest, OneUsersIdleConnectionsNeitherLockOutOthersNorRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "holding connections as other users needs root";
  StartWithTcp({"--max-connections", "40", "--max-connections-per-user", "20"});
  Held nobody = HoldWebConnections(tcp_.port, 65534, 25);
  EXPECT_EQ(nobody.accepted, 20);
  EXPECT_EQ(nobody.refused, 5);
  EXPECT_THAT(nobody.refusal, HasSubstr("503"));
  EXPECT_THAT(nobody.refusal, HasSubstr("uid 65534 already has 20 connections to the web page"));
  // Another user is still served; then the users' 32 slots are full, root's 8 are not.
  Held other = HoldWebConnections(tcp_.port, 65533, 15);
  EXPECT_EQ(other.accepted, 12);
  EXPECT_THAT(other.refusal, HasSubstr("8 more are kept for root and the admin group"));
  EXPECT_EQ(Get("/api/session").status, 200);  // the daemon's user (and root)
  Release(nobody);
  Release(other);
}

TEST_F(WebUiTest, ARequestHeadMustArriveWithinTenSeconds) {
  StartWithTcp();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(tcp_.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  auto started = std::chrono::steady_clock::now();
  // A slow head: a byte every 2 s keeps a connection busy but never completes it.
  std::string head = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() - started < std::chrono::seconds(20)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 2000) == 1) {
      char buf[256];
      closed = ::recv(fd, buf, sizeof(buf), 0) <= 0;
      continue;
    }
    (void)!::send(fd, "x", 1, MSG_NOSIGNAL);
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ::close(fd);
  EXPECT_TRUE(closed) << "still open after " << took << " s";
  EXPECT_GE(took, 9.0);
  EXPECT_EQ(Get("/api/session").status, 200);
}

// An open page stream: a TCP connection that asked for /api/events and read its first bytes.
int OpenStream(int port, const std::string& token, std::string* first) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  std::string head = "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                     "\r\nAuthorization: token " + token + "\r\n\r\n";
  (void)!::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  pollfd p{fd, POLLIN, 0};
  char buf[4096];
  if (::poll(&p, 1, 5000) == 1) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) first->assign(buf, static_cast<size_t>(n));
  }
  return fd;
}

// A page's streams are pushed what changed (nothing is polled), and one user
// holds at most 16 of them: more from one token cost the daemon nothing.
TEST_F(WebUiTest, OneUserHoldsABoundedNumberOfStreamsThatAreToldWhatChanged) {
  StartWithTcp();
  std::vector<int> open;
  for (int i = 0; i < 16; ++i) {
    std::string first;
    open.push_back(OpenStream(tcp_.port, token_, &first));
    EXPECT_THAT(first, HasSubstr("200")) << i;
  }
  std::string refused;
  int extra = OpenStream(tcp_.port, token_, &refused);
  EXPECT_THAT(refused, HasSubstr("429"));
  EXPECT_THAT(refused, HasSubstr("already has 16 open event streams"));
  ::close(extra);
  // A new app reaches an open stream as an `apps` event.
  std::string h = Run(App("seen", {FakeRole("r", {})}));
  std::string got;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.find(h) == std::string::npos && std::chrono::steady_clock::now() < until) {
    pollfd p{open[0], POLLIN, 0};
    if (::poll(&p, 1, 200) != 1) continue;
    char buf[65536];
    ssize_t n = ::recv(open[0], buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(got.find(h), std::string::npos) << got.substr(0, 2000);
  for (int fd : open) ::close(fd);
  // Closed streams give their places back.
  EXPECT_TRUE(WaitUntil([&] {
    std::string first;
    int fd = OpenStream(tcp_.port, token_, &first);
    ::close(fd);
    return first.find("200") != std::string::npos;
  }));
}

TEST_F(WebUiTest, AChangeNeedsPostTheCsrfHeaderAndTheSameOrigin) {
  StartWithTcp();
  std::string h = Run(App("sleepy", {FakeRole("r", {"--sleep", "60"})}));
  // PENDING until its replica runs: what the refused changes must leave as it was is RUNNING.
  ASSERT_TRUE(WaitUntil([&] { return Status(h)["state"] == "RUNNING"; }));
  std::string body = json{{"app_handle", h}}.dump();
  std::string csrf = "X-Torchxd-Csrf: " + Csrf();
  auto get = Get("/api/cancel?app_handle=" + h);
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.Header("allow"), "POST");
  EXPECT_EQ(Post("/api/cancel", body, {}).status, 403);  // what a cross-site form sends
  EXPECT_EQ(Post("/api/cancel", body, {"X-Torchxd-Csrf: " + std::string(64, '0')}).status, 403);
  EXPECT_EQ(Post("/api/cancel", body, {csrf, "Origin: http://evil.example"}).status, 403);
  EXPECT_EQ(Post("/api/cancel", body, {csrf, "Origin: null"}).status, 403);
  EXPECT_EQ(Post("/api/cancel", body, {csrf, "Sec-Fetch-Site: cross-site"}).status, 403);
  EXPECT_EQ(Post("/api/cancel", body, {csrf, "Sec-Fetch-Site: same-site"}).status, 403);
  for (const char* method : {"DELETE", "PUT", "PATCH"}) {
    int status = Post("/api/cancel", body, {csrf}, method).status;
    EXPECT_TRUE(status == 405 || status == 403) << method << " " << status;
  }
  EXPECT_EQ(Post("/api/list", "{}", {csrf}).status, 405);  // reads are GET only
  EXPECT_EQ(Status(h)["state"], "RUNNING");  // nothing above changed anything

  auto bad = Post("/api/cancel", "not json", {csrf});
  EXPECT_EQ(bad.status, 400);
  auto ok = Post("/api/cancel", body, {csrf, "Origin: http://" + Host(), "Sec-Fetch-Site: same-origin"});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body)["state"], "CANCELLED");
}

TEST_F(WebUiTest, ReadOnlyRefusesEveryChange) {
  StartWithTcp({"--ui-read-only"});
  std::string h = Run(App("sleepy", {FakeRole("r", {"--sleep", "60"})}));
  // PENDING until its replica runs: what the refused changes must leave as it was is RUNNING.
  ASSERT_TRUE(WaitUntil([&] { return Status(h)["state"] == "RUNNING"; }));
  auto session = json::parse(Get("/api/session").body);
  EXPECT_EQ(session["read_only"], true);
  auto refused = Post("/api/cancel", json{{"app_handle", h}}.dump(), {"X-Torchxd-Csrf: " + Csrf()});
  EXPECT_EQ(refused.status, 403);
  EXPECT_THAT(refused.body, HasSubstr("read-only"));
  EXPECT_EQ(Status(h)["state"], "RUNNING");
}

TEST_F(WebUiTest, TheStreamResumesATailFromAnyIdWithNoGapAndNoDuplicate) {
  StartWithTcp();
  std::string h = Run(App("count", {FakeRole("r", {"--lines", "3000"})}));
  Wait(h);
  auto lines_after = [&](const std::string& last_id, std::vector<std::string>* ids) {
    std::vector<std::string> header;
    if (!last_id.empty()) header.push_back("Last-Event-ID: " + last_id);
    auto sse = Get("/api/events?app=" + h + "&role=r&replica=0&stream=stdout&tail=100000", header, "event: log-end");
    // The stream stays open for list updates: read until the tail's end marker.
    EXPECT_EQ(sse.status, 200);
    EXPECT_THAT(sse.Header("content-type"), HasSubstr("text/event-stream"));
    std::vector<std::string> lines;
    std::string id;
    std::istringstream in(sse.body);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("id: ", 0) == 0) id = line.substr(4);
      if (line.rfind("data: ", 0) != 0) continue;
      json data = json::parse(line.substr(6));
      if (!data.contains("lines")) continue;
      for (const auto& l : data["lines"]) {
        lines.push_back(l[1].get<std::string>());
        if (ids != nullptr) ids->push_back(id);  // the id after which this line's event ends
      }
    }
    return lines;
  };
  std::vector<std::string> ids;
  auto all = lines_after("", &ids);
  ASSERT_EQ(all.size(), 3000u);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], "line " + std::to_string(i));
  // Resume after an event in the middle: the rest, exactly.
  size_t cut = all.size() / 2;
  while (cut + 1 < ids.size() && ids[cut + 1] == ids[cut]) ++cut;  // the last line of that event
  auto rest = lines_after(ids[cut], nullptr);
  ASSERT_EQ(rest.size(), all.size() - cut - 1) << ids[cut];
  EXPECT_EQ(rest.front(), all[cut + 1]);
  EXPECT_EQ(rest.back(), all.back());
  EXPECT_EQ(Get("/api/events?app=" + h + "&role=r", {"Last-Event-ID: [1]"}).status, 400);
}

TEST_F(WebUiTest, TheDownloadIsExactlyWhatTorchxLogPrints) {
  StartWithTcp();
  std::string h = Run(App("mixed", {FakeRole("r", {"--interleave", "300", "--stdout", "<b>end</b>"}, 2)}));
  Wait(h);
  for (std::string selector : {"", "/r/1"}) {
    std::string cli = std::string(TORCHX_BIN) + " --socket " + socket_ + " log " + h + selector + " > " +
                      (dir_ / "cli.txt").string();
    ASSERT_EQ(std::system(cli.c_str()), 0);
    std::string query = "/api/log.txt?app=" + h + (selector.empty() ? "" : "&role=r&replica=1");
    auto download = Get(query);
    ASSERT_EQ(download.status, 200);
    EXPECT_THAT(download.Header("content-disposition"), HasSubstr("attachment"));
    EXPECT_EQ(download.body, ReadFile(dir_ / "cli.txt")) << selector;
    EXPECT_GT(download.body.size(), 3000u);
  }
  EXPECT_EQ(Get("/api/log.txt?app=local_cwd://torchx/none").status, 404);
}

TEST_F(WebUiTest, MetricsCountAppsInPrometheusTextFormat) {
  StartWithTcp();
  Wait(Run(App("ok", {FakeRole("r", {"--exit", "0"}, 2)})));
  Wait(Run(App("bad", {FakeRole("r", {"--exit", "3"})})));
  auto metrics = Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.Header("content-type"), HasSubstr("text/plain; version=0.0.4"));
  const std::string& text = metrics.body;
  EXPECT_THAT(text, HasSubstr("torchxd_apps{queue=\"default\",scheduler=\"local_cwd\",state=\"SUCCEEDED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("torchxd_apps{queue=\"default\",scheduler=\"local_cwd\",state=\"FAILED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("torchxd_replicas{state=\"SUCCEEDED\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("torchxd_queue_wait_seconds_count 2\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE torchxd_api_requests_total counter\n"));
  // Every sample line is NAME{LABELS} VALUE, and every family has HELP and TYPE first.
  std::set<std::string> typed;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) typed.insert(line.substr(7, line.find(' ', 7) - 7));
    if (line.empty() || line[0] == '#') continue;
    std::string name;
    ASSERT_TRUE(SampleLine(line, name)) << line;
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (family.ends_with(suffix)) family.resize(family.size() - std::strlen(suffix));
    }
    EXPECT_TRUE(typed.count(name) || typed.count(family)) << line;
  }
  // The reference parser, where it is installed (scripts/test.sh installs it).
  if (std::system("/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-prometheus-client is not installed: checked with the line grammar only";
  }
  std::ofstream(dir_ / "metrics.txt") << text;
  std::string parse = "/usr/bin/python3 -c 'import sys; from prometheus_client.parser import "
                      "text_string_to_metric_families as p; fams = list(p(open(sys.argv[1]).read())); "
                      "names = {f.name for f in fams}; assert \"torchxd_apps\" in names, names; "
                      "assert all(f.type in (\"gauge\", \"counter\", \"histogram\") for f in fams)' " +
                      (dir_ / "metrics.txt").string();
  EXPECT_EQ(std::system(parse.c_str()), 0);
}

TEST_F(WebUiTest, AStreamWhoseClientLeftEndsAtOnce) {
  StartWithTcp();
  auto in_progress = [&] {
    std::string text = Get("/metrics").body;
    size_t at = text.find("\ntorchxd_web_requests ");
    EXPECT_NE(at, std::string::npos) << text;
    return at == std::string::npos ? -1 : std::stoi(text.substr(at + 22));
  };
  EXPECT_EQ(in_progress(), 1);  // the scrape itself
  {
    // A stream, read until its first event, then dropped as a closed tab drops it.
    auto sse = HttpGet(tcp_, "/api/events", {"Authorization: token " + token_}, Host(), "event: apps");
    ASSERT_EQ(sse.status, 200);
  }
  // The stream is suspended between its polls: its hang-up is noticed at once,
  // not at the next write (a comment every 15 s).
  EXPECT_TRUE(WaitUntil([&] { return in_progress() == 1; }, 3)) << in_progress();
}

TEST_F(WebUiTest, ANonLoopbackListenerNeedsItsOwnFlag) {
  std::string out = (dir_ / "refused.log").string();
  std::string cmd = std::string(TORCHXD_BIN) + " --socket " + (dir_ / "x.sock").string() + " --state-dir " +
                    (dir_ / "xstate").string() + " --ui-listen 0.0.0.0:0 > " + out + " 2>&1";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  EXPECT_THAT(ReadFile(out), HasSubstr("--ui-allow-remote"));
}

}  // namespace
}  // namespace torchxd::testing
