#include "webui/auth.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/text.h"
#include "core/unique_fd.h"

namespace torchxd::webui {
namespace {

// "host:port" or "[v6]:port" -> host (lowercase, without brackets).
std::string HostName(const std::string& host) {
  std::string h = core::ToLower(host);
  if (!h.empty() && h[0] == '[') {
    size_t close = h.find(']');
    if (close == std::string::npos) return "";
    std::string rest = h.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return "";
    return h.substr(1, close - 1);
  }
  size_t colon = h.find(':');
  return colon == std::string::npos ? h : h.substr(0, colon);
}

bool ValidPort(const std::string& host) {
  size_t colon = host.rfind(':');
  size_t bracket = host.rfind(']');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) return true;
  std::string port = host.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

Result<std::string> RandomHex32() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Fail(Error::Io(std::string("getrandom: ") + std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Result<void> UiTokens::Load() {
  if (path_.empty()) return {};
  std::ifstream in(path_);
  if (!in) return {};  // none yet
  std::stringstream text;
  text << in.rdbuf();
  auto doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (!doc.is_object() || !doc.contains("users") || !doc["users"].is_object()) {
    return Fail(Error::InvalidArgument(path_ + ": not a torchxd web token file; remove it to make new tokens"));
  }
  for (const auto& [uid, secrets] : doc["users"].items()) {
    if (!secrets.is_object() || !secrets.contains("token") || !secrets["token"].is_string() ||
        !secrets.contains("csrf") || !secrets["csrf"].is_string()) {
      continue;
    }
    char* end = nullptr;
    unsigned long n = std::strtoul(uid.c_str(), &end, 10);
    if (end == uid.c_str() || *end != '\0') continue;
    users_[static_cast<uid_t>(n)] = {secrets["token"].get<std::string>(), secrets["csrf"].get<std::string>()};
  }
  return {};
}

Result<void> UiTokens::Save() const {
  if (path_.empty()) return {};
  nlohmann::json users = nlohmann::json::object();
  for (const auto& [uid, s] : users_) users[std::to_string(uid)] = {{"token", s.token}, {"csrf", s.csrf}};
  std::string text = nlohmann::json{{"version", 1}, {"users", users}}.dump(2) + "\n";
  std::string tmp = path_ + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) return Fail(Error::Io("open " + tmp + ": " + std::strerror(errno)));
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) || ::fsync(fd.get()) != 0) {
    return Fail(Error::Io("write " + tmp + ": " + std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    return Fail(Error::Io("rename " + tmp + ": " + std::strerror(errno)));
  }
  return {};
}

Result<UserSecrets> UiTokens::For(uid_t uid) {
  if (auto it = users_.find(uid); it != users_.end()) return it->second;
  auto token = RandomHex32();
  if (!token) return Fail(token.error());
  auto csrf = RandomHex32();
  if (!csrf) return Fail(csrf.error());
  users_[uid] = {*token, *csrf};
  if (auto saved = Save(); !saved) {
    users_.erase(uid);
    return Fail(saved.error());
  }
  return users_[uid];
}

std::optional<uid_t> UiTokens::UserOf(const std::string& token) const {
  std::optional<uid_t> found;
  for (const auto& [uid, s] : users_) {
    if (ConstantTimeEquals(s.token, token)) found = uid;  // no early exit: every user costs the same
  }
  return found;
}

std::string UiTokens::CsrfOf(uid_t uid) const {
  auto it = users_.find(uid);
  return it == users_.end() ? std::string() : it->second.csrf;
}

bool HostAllowed(const std::string& host, const std::vector<std::string>& allowed) {
  if (host.empty() || !ValidPort(host)) return false;
  std::string name = HostName(host);
  if (name.empty()) return false;
  if (name == "localhost" || name == "127.0.0.1" || name == "::1") return true;
  for (const auto& a : allowed) {
    if (core::ToLower(a) == name) return true;
  }
  return false;
}

std::optional<std::string> CsrfRefusal(const std::string& method, const std::string& host, const std::string& origin,
                                       const std::string& fetch_site, const std::string& csrf_header,
                                       const std::string& csrf_expected) {
  if (method == "GET" || method == "HEAD") return std::nullopt;
  if (!fetch_site.empty() && fetch_site != "same-origin" && fetch_site != "none") {
    return "a " + fetch_site + " request may not change anything (Sec-Fetch-Site)";
  }
  if (!origin.empty()) {
    std::string o = core::ToLower(origin);
    size_t scheme = o.find("://");
    if (o == "null" || scheme == std::string::npos || o.substr(scheme + 3) != core::ToLower(host)) {
      return "Origin " + origin + " is not this page's";
    }
  }
  if (csrf_expected.empty() || !ConstantTimeEquals(csrf_header, csrf_expected)) {
    return "missing or wrong X-Torchxd-Csrf header (the page sends it; reload it)";
  }
  return std::nullopt;
}

std::string TokenOf(const std::string& authorization, const std::string& cookie) {
  for (const char* scheme : {"token ", "Token ", "Bearer ", "bearer "}) {
    if (authorization.rfind(scheme, 0) == 0) return authorization.substr(std::strlen(scheme));
  }
  return cookie;
}

std::string LocalRedirect(const std::string& path, const std::map<std::string, std::string>& query) {
  std::string location = "/";
  if (!path.empty() && path[0] == '/') {
    size_t first = path.find_first_not_of('/');
    if (first != std::string::npos) location += core::UrlEscape(path.substr(first), "/");
  }
  std::string sep = "?";
  for (const auto& [key, value] : query) {
    if (key == "token") continue;
    location += sep + core::UrlEscape(key) + "=" + core::UrlEscape(value);
    sep = "&";
  }
  return location;
}

std::string LocalNext(const std::string& next) {
  if (next.size() < 1 || next[0] != '/' || (next.size() > 1 && (next[1] == '/' || next[1] == '\\'))) return "/";
  for (unsigned char c : next) {
    // LocalRedirect escapes everything else: a raw byte outside these is not its.
    if (!(std::isalnum(c) != 0 || std::strchr("/-_.~%?&=", c) != nullptr)) return "/";
  }
  return next;
}

namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string FormDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}
}  // namespace

std::map<std::string, std::string> ParseForm(const std::string& body) {
  std::map<std::string, std::string> fields;
  std::string_view rest(body);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    fields[FormDecode(pair.substr(0, eq))] = eq == std::string_view::npos ? "" : FormDecode(pair.substr(eq + 1));
  }
  return fields;
}

std::string HtmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::optional<std::string> SignInRefusal(const std::string& fetch_site) {
  if (fetch_site == "cross-site" || fetch_site == "same-site") {
    return "a sign-in link opened from another site is refused: paste the address `torchx ui` prints";
  }
  return std::nullopt;
}

}  // namespace torchxd::webui
