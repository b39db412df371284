// HardeningTest: the daemon under hostile requests (hardening_test.cc) and
// at its per-user bounds (user_bounds_test.cc): raw requests, whether it
// still answers, and its resident size.
#ifndef TORCHXD_TESTS_DAEMON_HARDENING_FIXTURE_H_
#define TORCHXD_TESTS_DAEMON_HARDENING_FIXTURE_H_

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {

class HardeningTest : public DaemonFixture {
 protected:

  // The daemon process still exists and answers within `seconds`.
  // A failure says why on stderr (a flake then says what it was).
  bool Answers(double seconds = 10) {
    int status;
    if (daemon_pid_ <= 0 || ::waitpid(daemon_pid_, &status, WNOHANG) == daemon_pid_) {
      std::fprintf(stderr, "Answers: the daemon has exited\n");
      return false;
    }
    auto start = std::chrono::steady_clock::now();
    auto client = DaemonClient::Connect(socket_);
    if (!client) {
      std::fprintf(stderr, "Answers: %s\n", client.error().message.c_str());
      return false;
    }
    timeval tv{static_cast<time_t>(seconds), 0};
    ::setsockopt(client->fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    auto version = client->Call("version", json::object());
    if (!version) {
      std::fprintf(stderr, "Answers: version after %.3f s: %s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                   version.error().message.c_str());
    }
    return version.has_value();
  }

  // A call that gives up after `seconds` (a hung daemon must fail the test, not stall it).
  Result<json> CallWithin(const std::string& method, const json& params, double seconds) {
    auto client = DaemonClient::Connect(socket_);
    if (!client) return Fail(client.error());
    timeval tv{static_cast<time_t>(seconds), 0};
    ::setsockopt(client->fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return client->Call(method, params);
  }

  json RunParams(const json& app, const json& extra = json::object()) {
    json p = {{"app", app}, {"cwd", dir_.string()}, {"env", {{"PATH", "/usr/bin:/bin"}}}};
    for (auto it = extra.begin(); it != extra.end(); ++it) p[it.key()] = it.value();
    return p;
  }

  static json ShRole(const std::string& name, const std::string& script, int replicas = 1) {
    return {{"name", name}, {"entrypoint", "/bin/sh"}, {"args", {"-c", script}}, {"num_replicas", replicas}};
  }

  size_t RssKb() { return StatusKb("VmRSS:"); }
  size_t PeakRssKb() { return StatusKb("VmHWM:"); }  // the most it was resident since it started
  size_t StatusKb(const std::string& field) {
    std::string status = ReadFile("/proc/" + std::to_string(daemon_pid_) + "/status");
    size_t at = status.find(field);
    return at == std::string::npos ? 0 : static_cast<size_t>(std::atol(status.c_str() + at + field.size()));
  }

  size_t AppCount() { return CallOk("list", json::object())["apps"].size(); }

  // A role whose one replica has a port named c10d declared at `declared` and
  // prints "localhost:PORT" with the port it was given (the macro remapped).
  static json PortRole(int declared) {
    json role = FakeRole("w", {"--stdout", "localhost:" + std::to_string(declared), "--sleep", "60"});
    role["port_map"] = {{"c10d", declared}};
    return role;
  }
  // The port app `h`'s PortRole replica printed; -1 when it printed none in time.
  int GivenPort(const std::string& h) {
    std::string given;
    bool printed = WaitUntil([&] {
      std::string out = ReadLog(h, "w", 0);
      if (out.empty() || out.back() != '\n') return false;
      given = out.substr(out.find(':') + 1, out.size() - out.find(':') - 2);
      return true;
    });
    return printed ? std::stoi(given) : -1;
  }
};

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_DAEMON_HARDENING_FIXTURE_H_
