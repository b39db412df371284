// The web page's security checks (docs/web-ui.md "Security"), as pure
// functions, and UiTokens: the per-user tokens a TCP listener accepts.
//
// A token names its user: whoever holds it acts with that user's rights, so a
// token is only ever given out over the protocol socket (peer credentials) to
// its own user. Each user also has a CSRF value, which the page reads from
// /api/session (same origin only) and sends back in X-Torchxd-Csrf with every
// state change.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_WEBUI_AUTH_H_
#define TORCHXD_WEBUI_AUTH_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace torchxd::webui {

struct UserSecrets {
  std::string token;  // 64 hex digits
  std::string csrf;   // 64 hex digits
};

class UiTokens {
 public:
  // Kept in `path` (0600; "" = in memory only, for tests): tokens survive a
  // daemon restart, so open pages and cookies keep working.
  explicit UiTokens(std::string path) : path_(std::move(path)) {}
  [[nodiscard]] Result<void> Load();
  // The user's secrets, made (and stored) on first use.
  [[nodiscard]] Result<UserSecrets> For(uid_t uid);
  // Whose token is this? Compares in constant time against every user's.
  std::optional<uid_t> UserOf(const std::string& token) const;
  std::string CsrfOf(uid_t uid) const;

 private:
  [[nodiscard]] Result<void> Save() const;
  std::string path_;
  std::map<uid_t, UserSecrets> users_;
};

// 32 random bytes (getrandom) as 64 hex digits.
[[nodiscard]] Result<std::string> RandomHex32();
bool ConstantTimeEquals(const std::string& a, const std::string& b);

// Is `host` (a Host header) one this listener answers to? Loopback names
// (localhost, 127.0.0.1, [::1]) with or without a port, and `allowed` names.
// Anything else is refused: it is how DNS rebinding reaches a local server.
bool HostAllowed(const std::string& host, const std::vector<std::string>& allowed);

// A state-changing request must come from the page itself: the custom header
// carries the user's CSRF value (a cross-site form cannot set headers, and a
// cross-site fetch with one needs a CORS preflight nobody answers), and the
// browser's Origin and Sec-Fetch-Site, when sent, must say same-origin.
// Returns why a request is refused, or nothing.
std::optional<std::string> CsrfRefusal(const std::string& method, const std::string& host,
                                       const std::string& origin, const std::string& fetch_site,
                                       const std::string& csrf_header, const std::string& csrf_expected);

// Where `GET PATH?token=T&...` sends the browser once the token is a cookie:
// PATH on this server with the other query parameters, never another site.
// Leading slashes collapse to one ("//evil.example/x" is a network path to a
// browser) and anything but a path (an absolute-form URL) goes to "/".
std::string LocalRedirect(const std::string& path, const std::map<std::string, std::string>& query);

// Why a `?token=` sign-in is refused, or nothing: one that another site
// started (Sec-Fetch-Site cross-site or same-site) would sign the visitor in
// as the token's user (login CSRF). A pasted or typed address says `none`;
// such a link still signs in at once only a visitor with no session (the
// page asks one signed in as someone else first: UiServer).
std::optional<std::string> SignInRefusal(const std::string& fetch_site);

// Where the sign-in form's `next` field may send the browser: a path of this
// server as LocalRedirect makes it ("/x?y=z"), else "/" (a form field is
// whatever the poster wrote).
std::string LocalNext(const std::string& next);

// The fields of an application/x-www-form-urlencoded body (`+` is a space,
// %XX a byte; a repeated field keeps its last value).
std::map<std::string, std::string> ParseForm(const std::string& body);

// Text for an HTML element or attribute value: & < > " ' escaped.
std::string HtmlEscape(const std::string& text);

// The token a request carries: `Authorization: token T` or `Bearer T`, else the cookie.
std::string TokenOf(const std::string& authorization, const std::string& cookie);

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_AUTH_H_
