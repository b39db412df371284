// `gpus` and `torchx gpus` against a fake NVML (fake_nvml.cc) whose GPUs,
// readings and processes the test writes: discovery and readings come from
// the library --nvml-library names, and each process on a GPU is told apart
// as a replica's (its child processes included) or a stranger's.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/app_status.h"
#include "tests/cli/shell.h"
#include "tests/daemon/daemon_fixture.h"
#include "tests/daemon/http_get.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

class GpusTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    nvml_file_ = (dir_ / "nvml.json").string();
    ::setenv("TORCHXD_FAKE_NVML", nvml_file_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("TORCHXD_FAKE_NVML");
    DaemonFixture::TearDown();
  }
  // Replaces the fake NVML's file at once (rename: never half-written).
  void WriteNvml(const json& doc) {
    std::string tmp = nvml_file_ + ".tmp";
    std::ofstream(tmp) << doc.dump();
    ASSERT_EQ(std::rename(tmp.c_str(), nvml_file_.c_str()), 0);
  }
  static json Gpu(int i, json extra = json::object()) {
    json g = {{"uuid", "GPU-0000000" + std::to_string(i)},
              {"pci_bus_id", "00000000:0" + std::to_string(i) + ":00.0"},
              {"memory_total_mb", 81920},
              {"memory_used_mb", 0},
              {"util_gpu", 0},
              {"util_mem", 0},
              {"temperature_c", 30 + i},
              {"power_mw", 60000},
              {"power_limit_mw", 400000},
              {"sm_clock_mhz", 1410},
              {"ecc_uncorrected", 0},
              {"ecc_corrected", 0}};
    g.update(extra);
    return g;
  }
  void Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--nvml-library", FAKE_NVML});
    StartDaemon(extra);
  }
  // `torchx ARGS` against this daemon.
  Output Torchx(const std::string& args) {
    return RunShell(std::string(TORCHX_BIN) + " --socket " + socket_ + " " + args, (dir_ / "torchx.err").string());
  }
  // The GPU replica w/0 of `handle` holds once it runs (-1 when it does not within the wait).
  int GpuOf(const std::string& handle) {
    int index = -1;
    WaitUntil([&] {
      json st = Status(handle);
      const json& gpus = Replica(st, "w", 0)["gpus"];
      if (gpus.empty() || st["state"] != "RUNNING") return false;
      index = gpus[0]["index"].get<int>();
      return true;
    });
    return index;
  }
  // The `gpus` reply once `ready` holds for it (the last reply otherwise).
  json GpusWhen(const std::function<bool(const json&)>& ready) {
    json reply;
    WaitUntil([&] {
      reply = CallOk("gpus", json::object());
      return ready(reply);
    });
    return reply;
  }
  std::string nvml_file_;
};

TEST_F(GpusTest, EachGpuShowsWhatNvmlReadsAndWhoHoldsIt) {
  WriteNvml({{"gpus", {Gpu(0, {{"util_gpu", 87}, {"util_mem", 40}, {"memory_used_mb", 30720}, {"memory_reserved_mb", 614}, {"power_mw", 310500}}),
                       Gpu(1)}}});
  Start({"--gpu-sample-period", "0.1"});
  // Discovery went through the same library: admission hands out its two GPUs.
  json queue = CallOk("queue", json::object());
  ASSERT_EQ(queue["gpus"].size(), 2u);
  EXPECT_EQ(queue["gpus"][1]["uuid"], "GPU-00000001");
  EXPECT_EQ(queue["gpus"][1]["pci_bus_id"], "0000:01:00.0");

  json reply = GpusWhen([](const json& r) { return r["sampling"].contains("sampled_ms"); });
  ASSERT_TRUE(reply["sampling"].contains("sampled_ms")) << reply.dump();
  EXPECT_EQ(reply["sampling"]["period_s"], 0.1);
  ASSERT_EQ(reply["gpus"].size(), 2u);
  const json& g0 = reply["gpus"][0];
  EXPECT_EQ(g0["index"], 0);
  EXPECT_EQ(g0["uuid"], "GPU-00000000");
  EXPECT_EQ(g0["health"], "ok");
  EXPECT_EQ(g0["util_gpu"], 87);
  EXPECT_EQ(g0["util_mem"], 40);
  EXPECT_EQ(g0["memory_used_mb"], 30720);  // as nvidia-smi: without the driver's reserved 614 MiB
  EXPECT_EQ(g0["memory_total_mb"], 81920);
  EXPECT_EQ(g0["temperature_c"], 30);
  EXPECT_DOUBLE_EQ(g0["power_w"].get<double>(), 310.5);
  EXPECT_DOUBLE_EQ(g0["power_limit_w"].get<double>(), 400.0);
  EXPECT_EQ(g0["sm_clock_mhz"], 1410);
  EXPECT_EQ(g0["ecc_uncorrected"], 0);
  EXPECT_TRUE(g0["held_by"].is_null());
  EXPECT_EQ(reply["gpus"][1]["temperature_c"], 31);

  // Readings follow the GPU: a new value shows within a few periods.
  WriteNvml({{"gpus", {Gpu(0, {{"util_gpu", 12}}), Gpu(1)}}});
  reply = GpusWhen([](const json& r) { return r["gpus"][0]["util_gpu"] == 12; });
  EXPECT_EQ(reply["gpus"][0]["util_gpu"], 12);

  // A GPU NVML cannot read says so.
  WriteNvml({{"gpus", {Gpu(0), Gpu(1, {{"lost", true}})}}});
  reply = GpusWhen([](const json& r) { return r["gpus"][1]["health"] == "unhealthy"; });
  EXPECT_EQ(reply["gpus"][1]["health"], "unhealthy");
  EXPECT_THAT(reply["gpus"][1].value("health_reason", ""), HasSubstr("GPU is lost"));

  // An XID that loses a GPU marks it unhealthy, naming the XID; one that does not only shows in the log.
  WriteNvml({{"gpus", {Gpu(0), Gpu(1)}}, {"xids", {{{"gpu", 0}, {"xid", 13}}, {{"gpu", 1}, {"xid", 79}}}}});
  reply = GpusWhen([](const json& r) { return r["gpus"][1].value("health_reason", "").find("XID") != std::string::npos; });
  EXPECT_EQ(reply["gpus"][1]["health"], "unhealthy");
  EXPECT_EQ(reply["gpus"][1]["health_reason"], "reported XID 79: fell off the bus");
  EXPECT_EQ(reply["gpus"][0]["health"], "ok");
}

TEST_F(GpusTest, AProcessOnAGpuIsTheReplicasWhoseTreeHoldsItOrAStrangersWithItsPidAndUser) {
  WriteNvml({{"gpus", {Gpu(0), Gpu(1)}}});
  Start({"--gpu-sample-period", "0.1"});
  // The replica's main process starts a child that would use the GPU, as a
  // launcher's worker does.
  std::string child_file = (dir_ / "child.pid").string();
  json role = {{"name", "w"}, {"entrypoint", "sh"},
               {"args", {"-c", "sleep 300 & echo $$! > " + child_file + "; wait"}},
               {"resource", {{"gpu", 1}}}};
  std::string h = Run(App("g", {role}));
  pid_t child = -1;
  ASSERT_TRUE(WaitUntil([&] { return (child = static_cast<pid_t>(std::atol(ReadFile(child_file).c_str()))) > 0; }));
  auto held_index = [&](const json& r) {
    for (const auto& g : r["gpus"]) {
      if (g["held_by"].is_object()) return g["index"].get<int>();
    }
    return -1;
  };
  json held = GpusWhen([&](const json& r) { return held_index(r) >= 0; });
  int mine_at = held_index(held);
  ASSERT_GE(mine_at, 0) << held.dump();
  int other = 1 - mine_at;
  EXPECT_EQ(held["gpus"][mine_at]["held_by"]["app_handle"], h);
  EXPECT_EQ(held["gpus"][mine_at]["held_by"]["replicas"], json::array({"w/0"}));
  EXPECT_EQ(held["gpus"][mine_at]["held_by"]["user"], ::getuid());
  EXPECT_TRUE(held["gpus"][other]["held_by"].is_null());
  // `status` names the replica's GPUs, with their UUIDs.
  EXPECT_EQ(Replica(Status(h), "w", 0)["gpus"],
            json::array({{{"index", mine_at}, {"uuid", "GPU-0000000" + std::to_string(mine_at)}}}));

  // NVML lists the child on the replica's GPU and this test's own process (no app's) on the other.
  json gpus = {Gpu(0), Gpu(1)};
  gpus[mine_at]["processes"] = {{{"pid", child}, {"used_mb", 1234}}};
  gpus[other]["processes"] = {{{"pid", ::getpid()}, {"used_mb", 10}}};
  WriteNvml({{"gpus", gpus}});
  json reply = GpusWhen([&](const json& r) { return !r["gpus"][other]["processes"].empty(); });
  ASSERT_EQ(reply["gpus"][mine_at]["processes"].size(), 1u) << reply.dump();
  const json& mine = reply["gpus"][mine_at]["processes"][0];
  EXPECT_EQ(mine["pid"], child);
  EXPECT_EQ(mine["used_mb"], 1234);
  EXPECT_EQ(mine["type"], "compute");
  EXPECT_EQ(mine["app_handle"], h);
  EXPECT_EQ(mine["replica"], "w/0");
  EXPECT_EQ(mine["command"], "sleep");
  EXPECT_EQ(mine["user"], ::getuid());
  const json& stranger = reply["gpus"][other]["processes"][0];
  EXPECT_EQ(stranger["pid"], ::getpid());
  EXPECT_FALSE(stranger.contains("app_handle")) << stranger.dump();
  EXPECT_EQ(stranger["user"], ::getuid());
  EXPECT_EQ(stranger["command"], "daemon_test");

  // The CLI's table says the same.
  Output table = Torchx("gpus");
  EXPECT_EQ(table.exit_code, 0) << table.err;
  const std::string& out = table.out;
  EXPECT_THAT(out, HasSubstr(h + " ("));
  EXPECT_THAT(out, HasSubstr("w/0"));
  EXPECT_THAT(out, HasSubstr("0/81920 MiB"));  // the fake's memory_used_mb
  EXPECT_THAT(out, HasSubstr("free"));
  EXPECT_THAT(out, HasSubstr(std::to_string(child)));
  EXPECT_THAT(out, HasSubstr("not torchxd's (daemon_test)"));
  Output status = Torchx("status " + h);
  EXPECT_THAT(status.out, HasSubstr("attempt=1 gpus=" + std::to_string(mine_at))) << status.out << status.err;

  // /metrics: DCGM exporter's names, labelled with the GPU and its holder.
  HttpTarget ui{(fs::path(socket_).parent_path() / "ui.sock").string()};
  std::string metrics = HttpGet(ui, "/metrics", {}, "localhost").body;
  std::string mine_labels = "{app=\"" + h + "\",gpu=\"" + std::to_string(mine_at) + "\",user=\"";
  EXPECT_THAT(metrics, HasSubstr("# TYPE DCGM_FI_DEV_GPU_UTIL gauge"));
  EXPECT_THAT(metrics, HasSubstr("DCGM_FI_DEV_FB_USED" + mine_labels)) << metrics;
  EXPECT_THAT(metrics, HasSubstr("DCGM_FI_DEV_GPU_TEMP{app=\"\",gpu=\"" + std::to_string(other) +
                                 "\",user=\"\",uuid=\"GPU-0000000" + std::to_string(other) + "\"} " +
                                 std::to_string(30 + other)));
  EXPECT_THAT(metrics, HasSubstr("torchxd_gpu_healthy{gpu=\"0\",uuid=\"GPU-00000000\"} 1"));
  CallOk("cancel", {{"app_handle", h}});
}

TEST_F(GpusTest, AnXidThatLosesAGpuFailsItsAppNamingItAndTheGpuIsNeverHandedOutAgain) {
  WriteNvml({{"gpus", {Gpu(0), Gpu(1)}}});
  Start({"--gpu-sample-period", "0.1"});
  json role = {{"name", "w"}, {"entrypoint", "sleep"}, {"args", {"300"}}, {"resource", {{"gpu", 1}}}};
  std::string h = Run(App("x", {role}));
  int lost = GpuOf(h);
  ASSERT_GE(lost, 0);
  WriteNvml({{"gpus", {Gpu(0), Gpu(1)}}, {"xids", {{{"gpu", lost}, {"xid", 79}}}}});
  auto done = Call("wait", {{"app_handle", h}});
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ((*done)["state"], "FAILED");
  std::string named = "GPU " + std::to_string(lost) + " (GPU-0000000" + std::to_string(lost) +
                      ") reported XID 79: fell off the bus";
  EXPECT_THAT((*done)["msg"].get<std::string>(), HasSubstr(named)) << done->dump();
  // Out of service: admission lists why, and the box is one GPU smaller.
  json queue = CallOk("queue", json::object());
  EXPECT_EQ(queue["gpus"][lost]["usable"], false);
  EXPECT_EQ(queue["capacity"]["gpu"], 1);
  auto two = Call("run", {{"app", App("two", {json{{"name", "w"}, {"entrypoint", "true"}, {"resource", {{"gpu", 2}}}}})},
                          {"cwd", dir_.string()}});
  EXPECT_FALSE(two.has_value()) << "two GPUs no longer fit this box";
  // A one-GPU app gets the other GPU, never the lost one.
  std::string next = Run(App("y", {role}));
  EXPECT_EQ(GpuOf(next), 1 - lost);
  json g = CallOk("gpus", json::object());
  EXPECT_EQ(g["gpus"][lost]["health"], "unhealthy");
  EXPECT_EQ(g["gpus"][lost]["usable"], false);
  CallOk("cancel", {{"app_handle", next}});
}

TEST_F(GpusTest, ADrainedGpuIsNotHandedOutUntilUndrainedAndItsHolderRunsOn) {
  WriteNvml({{"gpus", {Gpu(0), Gpu(1)}}});
  Start({"--gpu-sample-period", "0"});
  json role = {{"name", "w"}, {"entrypoint", "sleep"}, {"args", {"300"}}, {"resource", {{"gpu", 1}}}};
  std::string a = Run(App("a", {role}));
  int held = GpuOf(a);
  ASSERT_GE(held, 0);
  int other = 1 - held;
  // Drained while held, the holder runs on (as after a Slurm drain); the free
  // one drained, nothing new starts.
  Output drained = Torchx("gpus --drain " + std::to_string(held));
  EXPECT_EQ(drained.exit_code, 0) << drained.err;
  EXPECT_THAT(drained.out, HasSubstr(a + " ("));
  EXPECT_THAT(drained.out, HasSubstr("; then not handed out: drained by "));
  EXPECT_EQ(Torchx("gpus --undrain " + std::to_string(held)).exit_code, 0);
  drained = Torchx("gpus --drain " + std::to_string(other));
  EXPECT_EQ(drained.exit_code, 0) << drained.err;
  EXPECT_THAT(drained.out, HasSubstr("not handed out: drained by "));
  EXPECT_TRUE(WaitUntil([&] { return Status(a)["state"] == "RUNNING"; }));  // PENDING only until it runs
  std::string b = Run(App("b", {role}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Status(b)["state"], "PENDING");
  // Undrained: b starts on it.
  Output back = Torchx("gpus --undrain " + std::to_string(other));
  EXPECT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(GpuOf(b), other);
  // Bad input: exit 2 naming it; no such GPU: exit 1 saying so.
  EXPECT_EQ(Torchx("gpus --drain 5000").exit_code, 2);
  EXPECT_EQ(Torchx("gpus --drain 0 --undrain 1").exit_code, 2);
  Output missing = Torchx("gpus --drain 7");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("GPU 7 does not exist on this box (2 GPUs)"));
  auto bad = Call("gpus", {{"drain", -1}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("params.drain"));
  CallOk("cancel", {{"app_handle", a}});
  CallOk("cancel", {{"app_handle", b}});
}

TEST_F(GpusTest, WithSamplingOffTheGpusAreListedWithoutReadings) {
  WriteNvml({{"gpus", {Gpu(0, {{"util_gpu", 50}})}}});
  Start({"--gpu-sample-period", "0"});
  json reply = CallOk("gpus", json::object());
  EXPECT_EQ(reply["sampling"]["off"], true);
  ASSERT_EQ(reply["gpus"].size(), 1u);
  EXPECT_EQ(reply["gpus"][0]["uuid"], "GPU-00000000");
  EXPECT_TRUE(reply["gpus"][0]["util_gpu"].is_null());
  EXPECT_EQ(reply["gpus"][0]["memory_total_mb"], 81920) << "from discovery";
}

TEST_F(GpusTest, UsageSumsTheGpuSecondsEachAppHeldAndUsedAndARestartKeepsThem) {
  // Both GPUs busy at 50 %: the app's used time is half its held time.
  WriteNvml({{"gpus", {Gpu(0, {{"util_gpu", 50}}), Gpu(1, {{"util_gpu", 50}})}}});
  Start({"--gpu-sample-period", "0.1"});
  // 2.5 s: half a tick at the end, which the used time must count too.
  json role = {{"name", "w"}, {"entrypoint", "sleep"}, {"args", {"2.5"}}, {"resource", {{"gpu", 2}}}};
  auto t0 = std::chrono::steady_clock::now();
  std::string h = Run(App("u", {role}));
  Wait(h);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json usage = CallOk("usage", json::object());
  ASSERT_EQ(usage["apps"].size(), 1u) << usage.dump();
  const json& app = usage["apps"][0];
  EXPECT_EQ(app["app_handle"], h);
  EXPECT_EQ(app["gpus"], json::array({0, 1}));
  EXPECT_EQ(app["state"], "SUCCEEDED");
  double held = app["gpu_seconds_held"].get<double>();
  double used = app["gpu_seconds_used"].get<double>();
  // Two GPUs for the 2.5 s the replica ran (no longer than the test waited).
  EXPECT_GE(held, 2 * 2.45);
  EXPECT_LE(held, 2 * wall + 0.1);
  // Half of it used: each part of the hold counted once, its first and last
  // part seconds too (counted a whole tick at a time, it was 2.0 or 3.0 here).
  EXPECT_NEAR(used, held / 2, 0.2);
  ASSERT_EQ(usage["users"].size(), 1u);
  EXPECT_EQ(usage["users"][0]["user"], ::getuid());
  EXPECT_DOUBLE_EQ(usage["users"][0]["gpu_seconds_held"].get<double>(), held);
  EXPECT_EQ(usage["users"][0]["apps"], 1);
  EXPECT_DOUBLE_EQ(usage["total"]["gpu_seconds_used"].get<double>(), used);
  // Another user's span: nothing. A span before the app: nothing.
  EXPECT_TRUE(CallOk("usage", {{"user", "4000000000"}})["users"].empty());
  int64_t then = core::UnixNowMs() - static_cast<int64_t>(wall * 1000) - 60'000;
  EXPECT_TRUE(CallOk("usage", {{"since_ms", then - 60'000}, {"until_ms", then}})["users"].empty());

  Output text = Torchx("usage --since 1h");
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("GPU-HOURS HELD"));
  EXPECT_THAT(text.out, HasSubstr(h));
  EXPECT_THAT(text.out, HasSubstr("0,1"));
  EXPECT_EQ(Torchx("usage --since soon").exit_code, 2);
  EXPECT_EQ(Torchx("usage --since 2999-01-01").exit_code, 2);
  Output nobody = Torchx("usage --user no_such_user_x");
  EXPECT_EQ(nobody.exit_code, 2);
  EXPECT_THAT(nobody.err, HasSubstr("no such user no_such_user_x"));

  // /metrics counts them per user.
  HttpTarget ui{(fs::path(socket_).parent_path() / "ui.sock").string()};
  EXPECT_THAT(HttpGet(ui, "/metrics", {}, "localhost").body, HasSubstr("# TYPE torchxd_gpu_seconds_held_total counter"));

  // Stored with the app: the same after a restart.
  StopDaemon();
  Start({"--gpu-sample-period", "0.1"});
  json again = CallOk("usage", json::object());
  ASSERT_EQ(again["apps"].size(), 1u) << again.dump();
  EXPECT_DOUBLE_EQ(again["apps"][0]["gpu_seconds_held"].get<double>(), held);
  EXPECT_DOUBLE_EQ(again["apps"][0]["gpu_seconds_used"].get<double>(), used);
}

TEST_F(GpusTest, HistoryKeepsEachGpusReadingsAcrossARestart) {
  WriteNvml({{"gpus", {Gpu(0, {{"util_gpu", 37}, {"memory_used_mb", 2048}}), Gpu(1)}}});
  Start({"--gpu-sample-period", "0.1"});
  auto points_at = [](const json& series, double value) {
    int n = 0;
    for (const auto& v : series) n += v.is_number() && v.get<double>() == value;
    return n;
  };
  json history;
  ASSERT_TRUE(WaitUntil([&] {
    history = CallOk("gpu_history", {{"from_ms", core::UnixNowMs() - 60'000}});
    return points_at(history["gpus"][0]["util_gpu"], 37) >= 2;
  })) << history.dump();
  EXPECT_EQ(history["step_s"], 1);
  ASSERT_EQ(history["gpus"].size(), 2u);
  EXPECT_EQ(history["gpus"][0]["uuid"], "GPU-00000000");
  EXPECT_EQ(points_at(history["gpus"][0]["memory_used_mb"], 2048), points_at(history["gpus"][0]["util_gpu"], 37));
  EXPECT_EQ(points_at(history["gpus"][1]["util_gpu"], 37), 0);
  int64_t from = history["from_ms"].get<int64_t>();
  int before = points_at(history["gpus"][0]["util_gpu"], 37);

  StopDaemon();
  struct stat st {};
  ASSERT_EQ(::stat((fs::path(state_dir_) / "gpu-history").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Back without sampling: what was read before is still there, nothing new.
  Start({"--gpu-sample-period", "0"});
  json after = CallOk("gpu_history", {{"from_ms", from}, {"gpu", 0}});
  ASSERT_EQ(after["gpus"].size(), 1u);
  EXPECT_GE(points_at(after["gpus"][0]["util_gpu"], 37), before);
  // Bad input names the field; a GPU not on the box is NotFound.
  auto bad = Call("gpu_history", {{"points", 0}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("params.points"));
  auto missing = Call("gpu_history", {{"gpu", 9}});
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().message, HasSubstr("GPU 9 does not exist"));
}

TEST_F(GpusTest, AHeldGpuAtZeroIsFlaggedIdleAndUncorrectedEccPastTheLimitTakesItOut) {
  WriteNvml({{"gpus", {Gpu(0), Gpu(1)}}});
  Start({"--gpu-sample-period", "0.1", "--gpu-idle-after", "1", "--gpu-ecc-limit", "2"});
  json role = {{"name", "w"}, {"entrypoint", "sleep"}, {"args", {"300"}}, {"resource", {{"gpu", 1}}}};
  std::string h = Run(App("i", {role}));
  int held = GpuOf(h);
  ASSERT_GE(held, 0);
  int other = 1 - held;
  json reply = GpusWhen([&](const json& r) { return r["gpus"][held].contains("idle_since_ms"); });
  ASSERT_TRUE(reply["gpus"][held].contains("idle_since_ms")) << reply.dump();
  EXPECT_FALSE(reply["gpus"][other].contains("idle_since_ms")) << "a free GPU is not idle: nobody wastes it";
  Output table = Torchx("gpus");
  EXPECT_THAT(table.out, HasSubstr("idle for ")) << table.out;
  // Busy again: no longer flagged.
  json gpus = {Gpu(0), Gpu(1)};
  gpus[held]["util_gpu"] = 60;
  WriteNvml({{"gpus", gpus}});
  reply = GpusWhen([&](const json& r) { return !r["gpus"][held].contains("idle_since_ms"); });
  EXPECT_FALSE(reply["gpus"][held].contains("idle_since_ms"));

  // The page cannot drain a GPU with a GET.
  HttpTarget ui{(fs::path(socket_).parent_path() / "ui.sock").string()};
  auto get = HttpGet(ui, "/api/gpus?params=%7B%22drain%22%3A0%7D", {}, "localhost");
  EXPECT_EQ(get.status, 403) << get.body;
  EXPECT_EQ(CallOk("queue", json::object())["gpus"][0]["usable"], true);
  // The timeline shows the app on its GPU, still held.
  json timeline = CallOk("gpu_timeline", json::object());
  ASSERT_EQ(timeline["intervals"].size(), 1u) << timeline.dump();
  EXPECT_EQ(timeline["intervals"][0]["gpu"], held);
  EXPECT_EQ(timeline["intervals"][0]["app_handle"], h);
  EXPECT_EQ(timeline["intervals"][0]["held"], true);

  // One uncorrected ECC error is under the limit of 2; the second takes it out.
  gpus[held]["ecc_uncorrected"] = 1;
  WriteNvml({{"gpus", gpus}});
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(WaitUntil([&] { return Status(h)["state"] == "RUNNING"; }));  // PENDING only until it runs
  gpus[held]["ecc_uncorrected"] = 2;
  WriteNvml({{"gpus", gpus}});
  json done = Wait(h);
  EXPECT_EQ(done["state"], "FAILED");
  EXPECT_THAT(done["msg"].get<std::string>(), HasSubstr("GPU " + std::to_string(held) + " (GPU-0000000" +
                                                        std::to_string(held) + ") reported 2 uncorrected ECC errors (the limit is 2)"));
  EXPECT_EQ(CallOk("gpus", json::object())["gpus"][held]["health"], "unhealthy");
  timeline = CallOk("gpu_timeline", json::object());
  EXPECT_EQ(timeline["intervals"][0]["held"], false);
}

TEST_F(GpusTest, EachMigInstanceIsADeviceOfItsOwnHandedOutByItsUuid) {
  // GPU 1 is in MIG mode with two instances: the box has three devices.
  json mig = Gpu(1);
  mig["mig"] = {{{"uuid", "MIG-aaaaaaaa-0000-0000-0000-000000000001"}, {"memory_total_mb", 9728}, {"memory_used_mb", 0}},
                {{"uuid", "MIG-aaaaaaaa-0000-0000-0000-000000000002"}, {"memory_total_mb", 9728}, {"memory_used_mb", 0}}};
  WriteNvml({{"gpus", {Gpu(0), mig}}});
  Start({"--gpu-sample-period", "0.1"});
  json queue = CallOk("queue", json::object());
  ASSERT_EQ(queue["gpus"].size(), 3u) << queue.dump();
  EXPECT_EQ(queue["capacity"]["gpu"], 3);
  // Three replicas of one GPU each: one per device, a MIG one named by its UUID.
  std::string out = (dir_ / "cvd").string();
  json role = {{"name", "w"}, {"entrypoint", "sh"}, {"num_replicas", 3},
               {"args", {"-c", "echo \"$$CUDA_VISIBLE_DEVICES\" > " + out + ".${replica_id}; sleep 300"}},
               {"resource", {{"gpu", 1}}}};
  std::string h = Run(App("m", {role}));
  std::set<std::string> seen;
  ASSERT_TRUE(WaitUntil([&] {
    seen.clear();
    for (int r = 0; r < 3; ++r) {
      std::string v = ReadFile(out + "." + std::to_string(r));
      if (v.empty()) return false;
      seen.insert(v.substr(0, v.find('\n')));
    }
    return true;
  }));
  EXPECT_EQ(seen, (std::set<std::string>{"0", "MIG-aaaaaaaa-0000-0000-0000-000000000001",
                                         "MIG-aaaaaaaa-0000-0000-0000-000000000002"}));
  json gpus = GpusWhen([](const json& r) { return r["sampling"].contains("sampled_ms"); });
  ASSERT_EQ(gpus["gpus"].size(), 3u);
  EXPECT_FALSE(gpus["gpus"][0].contains("mig_parent"));
  EXPECT_EQ(gpus["gpus"][1]["mig_parent"], 1);
  EXPECT_EQ(gpus["gpus"][2]["uuid"], "MIG-aaaaaaaa-0000-0000-0000-000000000002");
  EXPECT_EQ(gpus["gpus"][2]["memory_total_mb"], 9728);
  EXPECT_EQ(gpus["gpus"][2]["temperature_c"], 31) << "the whole GPU's";
  EXPECT_TRUE(gpus["gpus"][2]["util_gpu"].is_null()) << "NVML gives no utilization per MIG instance";
  EXPECT_EQ(gpus["gpus"][2]["held_by"]["app_handle"], h);
  EXPECT_THAT(Torchx("gpus").out, HasSubstr("2 (GPU 1 MIG)"));
  // An XID on the whole GPU loses both of its instances.
  WriteNvml({{"gpus", {Gpu(0), mig}}, {"xids", {{{"gpu", 1}, {"xid", 79}}}}});
  json done = Wait(h);
  EXPECT_EQ(done["state"], "FAILED");
  json after = CallOk("queue", json::object());
  EXPECT_EQ(after["gpus"][1]["usable"], false);
  EXPECT_EQ(after["gpus"][2]["usable"], false);
  EXPECT_EQ(after["gpus"][0]["usable"], true);
}

TEST_F(GpusTest, AGpuOutOfServiceStaysOutAcrossARestartUntilUndrained) {
  WriteNvml({{"gpus", {Gpu(0), Gpu(1)}}});
  Start({"--gpu-sample-period", "0"});
  ASSERT_EQ(Torchx("gpus --drain 1").exit_code, 0);
  StopDaemon();
  Start({"--gpu-sample-period", "0"});
  json queue = CallOk("queue", json::object());
  EXPECT_EQ(queue["gpus"][1]["usable"], false);
  EXPECT_THAT(queue["gpus"][1]["unusable"].get<std::string>(), HasSubstr("drained by "));
  EXPECT_EQ(queue["capacity"]["gpu"], 1);
  struct stat st {};
  ASSERT_EQ(::stat((fs::path(state_dir_) / "gpu-service.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Back in service, and still after the next restart.
  ASSERT_EQ(Torchx("gpus --undrain 1").exit_code, 0);
  StopDaemon();
  Start({"--gpu-sample-period", "0"});
  EXPECT_EQ(CallOk("queue", json::object())["gpus"][1]["usable"], true);
}

}  // namespace
}  // namespace torchxd::testing
