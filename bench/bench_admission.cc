// Scenario 9, admission under load: 10,000 pending apps and 1,000 running
// replicas. First the engine alone (one pass, timed in process), then a real
// daemon holding that load: submit latency, `torchx queue`, `torchx status`
// of a waiting app, and its idle cost.
#include <fstream>
#include <memory>

#include "admission/admission.h"
#include "bench/bench_daemon.h"

namespace torchxd::bench {
namespace {

constexpr int kPending = 10000;
constexpr int kRunning = 1000;

// 8 GPUs in NVLink pairs over two NUMA nodes, as on a DGX-like box.
constexpr const char* kTopology = R"({"gpus": [
  {"index": 0, "numa_node": 0, "nvlink": {"1": 12}}, {"index": 1, "numa_node": 0},
  {"index": 2, "numa_node": 0, "nvlink": {"3": 12}}, {"index": 3, "numa_node": 0},
  {"index": 4, "numa_node": 1, "nvlink": {"5": 12}}, {"index": 5, "numa_node": 1},
  {"index": 6, "numa_node": 1, "nvlink": {"7": 12}}, {"index": 7, "numa_node": 1}]})";

admission::AppDemand Demand(int i, int replicas, admission::Resources each, int64_t now_ms) {
  admission::AppDemand a;
  a.key = "local_cwd/app-" + std::to_string(i);
  a.name = "app-" + std::to_string(i);
  a.queue = "q" + std::to_string(i % 4);
  a.user = 1000 + i % 16;
  a.priority = i % 3;
  a.seq = static_cast<uint64_t>(i);
  a.submitted_ms = now_ms - i;
  for (int r = 0; r < replicas; ++r) a.replicas.push_back({0, r, each});
  a.role_min = {replicas};
  return a;
}

// One pass of the engine: on a full box (a submit that cannot start), and
// after a running app ends and its GPUs go to the next (placement included).
std::vector<Row> BenchEngine() {
  std::fprintf(stderr, "admission: engine pass, %d pending, %d running replicas\n", kPending, kRunning);
  admission::BoxCapacity box;
  box.topology = *admission::ParseGpuTopology(kTopology);
  box.cpu = kRunning;
  box.mem_mb = 1 << 30;
  std::vector<admission::QueueSpec> queues;
  for (int q = 0; q < 4; ++q) queues.push_back({"q" + std::to_string(q), q + 1, std::nullopt, std::nullopt, std::nullopt});
  const int64_t now = 1'000'000'000;
  admission::Admission adm(box, queues);
  // 8 apps of 1 GPU + 124 CPUs' worth of replicas hold the box: 8 + 992 = 1,000 replicas.
  for (int i = 0; i < 8; ++i) {
    adm.Enqueue(Demand(-1 - i, 1, {1, 1, 0}, now));
    adm.Enqueue(Demand(-100 - i, 124, {0, 1, 0}, now));
  }
  if (adm.Pass(now).size() != 16) throw std::runtime_error("admission bench: the running load did not start");
  for (int i = 0; i < kPending; ++i) adm.Enqueue(Demand(i, 1 + i % 4, {1 + i % 2, 1, 0}, now));
  std::vector<double> blocked, freed, floor;
  for (int rep = 0; rep < 200; ++rep) {
    adm.Enqueue(Demand(kPending + rep, 1, {1, 1, 0}, now));
    auto start = Clock::now();
    auto started = adm.Pass(now);
    blocked.push_back(SecondsSince(start) * 1e3);
    if (!started.empty()) throw std::runtime_error("admission bench: a full box started an app");
  }
  for (int rep = 0; rep < 8; ++rep) {
    adm.Remove("local_cwd/app--" + std::to_string(1 + rep));  // a 1-GPU holder ends
    auto start = Clock::now();
    auto started = adm.Pass(now);
    freed.push_back(SecondsSince(start) * 1e3);
  }
  for (int rep = 0; rep < 200; ++rep) {  // the floor: one app on an empty box
    admission::Admission empty(box, queues);
    empty.Enqueue(Demand(0, 1, {1, 1, 0}, now));
    auto start = Clock::now();
    (void)empty.Pass(now);
    floor.push_back(SecondsSince(start) * 1e3);
  }
  Row a{"admission", "engine pass, full box (200)", Summarize(blocked), "ms", Summarize(floor), "<= 1 ms", false, ""};
  a.met = a.value.median <= 1.0;
  a.note = "baseline: one app on an empty box";
  Row b{"admission", "engine pass, an app ended (8)", Summarize(freed), "ms", Summarize(floor), "<= 1 ms", false, ""};
  b.met = b.value.median <= 1.0;
  return {a, b};
}

json Role(const std::string& name, const std::string& entrypoint, std::vector<std::string> args, int replicas,
          int gpu, int cpu) {
  return {{"name", name}, {"entrypoint", entrypoint}, {"args", std::move(args)}, {"num_replicas", replicas},
          {"resource", {{"cpu", cpu}, {"gpu", gpu}, {"memMB", 0}}}};
}

std::vector<Row> BenchDaemon(const std::string& bin, const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "topology.json") << kTopology;
  std::vector<std::string> args = {"--gpu-topology", (dir / "topology.json").string(), "--capacity",
                                   "cpu=" + std::to_string(kRunning), "--cache-size", std::to_string(kPending + 10)};
  for (int q = 0; q < 4; ++q) args.insert(args.end(), {"--queue", "q" + std::to_string(q) + ":weight=" + std::to_string(q + 1)});
  args.push_back("--live-restore");
  auto first = std::make_unique<Daemon>(bin, dir, args);
  Daemon& d = *first;
  auto c = d.Client();
  json env = {{"PATH", "/usr/bin:/bin"}};
  std::fprintf(stderr, "admission: %d running replicas of sleep\n", kRunning);
  auto run = c.Call("run", {{"app", {{"name", "hold"}, {"roles", {Role("r", "sleep", {"3600"}, kRunning, 0, 1)}}}},
                            {"cfg", json::object()}, {"cwd", dir.string()}, {"env", env}});
  if (!run) throw std::runtime_error("admission bench: " + run.error().message);
  std::string hold = (*run)["app_handle"];
  for (int i = 0; i < 3000; ++i) {
    auto st = c.Call("status", {{"app_handle", hold}});
    if (st && (*st)["state"] == "RUNNING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::fprintf(stderr, "admission: %d apps submitted into the full box\n", kPending);
  std::vector<double> submit;
  std::string pending;
  for (int i = 0; i < kPending; ++i) {
    json cfg = {{"queue", "q" + std::to_string(i % 4)}, {"priority", i % 3}};
    auto start = Clock::now();
    auto r = c.Call("run", {{"app", {{"name", "p" + std::to_string(i)}, {"roles", {Role("r", "true", {}, 1 + i % 4, 1, 1)}}}},
                            {"cfg", cfg}, {"cwd", dir.string()}, {"env", env}});
    submit.push_back(SecondsSince(start) * 1e3);
    if (!r) throw std::runtime_error("admission bench: " + r.error().message);
    pending = (*r)["app_handle"];
  }
  std::vector<std::string> sock = {"TORCHXD_SOCKET=" + d.socket()};
  std::vector<double> queue, queue_json, status;
  for (int rep = 0; rep < 10; ++rep) {
    queue.push_back(TimeCommand({bin + "/torchx", "queue"}, sock));
    queue_json.push_back(TimeCommand({bin + "/torchx", "queue", "--json"}, sock));
  }
  for (int rep = 0; rep < 20; ++rep) status.push_back(TimeCommand({bin + "/torchx", "status", pending}, sock));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  long t0 = CpuTicks(d.pid());
  std::this_thread::sleep_for(std::chrono::seconds(10));
  long ticks = CpuTicks(d.pid()) - t0;
  double rss = RssKiB(d.pid()) / 1024.0;
  // A restart: the queue comes back from the store, the 1,000 replicas are adopted.
  std::fprintf(stderr, "admission: SIGKILL + restart with the queue and the running replicas\n");
  d.Stop(SIGKILL);
  d.KeepSocketDir();
  auto restart = Clock::now();
  // Restarted without --live-restore: its stop ends what it runs then (the queued apps that the
  // hold's end admits), and with them their cgroups and run dirs, which no later daemon would sweep.
  std::vector<std::string> again_args = args;
  again_args.pop_back();  // --live-restore, pushed last
  Daemon again(bin, dir, again_args);
  auto back = again.Client().Call("queue", {{"limit", 0}});
  double restarted = SecondsSince(restart);
  size_t queued = 0;
  if (back) {
    for (const auto& q : (*back)["queues"]) queued += q.value("pending_count", size_t{0});
  }
  first.reset();
  (void)again.Client().Call("cancel", {{"app_handle", hold}});
  (void)again.Client().Call("wait", {{"app_handle", hold}});

  std::vector<Row> rows;
  Row s{"admission", "submit into the full box (10,000)", Summarize(submit), "ms", std::nullopt, "(reported)", true,
        "one pass and one store write each"};
  rows.push_back(s);
  Row q{"admission", "torchx queue", Summarize(queue), "s", std::nullopt, "<= 0.050 s", false, ""};
  q.met = q.value.median <= 0.050;
  rows.push_back(q);
  Row qj{"admission", "torchx queue --json", Summarize(queue_json), "s", std::nullopt, "<= 0.100 s", false, ""};
  qj.met = qj.value.median <= 0.100;
  rows.push_back(qj);
  Row st{"admission", "torchx status (pending, why)", Summarize(status), "s", std::nullopt, "<= 0.005 s", false, ""};
  st.met = st.value.median <= 0.005;
  rows.push_back(st);
  rows.push_back({"admission", "CPU ticks over 10 s, loaded, idle", {double(ticks), double(ticks), double(ticks)}, "ticks",
                  std::nullopt, "0", ticks == 0, "RSS " + std::to_string(rss).substr(0, 5) + " MiB"});
  Row r{"admission", "SIGKILL + restart -> queue answers", {restarted, restarted, restarted}, "s", std::nullopt,
        "<= 1 s", queued == static_cast<size_t>(kPending) && restarted <= 1.0,
        std::to_string(queued) + " queued apps back"};
  rows.push_back(r);
  return rows;
}

}  // namespace

std::vector<Row> BenchAdmission(const std::string& bin, const fs::path& dir) {
  std::vector<Row> rows = BenchEngine();
  for (auto& r : BenchDaemon(bin, dir)) rows.push_back(r);
  return rows;
}

}  // namespace torchxd::bench
