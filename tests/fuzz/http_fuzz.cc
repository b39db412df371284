// Fuzz target: what a browser (or anyone who can reach a web listener) can
// send. The real UiServer (libmicrohttpd's parser, the Host/token/CSRF/method
// checks, routing, the event stream and download) runs on a private loop in
// front of a handler that answers like the daemon's, streams included.
// The first input byte picks the listener (Unix socket as its user, or TCP
// with tokens); "@TOKEN@" and "@CSRF@" in the input become the real values,
// so inputs reach what lies behind the checks.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/check.h"
#include "core/unique_fd.h"
#include "webui/ui_server.h"

namespace {

using namespace torchxd;
using nlohmann::json;

class FakeHandler : public protocol::RequestHandler {
 public:
  void Handle(const protocol::Request& request, const protocol::PeerInfo& /*peer*/,
              std::shared_ptr<protocol::Responder> responder) override {
    const std::string& m = request.method;
    if (m == "list") {
      return responder->Result({{"fields", {"app_handle", "app_id", "name", "scheduler", "state", "created_ms",
                                            "ended_ms", "queue", "user"}},
                                {"apps", json::array({json::array({"local_cwd://torchx/a-1", "a-1", "a", "local_cwd",
                                                                   "RUNNING", 1, nullptr, "default", "root"})})}});
    }
    if (m == "log") {
      if (!request.params.is_object() || !request.params.contains("app_handle")) {
        return responder->Error(Error::InvalidArgument("params.app_handle: missing"));
      }
      responder->Event({{"role", "r"}, {"replica", 0}, {"stream", "combined"}, {"cursor", "7"},
                        {"lines", json::array({json::array({1, "<img src=x onerror=alert(1)>\x1b[31mred"})})}});
      return responder->Result({{"replicas", json::array()}});
    }
    if (m == "status" || m == "cancel") {
      return responder->Error(Error::NotFound("AppDef `x` does not exist"));
    }
    if (m == "queue") return responder->Error(Error::Unavailable("no admission"));
    responder->Result({{"method", m}});
  }
};

struct Harness {
  uv_loop_t loop;
  FakeHandler handler;
  std::string dir;
  std::unique_ptr<webui::UiServer> ui;
  std::string token;
  std::string csrf;

  Harness() {
    uv_loop_init(&loop);
    char tmpl[] = "/tmp/torchxd-http-fuzz-XXXXXX";
    TORCHXD_CHECK(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    webui::UiOptions o;
    o.unix_path = dir + "/ui.sock";
    o.tcp_listen = "127.0.0.1:0";
    o.metrics = [] { return std::string("# HELP x y\n# TYPE x gauge\nx 1\n"); };
    o.may_act_on_all = [](const protocol::PeerInfo&) { return false; };
    ui = std::make_unique<webui::UiServer>(&loop, &handler, o);
    TORCHXD_CHECK(ui->Start().has_value());
    auto info = ui->InfoFor(protocol::PeerInfo{::getuid(), ::getgid(), 0});
    TORCHXD_CHECK(info.has_value());
    token = (*info)["token"].get<std::string>();
  }

  UniqueFd Connect(bool tcp) {
    UniqueFd fd;
    if (tcp) {
      fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(ui->tcp_port()));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    } else {
      fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::string path = dir + "/ui.sock";
      std::memcpy(addr.sun_path, path.c_str(), path.size());
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    }
    return fd;
  }

  void Feed(const uint8_t* data, size_t size) {
    if (size == 0) return;
    bool tcp = (data[0] & 1) != 0;
    std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
    for (auto [mark, value] : {std::pair<std::string, std::string>{"@TOKEN@", token}, {"@CSRF@", csrf}}) {
      for (size_t at; (at = input.find(mark)) != std::string::npos;) input.replace(at, mark.size(), value);
    }
    UniqueFd fd = Connect(tcp);
    size_t sent = 0;
    bool closed = false;
    char buf[65536];
    // Bounded: an event stream never ends by itself; the connection is dropped after the turns.
    for (int turn = 0; turn < 200 && !closed; ++turn) {
      if (sent < input.size()) {
        ssize_t n = ::send(fd.get(), input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
        if (n > 0) sent += static_cast<size_t>(n);
        if (sent == input.size()) ::shutdown(fd.get(), SHUT_WR);
      }
      uv_run(&loop, UV_RUN_NOWAIT);
      for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof(buf));
        if (n > 0) {
          std::string_view got(buf, static_cast<size_t>(n));
          if (size_t at = got.find("\"csrf\":\""); at != std::string_view::npos && got.size() > at + 8 + 64) {
            csrf = std::string(got.substr(at + 8, 64));
          }
          continue;
        }
        if (n == 0) closed = true;
        break;
      }
    }
    fd.reset();
    // A dropped stream is noticed when the server next writes to it: let it.
    for (int turn = 0; turn < 5; ++turn) uv_run(&loop, UV_RUN_NOWAIT);
  }

  // Streams whose clients left stay until a write fails: start afresh now and then.
  bool Stale() const { return ui->exchanges() > 64; }

  ~Harness() {
    ui.reset();
    uv_run(&loop, UV_RUN_DEFAULT);
    TORCHXD_CHECK(uv_loop_close(&loop) == 0);
    ::unlink((dir + "/ui.sock").c_str());
    ::rmdir(dir.c_str());
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* harness = new Harness();
  harness->Feed(data, size);
  if (harness->Stale()) {
    delete harness;
    harness = new Harness();
  }
  return 0;
}
