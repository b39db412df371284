// Fuzz target: what a client can send the daemon. The real Server (whole
// Connection: framing, pipelining, backpressure) and the real Service (every
// method, every validation) run on a private loop; a scheduler that keeps
// apps in memory stands in for the ones that start processes. The input is
// written to one connection in chunks its first byte chooses.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "core/app_handle.h"
#include "core/check.h"
#include "core/ids.h"
#include "core/unique_fd.h"
#include "daemon/server.h"
#include "daemon/service.h"
#include "seam/log_store.h"
#include "seam/scheduler.h"

namespace {

using namespace torchxd;
using namespace torchxd::daemon;

// Apps in memory, finished at once; nothing runs.
class MemoryScheduler : public seam::Scheduler, public seam::Scalable {
 public:
  std::vector<std::string> Names() const override { return {"local_cwd", "local_dir", "local_docker", "kubernetes"}; }
  void Submit(seam::SubmitRequest request, std::function<void(Result<const seam::AppRecord*>)> done) override {
    if (apps_.size() >= 64) return done(Fail(Error::Unavailable("full")));
    auto rec = std::make_unique<seam::AppRecord>();
    rec->scheduler = request.scheduler;
    rec->session = request.session;
    // Predictable ids ("NAME-0", "NAME-1", ...) so that inputs can name the apps they ran.
    rec->app_id = request.app.name + "-" + std::to_string(next_id_++);
    rec->app = std::move(request.app);
    rec->owner_uid = request.uid;
    // An elastic app stays RUNNING, so that `scale` reaches the scheduler.
    bool elastic = false;
    for (const auto& role : rec->app.roles) elastic = elastic || role.min_replicas.has_value();
    rec->state = elastic ? core::AppState::kRunning : core::AppState::kSucceeded;
    for (size_t r = 0; r < rec->app.roles.size(); ++r) {
      for (int i = 0; i < rec->app.roles[r].num_replicas && i < 4; ++i) {
        supervisor::ReplicaInfo info;
        info.role = rec->app.roles[r].name;
        info.role_index = static_cast<int>(r);
        info.replica_id = i;
        info.state = core::ReplicaState::kSucceeded;
        rec->replicas.push_back(info);
      }
    }
    seam::AppRecord* raw = rec.get();
    apps_[{raw->scheduler, raw->app_id}] = std::move(rec);
    done(raw);
  }
  seam::AppRecord* Find(const std::string& scheduler, const std::string& app_id) override {
    auto it = apps_.find({scheduler, app_id});
    return it == apps_.end() ? nullptr : it->second.get();
  }
  std::vector<const seam::AppRecord*> List() const override {
    std::vector<const seam::AppRecord*> out;
    for (const auto& [k, a] : apps_) out.push_back(a.get());
    return out;
  }
  void Cancel(seam::AppRecord&, std::optional<double>, std::function<void(Result<seam::CancelOutcome>)> done) override {
    done(seam::CancelOutcome{true});
  }
  void Scale(seam::AppRecord& app, const std::vector<core::ScaleRequest>& changes,
             std::function<void(Result<void>)> done) override {
    for (const auto& c : changes) app.scale[c.role] = c.replicas;
    done({});
  }
  void Delete(seam::AppRecord& app, std::function<void(Result<core::AppState>)> done) override {
    core::AppState last = app.state;
    apps_.erase({app.scheduler, app.app_id});
    done(last);
  }
  void Shutdown(bool, std::function<void()> done) override { done(); }
  void PersistAll() override {}
  size_t running_apps() const override { return 0; }
  size_t app_count() const override { return apps_.size(); }

 private:
  std::map<std::pair<std::string, std::string>, std::unique_ptr<seam::AppRecord>> apps_;
  uint64_t next_id_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  // At most 64 writes per input: frames split anywhere, at a speed worth fuzzing.
  size_t chunk = std::max<size_t>(input.size() / 64, 1 + static_cast<size_t>(data[0]) * 64);

  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    MemoryScheduler scheduler;
    seam::LogStore logs(0);
    Service::DaemonInfo info;
    info.socket = "fuzz";
    info.state_dir = "/nonexistent";
    info.max_replicas_per_app = 16;
    seam::FileWorker files(&loop);
    Service service(&loop, {&scheduler}, &logs, &files, info);
    ServerLimits limits;
    limits.max_frame_bytes = 1 << 16;  // small, so the fuzzer reaches the limit
    limits.idle_timeout_seconds = 0;
    Server server(&loop, &service, limits, std::nullopt);

    // A listening socket in the abstract namespace, handed to the server as systemd would.
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string name = "torchxd-protocol-fuzz-" + std::to_string(::getpid());
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    TORCHXD_CHECK(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0);
    TORCHXD_CHECK(::listen(listener.get(), 8) == 0);
    TORCHXD_CHECK(server.Adopt(listener.release()).has_value());

    UniqueFd client(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    TORCHXD_CHECK(::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0);
    size_t sent = 0;
    int quiet_turns = 0;
    char buf[65536];
    for (int turn = 0; turn < 200000 && quiet_turns < 8; ++turn) {
      if (sent < input.size()) {
        ssize_t n = ::send(client.get(), input.data() + sent, std::min(chunk, input.size() - sent), MSG_NOSIGNAL);
        if (n > 0) sent += static_cast<size_t>(n);
      }
      uv_run(&loop, UV_RUN_NOWAIT);
      bool got = false;
      for (ssize_t n; (n = ::recv(client.get(), buf, sizeof(buf), 0)) > 0;) got = true;
      if (::recv(client.get(), buf, 1, MSG_PEEK | MSG_DONTWAIT) == 0) break;  // the server hung up
      quiet_turns = sent < input.size() || got ? 0 : quiet_turns + 1;
    }
    server.DropAll();
    server.Close();
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  TORCHXD_CHECK(uv_loop_close(&loop) == 0);
  return 0;
}
