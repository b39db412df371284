// A blocking HTTP/1.1 client for tests: one request per connection
// (Connection: close) to a TCP port on 127.0.0.1 or a Unix socket, the raw
// request written as given, the whole answer read and split into status,
// headers (names lowercased) and body. Chunked bodies are decoded.
#ifndef TORCHXD_TESTS_DAEMON_HTTP_GET_H_
#define TORCHXD_TESTS_DAEMON_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace torchxd::testing {

struct HttpAnswer {
  int status = 0;  // 0: no answer
  std::map<std::string, std::string> headers;
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

struct HttpTarget {
  std::string unix_path;  // else TCP
  int port = 0;
};

inline std::string DecodeChunked(const std::string& body) {
  std::string out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos) break;
    size_t n = std::stoul(body.substr(pos, eol - pos), nullptr, 16);
    if (n == 0) break;
    out += body.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

// `head` is everything before the blank line, without it: "GET / HTTP/1.1\r\nHost: x".
// Reads for at most `timeout_ms`, or until the answer holds `stop_at` (a stream
// that does not end is cut there).
inline HttpAnswer HttpExchangeRaw(const HttpTarget& target, const std::string& head, const std::string& body = "",
                                  int timeout_ms = 10000, const std::string& stop_at = "") {
  HttpAnswer answer;
  int fd = -1;
  if (!target.unix_path.empty()) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, target.unix_path.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      return answer;
    }
  } else {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(target.port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      return answer;
    }
  }
  std::string request = head + "\r\nConnection: close\r\n";
  if (!body.empty()) request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  request += "\r\n" + body;
  for (size_t sent = 0; sent < request.size();) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
    if (!stop_at.empty() && raw.find(stop_at) != std::string::npos) break;
  }
  ::close(fd);
  size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) return answer;
  answer.status = std::stoi(raw.substr(9, 3));
  size_t line = raw.find("\r\n") + 2;
  while (line < end) {
    size_t next = raw.find("\r\n", line);
    std::string h = raw.substr(line, next - line);
    size_t colon = h.find(':');
    if (colon != std::string::npos) {
      std::string name = h.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      answer.headers[name] = h.substr(h.find_first_not_of(' ', colon + 1));
    }
    line = next + 2;
  }
  answer.body = raw.substr(end + 4);
  if (answer.Header("transfer-encoding") == "chunked") answer.body = DecodeChunked(answer.body);
  return answer;
}

inline HttpAnswer HttpGet(const HttpTarget& target, const std::string& path, const std::vector<std::string>& headers = {},
                          const std::string& host = "127.0.0.1", const std::string& stop_at = "") {
  std::string head = "GET " + path + " HTTP/1.1\r\nHost: " + host;
  for (const auto& h : headers) head += "\r\n" + h;
  return HttpExchangeRaw(target, head, "", 10000, stop_at);
}

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_DAEMON_HTTP_GET_H_
