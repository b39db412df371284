// torchxd_bench: measures torchxd against its targets, each beside a baseline
// measured in the same run (bench/README.md). Usage: torchxd_bench BIN_DIR OUT.json
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spawn.h>

#include <set>

#include <array>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <functional>
#include <map>
#include <fstream>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/bench_daemon.h"
#include "bench/bench_util.h"
#include "core/client.h"
#include "core/environment.h"
#include "tests/docker/podman_service.h"
#include "tests/k8sbridge/fake_apiserver.h"

extern char** environ;

namespace torchxd::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Scenario 7 against tests/k8sbridge/fake_apiserver.py: one app of 2 replicas
// moved through Running -> Completed with 1,000 log lines, 10 status calls and
// a log follow; then the requests the daemon sent are counted.
std::vector<Row> BenchKubernetes(const std::string& bin, const fs::path& dir) {
  std::fprintf(stderr, "k8s: submit + 10 status + log follow against the fake API server\n");
  fs::create_directories(dir);
  testing::FakeApiServer api;
  if (!api.Start(dir, "", "")) return {{"k8s", "skipped", {}, "-", std::nullopt, "", false, "the fake API server did not start"}};
  std::string kubeconfig = api.WriteKubeconfig(dir / "kubeconfig", "default", "t");
  Daemon d(bin, dir / "d", {}, {"KUBECONFIG=" + kubeconfig});
  json app = {{"name", "bench"},
              {"roles", {{{"name", "trainer"}, {"image", "busybox"}, {"entrypoint", "true"}, {"num_replicas", 2}}}}};
  auto c = d.Client();
  auto start = Clock::now();
  auto r = c.Call("run", {{"app", app}, {"scheduler", "kubernetes"}, {"cfg", {{"queue", "default"}}},
                          {"cwd", dir.string()}, {"env", json::object()}});
  if (!r) throw std::runtime_error("k8s run: " + r.error().message);
  double submit = SecondsSince(start);
  std::string h = (*r)["app_handle"], job = h.substr(h.rfind(':') + 1);
  api.Post("/fake/jobs/default/" + job + "/phase", {{"phase", "Running"}});
  std::vector<std::string> lines;
  for (int i = 0; i < 1000; ++i) lines.push_back("line " + std::to_string(i));
  std::vector<std::string> env = {"TORCHXD_SOCKET=" + d.socket()};
  std::vector<double> status;
  for (int i = 0; i < 10; ++i) status.push_back(TimeCommand({bin + "/torchx", "status", h}, env));
  for (const char* pod : {"-trainer-0-0", "-trainer-1-0"}) {
    api.Post("/fake/pods/default/" + job + pod + "/log", {{"lines", lines}});
    api.Post("/fake/pods/default/" + job + pod + "/phase", {{"phase", "Succeeded"}});
  }
  api.Post("/fake/jobs/default/" + job + "/phase", {{"phase", "Completed"}});
  double follow = TimeCommand({bin + "/torchx", "log", "--tail", h}, env);
  size_t dry = 0, create = 0, get_job = 0, lists = 0, watches = 0, logs = 0, checks = 0;
  json fake_state = api.State();
  for (const auto& q : fake_state["requests"]) {
    std::string path = q["path"], method = q["method"];
    bool jobs = path.find("/jobs") != std::string::npos;
    if (method == "POST" && jobs) (q["query"].contains("dryRun") ? dry : create) += 1;
    if ((method == "POST" && path.ends_with("/pods")) || path.find("/queues/") != std::string::npos) ++checks;
    if (method == "GET" && path.find("/jobs/") != std::string::npos) ++get_job;
    if (method == "GET" && path.ends_with("/log")) ++logs;
    if (method == "GET" && (path.ends_with("/jobs") || path.ends_with("/pods"))) {
      (q["query"].contains("watch") ? watches : lists) += 1;
    }
  }
  // Baseline: the same 10 status calls for a local app.
  Daemon local(bin, dir / "local");
  json done = local.RunAndWait(App("l", "/bin/true", {}, 2));
  std::vector<std::string> local_env = {"TORCHXD_SOCKET=" + local.socket()};
  std::vector<double> base;
  for (int i = 0; i < 10; ++i) base.push_back(TimeCommand({bin + "/torchx", "status", done["app_handle"]}, local_env));
  std::vector<Row> rows;
  Row req{"k8s", "API requests (submit, 10 status, follow)",
          {double(dry + create + get_job + lists + watches + logs + checks), 0, 0}, "requests", std::nullopt,
          "1 dry-run + 1 create, 0 GET per status", dry == 1 && create == 1 && get_job == 0, ""};
  req.value.min = req.value.max = req.value.median;
  req.note = std::to_string(checks) + " submit check (queue, pod dry-run), " + std::to_string(dry) + " dry-run, " +
             std::to_string(create) + " create, " + std::to_string(get_job) +
             " job GET, " + std::to_string(lists) + " list, " + std::to_string(watches) + " watch, " +
             std::to_string(logs) + " pod log";
  rows.push_back(req);
  Row st{"k8s", "torchx status of a kubernetes app", Summarize(status), "s", Summarize(base), "<= 1.5x local status",
         false, "submit (dry-run + create) " + std::to_string(submit * 1000).substr(0, 5) + " ms; follow of 2,000 lines " +
                    std::to_string(follow * 1000).substr(0, 6) + " ms"};
  st.met = st.value.median <= 1.5 * st.baseline->median;
  rows.push_back(st);
  return rows;
}

// Scenario 7b: 100 started pods whose logs the apiserver cannot give for 60 s
// (the log-request storm users filed against TorchX), then `list -s kubernetes`
// of a namespace holding 1,000 torchx Jobs, answered from the watch cache.
std::vector<Row> BenchKubernetesScale(const std::string& bin, const fs::path& dir) {
  std::fprintf(stderr, "k8s scale: 100 unreadable pod logs for 60 s; list of 1,000 Jobs\n");
  fs::create_directories(dir);
  testing::FakeApiServer api;
  if (!api.Start(dir, "", "")) return {{"k8s", "skipped", {}, "-", std::nullopt, "", false, "no fake API server"}};
  std::string kubeconfig = api.WriteKubeconfig(dir / "kubeconfig", "default", "t");
  Daemon d(bin, dir / "d", {}, {"KUBECONFIG=" + kubeconfig});
  json app = {{"name", "storm"},
              {"roles", {{{"name", "w"}, {"image", "busybox"}, {"entrypoint", "true"}, {"num_replicas", 100}}}}};
  auto c = d.Client();
  auto r = c.Call("run", {{"app", app}, {"scheduler", "kubernetes"}, {"cfg", {{"queue", "default"}}},
                          {"cwd", dir.string()}, {"env", json::object()}});
  if (!r) throw std::runtime_error("k8s run: " + r.error().message);
  std::string h = (*r)["app_handle"], job = h.substr(h.rfind(':') + 1);
  api.Post("/fake/jobs/default/" + job + "/phase", {{"phase", "Running"}, {"pods", "Pending"}});
  std::vector<std::string> pods;
  for (int i = 0; i < 100; ++i) pods.push_back(job + "-w-" + std::to_string(i) + "-0");
  for (const auto& pod : pods) api.Post("/fake/pods/default/" + pod + "/log-fail", {{"code", 500}, {"message", "no kubelet"}});
  for (int i = 0; i < 100; ++i) {
    api.Post("/fake/pods/default/" + pods[static_cast<size_t>(i)] + "/status",
             {{"phase", "Running"},
              {"containerStatuses", {{{"name", "w-" + std::to_string(i)}, {"state", {{"running", json::object()}}}}}}});
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));
  std::map<std::string, int> per_pod;
  json state = api.State();
  for (const auto& q : state["requests"]) {
    std::string path = q["path"];
    if (path.ends_with("/log")) ++per_pod[path];
  }
  std::vector<double> counts;
  for (const auto& pod : pods) counts.push_back(per_pod["/api/v1/namespaces/default/pods/" + pod + "/log"]);
  std::vector<Row> rows;
  Row storm{"k8s", "log requests per unreadable pod in 60 s (100 pods)", Summarize(counts), "requests",
            std::nullopt, "<= 2 per pod", false, "was one a second per pod (60)"};
  storm.met = storm.value.max <= 2;
  rows.push_back(storm);

  // 1,000 torchx Jobs in namespace bulk, made by someone else.
  for (int i = 0; i < 1000; ++i) {
    json j = {{"apiVersion", "batch.volcano.sh/v1alpha1"},
              {"kind", "Job"},
              {"metadata", {{"name", "bulk-" + std::to_string(i)}, {"labels", {{"app.kubernetes.io/managed-by", "torchx.pytorch.org"}}}}},
              {"spec", {{"queue", "default"}, {"tasks", json::array()}}}};
    api.Post("/fake/jobs/bulk", j);
  }
  std::vector<std::string> env = {"TORCHXD_SOCKET=" + d.socket()};
  double first = TimeCommand({bin + "/torchx", "list", "-s", "kubernetes", "-cfg", "namespace=bulk"}, env);
  std::vector<double> list;
  for (int i = 0; i < 10; ++i) list.push_back(TimeCommand({bin + "/torchx", "list", "-s", "kubernetes", "-cfg", "namespace=bulk"}, env));
  Row l{"k8s", "torchx list -s kubernetes of 1,000 Jobs (watch cache)", Summarize(list), "s", std::nullopt,
        "<= 100 ms", false, "the first, which lists and watches the namespace: " + std::to_string(first * 1000).substr(0, 6) + " ms"};
  l.met = l.value.median <= 0.1;
  rows.push_back(l);
  return rows;
}

// The torchxd-shims of a daemon's run dir (their state.json).
std::vector<pid_t> ShimPids(const fs::path& run_dir) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(run_dir, ec)) {
    std::ifstream in(d.path() / "state.json");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    size_t at = text.find("\"shim_pid\":");
    if (at != std::string::npos) pids.push_back(static_cast<pid_t>(std::atol(text.c_str() + at + 11)));
  }
  return pids;
}

// Scenario 5b: one app of 100 `sleep` replicas under a --live-restore daemon.
// Each shim's PSS and the CPU all of them use over 5 s; then the daemon is
// SIGKILLed and started again: until `status` answers, and until a cancel of
// the app (which needs every shim adopted: the stop goes through each one's
// socket) has ended it. Baseline: a daemon with no apps, started to `status`.
// One live-restore daemon with `replicas` sleeping replicas is SIGKILLed and
// started again: seconds until `status` answers, and until a cancel through
// every adopted shim has ended the app. `measure` (optional) sees the shims
// while they run.
double SpawnBaseline(int n);
double SpawnFloor(const std::string& bin, int n, const fs::path& dir, const std::vector<std::string>& mode = {});
std::string WritableCgroup2();

struct Adoption {
  double answering = 0, adopted = 0;
};
Adoption AdoptAfterKill(const std::string& bin, const fs::path& d_dir, const fs::path& cwd, int replicas,
                        const std::function<void(const std::vector<pid_t>&)>& measure = {}) {
  std::string h;
  {
    auto d = std::make_unique<Daemon>(bin, d_dir, std::vector<std::string>{"--live-restore"});
    fs::path run_dir = d->run_dir();
    auto c = d->Client();
    auto r = c.Call("run", {{"app", App("keep", "/bin/sleep", {"300"}, replicas)}, {"cwd", cwd.string()},
                            {"env", {{"PATH", "/usr/bin:/bin"}}}});
    if (!r) throw std::runtime_error("restore run: " + r.error().message);
    h = (*r)["app_handle"];
    for (int i = 0; i < 6000 && ShimPids(run_dir).size() < static_cast<size_t>(replicas); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    auto pids = ShimPids(run_dir);
    if (pids.size() != static_cast<size_t>(replicas)) throw std::runtime_error("restore: not every shim started");
    if (measure) measure(pids);
    d->Stop(SIGKILL);
    d->KeepSocketDir();
  }
  Adoption out;
  auto start = Clock::now();
  Daemon again(bin, d_dir, {"--live-restore"});
  auto c = again.Client();
  auto st = c.Call("status", {{"app_handle", h}});
  out.answering = SecondsSince(start);
  if (!st || (*st)["state"] != "RUNNING") throw std::runtime_error("restore: the app is not RUNNING after the restart");
  auto cancelled = c.Call("cancel", {{"app_handle", h}, {"grace_period", 10.0}});
  auto w = c.Call("wait", {{"app_handle", h}});
  out.adopted = SecondsSince(start);
  if (!w || (*w)["state"] != "CANCELLED") throw std::runtime_error("restore: the adopted app did not end CANCELLED");
  again.Stop();
  return out;
}

std::vector<Row> BenchRestore(const std::string& bin, const fs::path& dir) {
  std::fprintf(stderr, "restore: 100 running replicas, shims' cost, daemon SIGKILL + restart; then 1,000\n");
  const int kReplicas = 100;
  std::vector<double> answering, adopted, base, pss;
  long shim_ticks = -1;
  size_t monitors = 0;
  double pss_total = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto measure = [&](const std::vector<pid_t>& listed) {
      // A host monitors several replicas: each process counted once.
      std::set<pid_t> distinct(listed.begin(), listed.end());
      std::vector<pid_t> pids(distinct.begin(), distinct.end());
      monitors = pids.size();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      long t0 = 0, t1 = 0;
      for (pid_t p : pids) t0 += CpuTicks(p);
      std::this_thread::sleep_for(std::chrono::seconds(5));
      for (pid_t p : pids) t1 += CpuTicks(p);
      shim_ticks = t1 - t0;
      for (pid_t p : pids) pss.push_back(static_cast<double>(PssKiB(p)) / 1024.0);
      for (double m : pss) pss_total += m;
    };
    Adoption a = AdoptAfterKill(bin, dir / ("r" + std::to_string(rep)), dir, kReplicas,
                                rep == 0 ? std::function<void(const std::vector<pid_t>&)>(measure) : nullptr);
    answering.push_back(a.answering);
    adopted.push_back(a.adopted);
    auto base_start = Clock::now();
    {
      Daemon empty(bin, dir / ("empty" + std::to_string(rep)));
      (void)empty.Client().Call("list", json::object());
      base.push_back(SecondsSince(base_start));
    }
  }
  Adoption big = AdoptAfterKill(bin, dir / "r1000", dir, 1000);
  std::vector<Row> rows;
  Row a{"restore", "SIGKILL + restart with 100 replicas -> status answers", Summarize(answering), "s",
        Summarize(base), "(reported)", true, ""};
  rows.push_back(a);
  Row b{"restore", "SIGKILL + restart -> 100 adopted and cancelled", Summarize(adopted), "s", std::nullopt, "<= 1 s",
        false, ""};
  b.met = b.value.median <= 1.0;
  rows.push_back(b);
  Row k{"restore", "SIGKILL + restart with 1,000 replicas -> status answers", Summarize({big.answering}), "s",
        std::nullopt, "(reported)", true, ""};
  k.note = "adopted and cancelled: " + std::to_string(big.adopted).substr(0, 5) + " s";
  rows.push_back(k);
  Stats p = Summarize(pss);
  char per_replica[128];
  std::snprintf(per_replica, sizeof per_replica, "%zu monitor processes for the 100; %.3f MiB per replica", monitors,
                pss_total / kReplicas);
  rows.push_back({"restore", "PSS per idle shim (100)", p, "MiB", std::nullopt, "<= 2 MiB", p.max <= 2.0, per_replica});
  rows.push_back({"restore", "CPU ticks of 100 idle shims over 5 s", {double(shim_ticks), double(shim_ticks), double(shim_ticks)},
                  "ticks", std::nullopt, "0", shim_ticks == 0, ""});
  return rows;
}

// The fan-out: `apps` apps of `replicas` /bin/true each, submitted back to
// back, until the last is terminal; with the daemon's CPU per replica.
std::vector<Row> BenchFanout(const std::string& bin, const fs::path& dir, int apps, int replicas) {
  std::fprintf(stderr, "fanout: %d apps x %d replicas of /bin/true\n", apps, replicas);
  Daemon d(bin, dir);
  auto c = d.Client();
  long ticks_before = CpuTicks(d.pid());
  auto start = Clock::now();
  std::vector<std::string> handles;
  for (int i = 0; i < apps; ++i) {
    auto r = c.Call("run", {{"app", App("fan", "/bin/true", {}, replicas)}, {"cwd", dir.string()},
                            {"env", {{"PATH", "/usr/bin:/bin"}}}});
    if (!r) throw std::runtime_error("fanout run: " + r.error().message);
    handles.push_back((*r)["app_handle"]);
  }
  for (const auto& h : handles) {
    auto w = c.Call("wait", {{"app_handle", h}});
    if (!w || (*w)["state"] != "SUCCEEDED") throw std::runtime_error("fanout: an app did not succeed");
  }
  double wall = SecondsSince(start);
  double daemon_s = static_cast<double>(CpuTicks(d.pid()) - ticks_before) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  d.Stop();
  int n = apps * replicas;
  double base = SpawnBaseline(n);
  Row r{"fanout", std::to_string(apps) + " apps x " + std::to_string(replicas) + " /bin/true, submit->all terminal",
        Summarize({wall}), "s", Summarize({base}), "(reported)", true, ""};
  char note[160];
  std::snprintf(note, sizeof(note), "ratio %.2f; daemon CPU %.3f s = %.0f us per replica", wall / base, daemon_s,
                daemon_s / n * 1e6);
  r.note = note;
  return {r};
}

// Blocking call on a Docker engine's socket (the baseline of scenario 8).
long EngineCall(const std::string& socket, const std::string& method, const std::string& path, const std::string& body) {
  CURL* c = curl_easy_init();
  std::string url = "http://docker/v1.41" + path, sink;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  if (method == "POST") curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
    static_cast<std::string*>(u)->append(d, s * n);
    return s * n;
  });
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  long code = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  return code;
}

// Scenario 8: local_docker, one app of 4 `true` containers, submit -> terminal,
// beside the engine API alone doing the same (create, start, wait, remove; 4 threads).
std::vector<Row> BenchDocker(const std::string& bin, const fs::path& dir) {
  std::fprintf(stderr, "docker: 4 containers through podman's Docker API\n");
  testing::PodmanService podman;
  std::string why = podman.Start(dir / "podman");
  if (!why.empty()) return {{"docker", "skipped", {}, "-", std::nullopt, "<= 1.5x the engine API alone", false, why}};
  Daemon d(bin, dir / "d", {}, {"DOCKER_HOST=unix://" + podman.socket});
  json app = {{"name", "dk"},
              {"roles", {{{"name", "w"}, {"image", testing::kBusyboxImage}, {"entrypoint", "true"}, {"num_replicas", 4}}}}};
  auto run = [&] {
    auto c = d.Client();
    auto r = c.Call("run", {{"app", app}, {"scheduler", "local_docker"}, {"cwd", dir.string()}, {"env", json::object()}});
    if (!r) throw std::runtime_error("docker run: " + r.error().message);
    auto w = c.Call("wait", {{"app_handle", (*r)["app_handle"]}});
    if (!w || (*w)["state"] != "SUCCEEDED") throw std::runtime_error("docker app did not succeed");
  };
  run();  // warm-up: makes the torchx network
  std::vector<double> ours, base;
  for (int rep = 0; rep < 3; ++rep) {
    auto start = Clock::now();
    run();
    ours.push_back(SecondsSince(start));
    start = Clock::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&, i] {
        std::string name = "bench-" + std::to_string(rep) + "-" + std::to_string(i);
        json create = {{"Image", testing::kBusyboxImage}, {"Cmd", {"true"}}, {"HostConfig", {{"NetworkMode", "torchx"}}}};
        EngineCall(podman.socket, "POST", "/containers/create?name=" + name, create.dump());
        EngineCall(podman.socket, "POST", "/containers/" + name + "/start", "");
        EngineCall(podman.socket, "POST", "/containers/" + name + "/wait?condition=not-running", "");
        EngineCall(podman.socket, "DELETE", "/containers/" + name + "?force=1", "");
      });
    }
    for (auto& t : threads) t.join();
    base.push_back(SecondsSince(start));
  }
  d.Stop();
  podman.Stop();
  Row r{"docker", "4 x true, submit->terminal", Summarize(ours), "s", Summarize(base), "<= 1.5x the engine API alone",
        false, ""};
  r.met = r.value.median <= 1.5 * r.baseline->median;
  r.note = "ratio " + std::to_string(r.value.median / r.baseline->median).substr(0, 5);
  return {r};
}

// The baseline for scenario 1: posix_spawn N /bin/true, each in its own
// session with stdout and stderr pipes, drain and reap them all.
double SpawnBaseline(int n) {
  auto start = Clock::now();
  std::vector<std::pair<pid_t, std::array<int, 2>>> kids;
  for (int i = 0; i < n; ++i) {
    int out[2], err[2];
    (void)!::pipe2(out, O_CLOEXEC);
    (void)!::pipe2(err, O_CLOEXEC);
    pid_t pid = SpawnTrueInSession(out[1], err[1]);
    ::close(out[1]);
    ::close(err[1]);
    kids.push_back({pid, {out[0], err[0]}});
  }
  for (auto& [pid, fds] : kids) {
    for (int fd : fds) Drain(fd);
    WaitExit(pid);
  }
  return SecondsSince(start);
}

// What a process per replica costs with no daemon at all (scenario 1's note):
// bench_spawn_floor's figure, in seconds; `mode` {"batch", CGROUP?}: one
// monitor for them all instead.
double SpawnFloor(const std::string& bin, int n, const fs::path& dir, const std::vector<std::string>& mode) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<std::string> argv = {bin + "/bench_spawn_floor", std::to_string(n), dir.string()};
  argv.insert(argv.end(), mode.begin(), mode.end());
  pid_t pid = Spawn(argv, {}, p[1]);
  ::close(p[1]);
  std::string out;
  char buf[256];
  for (ssize_t r; (r = ::read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(r));
  ::close(p[0]);
  if (WaitExit(pid) != 0 || out.empty()) throw std::runtime_error("bench_spawn_floor failed");
  return std::stod(out);
}

// A cgroup v2 directory this process may make groups in ("" if none): where
// the batch floor puts each replica in a group of its own.
std::string WritableCgroup2() {
  constexpr long kCgroup2Magic = 0x63677270;
  for (const char* dir : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    struct statfs st;
    if (::statfs(dir, &st) == 0 && st.f_type == kCgroup2Magic && ::access(dir, W_OK) == 0) {
      return std::string(dir) + "/torchxd-bench-floor-" + std::to_string(::getpid());
    }
  }
  return "";
}

// The baseline for scenario 4: the same writer into a pipe, copied into one file.
double CopyBaseline(const std::string& writer, const std::string& mode, long long n, const fs::path& file) {
  auto start = Clock::now();
  int p[2];
  (void)!::pipe2(p, O_CLOEXEC);
  pid_t pid = Spawn({writer, mode, std::to_string(n)}, {}, p[1]);
  ::close(p[1]);
  // TorchX's layout at its minimum: every byte in the stream's file and in combined.log.
  fs::path second = file.string() + ".combined";
  int out = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int comb = ::open(second.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<char> buf(65536);
  for (ssize_t got; (got = ::read(p[0], buf.data(), buf.size())) > 0;) {
    for (int fd : {out, comb}) {
      for (ssize_t off = 0; off < got;) off += ::write(fd, buf.data() + off, static_cast<size_t>(got - off));
    }
  }
  ::close(out);
  ::close(comb);
  ::close(p[0]);
  WaitExit(pid);
  double t = SecondsSince(start);
  fs::remove(file);
  fs::remove(second);
  return t;
}

void Print(const std::vector<Row>& rows) {
  std::printf("%-10s %-34s %12s %12s %12s %14s  %-16s %s\n", "scenario", "metric", "median", "min", "max",
              "baseline", "target", "met");
  for (const auto& r : rows) {
    std::string base = r.baseline ? std::to_string(r.baseline->median).substr(0, 8) : "-";
    std::printf("%-10s %-34s %12.4g %12.4g %12.4g %14s  %-16s %s %s\n", r.scenario.c_str(), (r.metric + " (" + r.unit + ")").c_str(),
                r.value.median, r.value.min, r.value.max, base.c_str(), r.target.c_str(), r.met ? "yes" : "NO",
                r.note.c_str());
  }
}

json ToJson(const std::vector<Row>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    json j = {{"scenario", r.scenario}, {"metric", r.metric}, {"unit", r.unit},
              {"median", r.value.median}, {"min", r.value.min}, {"max", r.value.max},
              {"target", r.target}, {"met", r.met}, {"note", r.note}};
    if (r.baseline) {
      j["baseline"] = {{"median", r.baseline->median}, {"min", r.baseline->min}, {"max", r.baseline->max}};
    }
    out.push_back(j);
  }
  return out;
}

}  // namespace
}  // namespace torchxd::bench

int main(int argc, char** argv) {
  using namespace torchxd::bench;
  if (argc < 3) {
    std::cerr << "usage: torchxd_bench BIN_DIR OUT.json\n";
    return 2;
  }
  std::string bin = fs::absolute(argv[1]).lexically_normal().string();
  if (bin.size() > 1 && bin.back() == '/') bin.pop_back();
  fs::path work = fs::temp_directory_path() / ("torchxd_bench_" + std::to_string(::getpid()));
  fs::create_directories(work);
  std::vector<Row> rows;
  auto add = [&](Row r) {
    rows.push_back(r);
    std::fprintf(stderr, "  %s / %s: median %.4g %s\n", r.scenario.c_str(), r.metric.c_str(), r.value.median, r.unit.c_str());
  };
  std::string sock_env;
  // BENCH_ONLY=k8s,idle runs only the scenarios named (for working on one).
  auto want = [](const char* name) {
    const char* only = std::getenv("BENCH_ONLY");
    return only == nullptr || std::string(only).find(name) != std::string::npos;
  };
  try {
    // 1. Spawn: one app of 200 /bin/true replicas, submit -> terminal.
    if (want("spawn")) {
      std::fprintf(stderr, "spawn: 200 replicas of /bin/true\n");
      Daemon d(bin, work / "spawn");
      std::vector<double> ours, base, floor, batch;
      std::string cgroup = WritableCgroup2();
      std::vector<std::string> batch_mode = {"batch"};
      if (!cgroup.empty()) batch_mode.push_back(cgroup);
      for (int rep = 0; rep < 5; ++rep) {
        auto start = Clock::now();
        json st = d.RunAndWait(App("spawn", "/bin/true", {}, 200));
        ours.push_back(SecondsSince(start));
        if (st["state"] != "SUCCEEDED") throw std::runtime_error("spawn app did not succeed");
        base.push_back(SpawnBaseline(200));
        floor.push_back(SpawnFloor(bin, 200, d.run_dir().parent_path() / "floor"));
        batch.push_back(SpawnFloor(bin, 200, d.run_dir().parent_path() / "floor", batch_mode));
      }
      // Each replica makes its log dir: what one inode costs there now says how much of
      // the figure is the filesystem's (measured after the runs, which it would slow).
      auto [fs_type, mkdir_us] = InodeCost((work / "spawn" / "inode-probe").string(), 200);
      Row r{"spawn", "200 x /bin/true submit->terminal", Summarize(ours), "s", Summarize(base), "<= 1.5x baseline", false, ""};
      r.met = r.value.median <= 1.5 * r.baseline->median;
      char probe[96];
      std::snprintf(probe, sizeof probe, "; a mkdir in the state dir (%s): %.0f us", fs_type.c_str(), mkdir_us);
      r.note = "ratio " + std::to_string(r.value.median / r.baseline->median).substr(0, 5) + probe +
               "; a process per replica and no daemon: " +
               std::to_string(Summarize(floor).median / r.baseline->median).substr(0, 4) +
               "x; one monitor for all 200 (vfork" + (cgroup.empty() ? ", no writable cgroup v2" : ", a cgroup each") +
               "): " + std::to_string(Summarize(batch).median / r.baseline->median).substr(0, 4) + "x";
      add(r);
    }
    // 2 + 3. End to end and round trip through the real torchx.
    if (want("e2e")) {
      std::fprintf(stderr, "end to end: torchx run --wait utils.echo\n");
      Daemon d(bin, work / "e2e");
      std::vector<std::string> env = {"TORCHXD_SOCKET=" + d.socket()};
      std::vector<double> ours, base;
      for (int rep = 0; rep < 20; ++rep) {
        ours.push_back(TimeCommand({bin + "/torchx", "run", "--wait", "utils.echo", "--msg", "hi"}, env));
        base.push_back(TimeCommand({"/bin/echo", "hi"}));
      }
      Row e{"e2e", "torchx run --wait utils.echo", Summarize(ours), "s", Summarize(base), "<= 0.030 s", false, ""};
      e.met = e.value.median <= 0.030;
      add(e);
      auto apps = d.Client().Call("list", json::object());
      std::string handle = (*apps)["apps"][0][0];
      std::vector<double> status;
      for (int rep = 0; rep < 50; ++rep) status.push_back(TimeCommand({bin + "/torchx", "status", handle}, env));
      Row s{"status", "torchx status HANDLE", Summarize(status), "s", std::nullopt, "<= 0.005 s", false, ""};
      s.met = s.value.median <= 0.005;
      add(s);
    }
    // 4. Log capture.
    if (!want("capture")) {
    } else if (FreeBytes(work.string()) < (4ull << 30)) {
      rows.push_back({"capture", "skipped", {}, "-", std::nullopt, ">= 0.8x two-file baseline", false,
                      "needs 4 GiB free in " + work.string()});
    } else {
      Daemon d(bin, work / "cap");
      struct Load { std::string mode; long long n; long long bytes; std::string label; };
      for (const Load& load : {Load{"bulk", 1ll << 30, 1ll << 30, "1 GiB in 64 KiB writes"},
                               Load{"lines", 10000000, 1000000000, "10 M lines of 100 B"}}) {
        std::fprintf(stderr, "capture: %s\n", load.label.c_str());
        std::vector<double> ours, base;
        std::string lost;
        for (int rep = 0; rep < 3; ++rep) {
          auto c = d.Client();
          auto start = Clock::now();
          auto r = c.Call("run", {{"app", App("cap", bin + "/bench_writer", {load.mode, std::to_string(load.n)}, 1)},
                                  {"cfg", {{"log_max_bytes", "0"}}}, {"cwd", work.string()}, {"env", {{"PATH", "/usr/bin:/bin"}}}});
          std::string h = (*r)["app_handle"];
          auto done = c.Call("wait", {{"app_handle", h}});
          if (!done || (*done)["state"] != "SUCCEEDED") throw std::runtime_error("capture app did not succeed");
          double t = SecondsSince(start);
          fs::path dir = d.state() / "logs/torchx" / h.substr(h.rfind('/') + 1) / "r/0";
          auto out = fs::file_size(dir / "stdout.log"), comb = fs::file_size(dir / "combined.log");
          if (out != static_cast<uintmax_t>(load.bytes) || comb != static_cast<uintmax_t>(load.bytes)) {
            lost = "LOST BYTES: stdout " + std::to_string(out) + " combined " + std::to_string(comb);
          }
          (void)c.Call("delete", {{"app_handle", h}});
          ours.push_back(static_cast<double>(load.bytes) / t / 1e6);
          base.push_back(static_cast<double>(load.bytes) / CopyBaseline(bin + "/bench_writer", load.mode, load.n, work / "copy.out") / 1e6);
        }
        Row r{"capture", load.label, Summarize(ours), "MB/s", Summarize(base), ">= 0.8x two-file baseline, 0 lost", false, ""};
        r.met = lost.empty() && r.value.median >= 0.8 * r.baseline->median;
        r.note = lost.empty() ? "0 bytes lost, ratio " + std::to_string(r.value.median / r.baseline->median).substr(0, 5) : lost;
        add(r);
      }
    }
    // 5. Idle cost and memory.
    if (want("idle")) {
      std::fprintf(stderr, "idle: 10 s with no apps\n");
      Daemon d(bin, work / "idle");
      std::this_thread::sleep_for(std::chrono::seconds(1));
      long t0 = CpuTicks(d.pid());
      std::this_thread::sleep_for(std::chrono::seconds(10));
      long ticks = CpuTicks(d.pid()) - t0;
      double rss = RssKiB(d.pid()) / 1024.0;
      add({"idle", "CPU ticks over 10 s idle", {double(ticks), double(ticks), double(ticks)}, "ticks", std::nullopt, "0", ticks == 0, ""});
      add({"idle", "RSS, no apps", {rss, rss, rss}, "MiB", std::nullopt, "<= 10 MiB", rss <= 10.0, ""});
      std::fprintf(stderr, "idle: 100 apps x 8 replicas\n");
      for (int i = 0; i < 100; ++i) d.RunAndWait(App("many", "/bin/true", {}, 8));
      double rss100 = RssKiB(d.pid()) / 1024.0;
      add({"idle", "RSS, 100 finished apps x 8", {rss100, rss100, rss100}, "MiB", std::nullopt, "(reported)", true, ""});
    }
    // 5b. Live-restore: 100 running replicas, their shims' cost, and a daemon SIGKILLed and started again.
    if (want("restore")) {
      for (auto& r : BenchRestore(bin, work / "restore")) add(r);
    }
    // 5b. The fan-out: 10,000 replicas in 100 apps.
    if (want("fanout")) {
      for (auto& r : BenchFanout(bin, work / "fanout", 100, 100)) add(r);
    }
    // 6. History: torchx list with 10,000 apps in the store, each created a millisecond after the
    // last (its record says so too, as a real app's does).
    if (want("history")) {
      std::fprintf(stderr, "history: 10,000 apps\n");
      fs::path dir = work / "hist";
      {
        // Submitted as `torchx run` submits: with the caller's whole environment.
        Daemon d(bin, dir, {"--cache-size", "10001"});
        d.RunAndWait(App("hist", "/bin/true", {}, 1), json::object(), torchxd::core::ProcessEnvMap());
      }
      sqlite3* db = nullptr;
      sqlite3_open((dir / "state/torchxd.db").c_str(), &db);
      const char* sql =
          "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 9999) "
          "INSERT INTO apps SELECT a.scheduler, a.app_id || '-' || n.i, a.state, a.created_ms + n.i, "
          "replace(a.record, a.app_id, a.app_id || '-' || n.i) FROM apps a, n;"
          "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 9999) "
          "INSERT INTO app_parts SELECT p.scheduler, p.app_id || '-' || n.i, p.part, "
          "CASE p.part WHEN 0 THEN json_set(replace(p.text, p.app_id, p.app_id || '-' || n.i), '$.created_ms', "
          "json_extract(p.text, '$.created_ms') + n.i) ELSE replace(p.text, p.app_id, p.app_id || '-' || n.i) END "
          "FROM app_parts p, n;"
          "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 9999) "
          "INSERT INTO replicas SELECT r.scheduler, r.app_id || '-' || n.i, r.role, r.replica_id, r.attempt, "
          "r.state, r.record FROM replicas r, n;";
      char* err = nullptr;
      if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) throw std::runtime_error(err ? err : "sqlite");
      sqlite3_close(db);
      // Started: it answers (its socket listens before it has read the store).
      auto start = Clock::now();
      Daemon d(bin, dir, {"--cache-size", "10001"});
      if (auto first = d.Client().Call("list", {{"limit", 1}}); !first) throw std::runtime_error(first.error().message);
      double startup = SecondsSince(start);
      std::vector<std::string> env = {"TORCHXD_SOCKET=" + d.socket()};
      size_t n = 0;  // every page, as `torchx list` reads them
      for (json params = json::object();;) {
        auto page = d.Client().Call("list", params);
        if (!page) throw std::runtime_error(page.error().message);
        n += (*page)["apps"].size();
        if (!page->contains("next")) break;
        params["after"] = (*page)["next"];
      }
      std::vector<double> list;
      for (int rep = 0; rep < 10; ++rep) list.push_back(TimeCommand({bin + "/torchx", "list"}, env));
      Row r{"history", "torchx list, " + std::to_string(n) + " apps", Summarize(list), "s", std::nullopt, "<= 0.050 s", false, ""};
      r.met = r.value.median <= 0.050 && n == 10000;
      r.note = "daemon start with them: " + std::to_string(startup).substr(0, 5) + " s (target <= 0.5 s)";
      add(r);
    }
    // 7. Kubernetes: what the bridge asks of the API server for submit + 10 status + a log follow.
    if (want("k8s")) {
      for (auto& r : BenchKubernetes(bin, work / "k8s")) add(r);
      for (auto& r : BenchKubernetesScale(bin, work / "k8s-scale")) add(r);
    }
    // 8. Containers: local_docker beside the engine's API alone.
    if (want("docker")) {
      for (auto& r : BenchDocker(bin, work / "docker")) add(r);
    }
    // 9. Admission with 10,000 pending apps and 1,000 running replicas.
    if (want("admission")) {
      for (auto& r : BenchAdmission(bin, work / "admission")) add(r);
    }
    // 12. What reading the GPUs costs (the fake NVML, 8 GPUs, 32 processes).
    if (want("gpus")) {
      std::fprintf(stderr, "gpus: the GPU sampler's CPU over 20 s, on and off\n");
      for (auto& r : BenchGpus(bin, work / "gpus")) add(r);
    }
    // 11. A crash-looping neighbour.
    if (want("crashloop")) {
      for (auto& r : BenchCrashLoop(bin, work / "crashloop")) add(r);
    }
    // 14. A spawn storm and a scale loop.
    if (want("storm")) {
      for (auto& r : BenchSpawnStorm(bin, work / "spawnstorm")) add(r);
    }
  } catch (const std::exception& e) {
    std::cerr << "bench failed: " << e.what() << "\n";
    fs::remove_all(work);
    return 1;
  }
  fs::remove_all(work);
  Print(rows);
  std::ofstream(argv[2]) << ToJson(rows).dump(2) << "\n";
  std::printf("\nfigures written to %s\n", argv[2]);
  return 0;
}
