// The reflector and the HTTP client on a private loop against the fake
// kube-apiserver: list, watch, resume after a drop without relisting, relist
// on both kinds of expiry; cancel from inside a stream; no handle left.
#include "k8sbridge/reflector.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "k8sbridge/job_tracker.h"
#include "tests/k8sbridge/fake_apiserver.h"
#include "tests/supervisor/fake_clock.h"

namespace torchxd::k8sbridge {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

class LoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uv_loop_init(&loop_);
    dir_ = fs::temp_directory_path() / ("txr_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ASSERT_TRUE(fake_.Start(dir_, "", ""));
    auto http = net::HttpClient::Create(&loop_);
    ASSERT_TRUE(http.has_value()) << http.error().message;
    http_ = std::move(*http);
    KubeConfig config;
    config.server = fake_.url();
    api_ = std::make_unique<KubeApi>(http_.get(), config);
  }
  void TearDown() override {
    api_.reset();
    http_.reset();
    uv_run(&loop_, UV_RUN_DEFAULT);  // close callbacks
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
    fs::remove_all(dir_);
  }
  bool RunUntil(const std::function<bool()>& done, double seconds = 10) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  void CreateJob(const std::string& name) {
    json job = {{"apiVersion", "batch.volcano.sh/v1alpha1"},
                {"kind", "Job"},
                {"metadata", {{"name", name}, {"labels", {{"app.kubernetes.io/managed-by", "torchx.pytorch.org"}}}}},
                {"spec", {{"queue", "default"}, {"tasks", json::array()}}}};
    std::string out;
    ASSERT_EQ(fake_.Request("POST", JobsPath("team"), job.dump(), &out), 201) << out;
  }

  // A started reflector of the torchx Jobs in namespace team, retrying fast.
  std::unique_ptr<Reflector> WatchJobs(ReflectorCallbacks cb) {
    ReflectorOptions fast;
    fast.backoff_initial_seconds = 0.05;
    auto r = std::make_unique<Reflector>(&loop_, api_.get(), JobsPath("team"),
                                         "app.kubernetes.io/managed-by=torchx.pytorch.org", std::move(cb), fast);
    r->Start();
    return r;
  }

  uv_loop_t loop_;
  fs::path dir_;
  testing::FakeApiServer fake_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<KubeApi> api_;
};

TEST_F(LoopTest, ReflectorResumesAfterADropAndRelistsOnEitherExpiry) {
  CreateJob("a");
  std::vector<std::string> events;
  size_t listed = 0;
  ReflectorCallbacks cb;
  cb.on_list = [&](const std::vector<json>& items) { listed = items.size(); };
  cb.on_event = [&](const std::string& type, const json& obj) {
    events.push_back(type + " " + obj["metadata"].value("name", "") + " " +
                     obj.value("status", json::object()).value("state", json::object()).value("phase", ""));
  };
  auto r = WatchJobs(cb);
  ASSERT_TRUE(RunUntil([&] { return r->lists() == 1; }));
  EXPECT_EQ(listed, 1u);
  ASSERT_EQ(fake_.Post("/fake/jobs/team/a/phase", {{"phase", "Running"}}), 200);
  ASSERT_TRUE(RunUntil([&] { return !events.empty(); }));
  EXPECT_EQ(events.back(), "MODIFIED a Running");

  int watches = fake_.State()["watch_starts"];
  ASSERT_EQ(fake_.Post("/fake/watches/drop"), 200);  // connection lost: resume, no relist
  // Expiry events reach only a live watch: wait for the new one.
  ASSERT_TRUE(RunUntil([&] { return fake_.State()["watch_starts"].get<int>() > watches; }));
  CreateJob("b");
  ASSERT_TRUE(RunUntil([&] { return events.size() == 2; }));
  EXPECT_EQ(events.back(), "ADDED b ");
  EXPECT_EQ(r->lists(), 1);

  ASSERT_EQ(fake_.Post("/fake/watches/expire", {{"how", "event"}}), 200);  // ERROR event, 410 inside
  ASSERT_TRUE(RunUntil([&] { return r->lists() == 2; }));
  EXPECT_EQ(listed, 2u);
  ASSERT_EQ(fake_.Post("/fake/jobs/team/a/phase", {{"phase", "Completed"}}), 200);  // the new watch is up
  ASSERT_TRUE(RunUntil([&] { return events.back() == "MODIFIED a Completed"; }));
  ASSERT_EQ(fake_.Post("/fake/watches/expire", {{"how", "http"}}), 200);  // plain HTTP 410
  ASSERT_TRUE(RunUntil([&] { return r->lists() == 3; }));
  ASSERT_EQ(fake_.Post("/fake/jobs/team/b/phase", {{"phase", "Completed"}}), 200);
  ASSERT_TRUE(RunUntil([&] { return events.back() == "MODIFIED b Completed"; }));
  r.reset();  // cancels its watch
}

// On fake time: a list that fails is retried after its backoff and not
// before (0.8 s, then 1.6 s, 3.2 s..., each up to 10% later), so an
// apiserver outage never meets a storm of lists.
TEST_F(LoopTest, AFailingListIsRetriedAfterItsBackoffAndNotBefore) {
  ASSERT_EQ(fake_.Post("/fake/outage", {{"seconds", 3600}}), 200);
  ::torchxd::testing::FakeClock clock;
  int failed = 0;
  ReflectorCallbacks cb;
  cb.on_error = [&](const Error&) { ++failed; };
  ReflectorOptions options;
  options.clock = &clock;
  auto r = std::make_unique<Reflector>(&loop_, api_.get(), JobsPath("team"), "", std::move(cb), options);
  r->Start();
  ASSERT_TRUE(RunUntil([&] { return failed == 1; }));
  double backoff_ms = 800;
  for (int attempt = 2; attempt <= 4; ++attempt) {
    clock.Advance(static_cast<uint64_t>(backoff_ms) - 1);
    RunUntil([] { return false; }, 0.2);  // an early retry would have failed by now
    EXPECT_EQ(failed, attempt - 1) << "retried before its backoff of " << backoff_ms << " ms";
    clock.Advance(static_cast<uint64_t>(backoff_ms * 0.1) + 2);
    ASSERT_TRUE(RunUntil([&] { return failed == attempt; })) << "not retried within 10% after " << backoff_ms << " ms";
    backoff_ms *= 2;
  }
  EXPECT_EQ(r->lists(), 0);
  r.reset();
}

TEST_F(LoopTest, AWatchThatOpenedEndsARowOfFailuresEvenWithoutEvents) {
  CreateJob("a");
  std::vector<std::string> events;
  ReflectorCallbacks cb;
  cb.on_event = [&](const std::string& type, const json& obj) { events.push_back(type + " " + obj["metadata"].value("name", "")); };
  auto r = WatchJobs(cb);
  ASSERT_TRUE(RunUntil([&] { return r->lists() == 1; }));
  // Two drops in a row, each of a watch the server had opened (no event came
  // between them): both are resumed, neither is taken for a broken watch.
  for (int drop = 0; drop < 2; ++drop) {
    int watches = fake_.State()["watch_starts"];
    ASSERT_EQ(fake_.Post("/fake/watches/drop"), 200);
    ASSERT_TRUE(RunUntil([&] { return fake_.State()["watch_starts"].get<int>() > watches; }));
  }
  CreateJob("b");
  ASSERT_TRUE(RunUntil([&] { return !events.empty(); }));
  EXPECT_EQ(events.back(), "ADDED b");
  EXPECT_EQ(r->lists(), 1) << "resumed from its resourceVersion, not relisted";
  r.reset();
}

// A server (or a proxy before it) that answers every watch 200 and ends it at
// once, empty, had the reflector open 819 watches in 1.3 s: it is backed off
// as a failure, and a server that keeps watches open again is watched as before.
TEST_F(LoopTest, AWatchTheServerEndsAtOnceIsBackedOffNotReopenedInALoop) {
  CreateJob("a");
  ::torchxd::testing::FakeClock clock;
  std::vector<std::string> events;
  ReflectorCallbacks cb;
  cb.on_event = [&](const std::string& type, const json& obj) { events.push_back(type + " " + obj["metadata"].value("name", "")); };
  ReflectorOptions options;
  options.clock = &clock;
  ASSERT_EQ(fake_.Post("/fake/watches/end-at-once", {{"on", true}}), 200);
  auto r = std::make_unique<Reflector>(&loop_, api_.get(), JobsPath("team"), "", std::move(cb), options);
  r->Start();
  ASSERT_TRUE(RunUntil([&] { return fake_.State()["watch_starts"].get<int>() >= 1; }));
  RunUntil([] { return false; }, 1.0);  // a second of the loop's time; the fake clock stands still
  int starts = fake_.State()["watch_starts"];
  EXPECT_EQ(starts, 1) << "watches opened again at once";
  ASSERT_EQ(fake_.Post("/fake/watches/end-at-once", {{"on", false}}), 200);
  clock.Advance(900);  // the first backoff (0.8 s, up to 10% more)
  ASSERT_TRUE(RunUntil([&] { return fake_.State()["watch_starts"].get<int>() == starts + 1; }));
  CreateJob("b");
  ASSERT_TRUE(RunUntil([&] { return !events.empty(); }));
  EXPECT_EQ(events.back(), "ADDED b");
  EXPECT_EQ(r->lists(), 1);
  r.reset();
}

TEST_F(LoopTest, ARelistHandsOverWhatWasDeletedMeanwhileAsDeleted) {
  CreateJob("a");
  CreateJob("b");
  std::vector<std::string> events;
  size_t listed = 0;
  ReflectorCallbacks cb;
  cb.on_list = [&](const std::vector<json>& items) { listed = items.size(); };
  cb.on_event = [&](const std::string& type, const json& obj) { events.push_back(type + " " + obj["metadata"].value("name", "")); };
  auto r = WatchJobs(cb);
  ASSERT_TRUE(RunUntil([&] { return r->lists() == 1; }));
  EXPECT_EQ(listed, 2u);
  EXPECT_EQ(r->known(), 2u);
  ASSERT_EQ(fake_.Post("/fake/jobs/team/b/vanish"), 200);  // no watch event tells of it
  ASSERT_EQ(fake_.Post("/fake/watches/expire", {{"how", "http"}}), 200);
  ASSERT_TRUE(RunUntil([&] { return r->lists() == 2; }));
  EXPECT_EQ(listed, 1u);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], "DELETED b") << "client-go's Replace: the relist's missing objects are deletions";
  EXPECT_EQ(r->known(), 1u);
  r.reset();
}

TEST_F(LoopTest, AStreamThatGetsNoAnswerFailsInsteadOfHangingForever) {
  // A server that takes the connection and never answers (or a half-open TCP).
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  net::HttpRequest r;
  r.url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/api/v1/namespaces/a/pods/b/log?follow=true";
  r.stream = true;
  r.answer_timeout_ms = 300;
  std::optional<Result<net::HttpResponse>> answer;
  http_->Start(r, [](std::string_view) {}, [&](Result<net::HttpResponse> a) { answer = std::move(a); });
  ASSERT_TRUE(RunUntil([&] { return answer.has_value(); }, 10));
  ASSERT_FALSE(answer->has_value());
  EXPECT_EQ(answer->error().code, ErrorCode::kTimeout);
  EXPECT_THAT(answer->error().message, HasSubstr("no answer within 0.3s"));
  EXPECT_EQ(http_->active(), 0u);
  ::close(fd);
}

TEST_F(LoopTest, HttpClientNamesWhatItCouldNotReachAndCancelsFromInsideAStream) {
  auto unreachable = net::HttpClient::Create(&loop_);
  ASSERT_TRUE(unreachable.has_value());
  std::optional<Result<net::HttpResponse>> answer;
  net::HttpRequest r;
  r.url = "http://127.0.0.1:1/nothing";
  (*unreachable)->Start(r, nullptr, [&](Result<net::HttpResponse> a) { answer = std::move(a); });
  ASSERT_TRUE(RunUntil([&] { return answer.has_value(); }));
  ASSERT_FALSE(answer->has_value());
  EXPECT_EQ(answer->error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(answer->error().message, HasSubstr("GET http://127.0.0.1:1/nothing"));
  unreachable->reset();

  CreateJob("c");
  bool done_called = false;
  int chunks = 0;
  net::HttpClient::RequestId id = 0;
  net::HttpRequest watch;
  watch.url = fake_.url() + JobsPath("team") + "?watch=1&resourceVersion=0";
  watch.stream = true;
  id = http_->Start(
      watch, [&](std::string_view) { ++chunks, http_->Cancel(id); },  // cancel while curl is calling us
      [&](Result<net::HttpResponse>) { done_called = true; });
  ASSERT_TRUE(RunUntil([&] { return chunks > 0 && http_->active() == 0; }));
  RunUntil([] { return false; }, 0.2);
  EXPECT_EQ(chunks, 1);
  EXPECT_FALSE(done_called) << "a cancelled request gets no callback";
}

// What a tracker tells its observer, as lines.
class RecordingObserver : public JobTrackerObserver {
 public:
  JobTracker* tracker = nullptr;
  std::vector<std::string> seen;
  void OnUnknownJob(const std::string& ns, const json& job) override {
    seen.push_back("unknown " + ns + ":" + job["metadata"].value("name", ""));
    TrackedJob t;
    t.ns = ns;
    t.name = job["metadata"].value("name", "");
    t.tasks = {{"w-0", {"w", 0}}, {"w-1", {"w", 1}}};
    tracker->Track(std::move(t));
    tracker->ReplayOrphans(ns + ":" + job["metadata"].value("name", ""));
  }
  void OnJob(TrackedJob& job, const JobView& view) override { seen.push_back("job " + job.id() + " " + view.phase); }
  void OnJobGone(TrackedJob& job) override { seen.push_back("gone " + job.id()); }
  void OnPod(TrackedJob& job, const std::string& key, const PodView& pod, bool new_attempt) override {
    seen.push_back("pod " + key + " attempt " + std::to_string(job.pods[key].attempt) + (new_attempt ? " new " : " ") +
                   std::string(core::AppStateName(pod.state)));
  }
  void OnPodGone(TrackedJob& job, const std::string& key, bool was_terminal) override {
    seen.push_back("pod gone " + key + " attempt " + std::to_string(job.pods[key].attempt) +
                   (was_terminal ? " (finished)" : ""));
  }
  void OnJobsListed(const std::string& ns, const std::set<std::string>&) override { seen.push_back("listed " + ns); }
  void OnWatchError(const std::string& ns, const Error& e) override { seen.push_back("error " + ns + " " + e.message); }
  bool Saw(const std::string& line) const { return std::find(seen.begin(), seen.end(), line) != seen.end(); }
};

TEST_F(LoopTest, TheTrackerRoutesJobsAndPodsToReplicasAndTheirAttempts) {
  json job = {{"apiVersion", "batch.volcano.sh/v1alpha1"},
              {"kind", "Job"},
              {"metadata", {{"name", "j"}, {"labels", {{"app.kubernetes.io/managed-by", "torchx.pytorch.org"}}}}},
              {"spec", {{"queue", "default"}, {"tasks", json::array()}}}};
  json labels = {{"metadata", {{"labels", {{"app.kubernetes.io/managed-by", "torchx.pytorch.org"}}}}}};
  for (const char* task : {"w-0", "w-1"}) {
    job["spec"]["tasks"].push_back({{"name", task}, {"replicas", 1}, {"template", labels}});
  }
  std::string out;
  ASSERT_EQ(fake_.Request("POST", JobsPath("team"), job.dump(), &out), 201) << out;
  RecordingObserver obs;
  ReflectorOptions fast;
  fast.backoff_initial_seconds = 0.05;
  auto tracker = std::make_unique<JobTracker>(&loop_, api_.get(), "app.kubernetes.io/managed-by=torchx.pytorch.org",
                                              fast, &obs);
  obs.tracker = tracker.get();
  tracker->Watch("team");
  ASSERT_TRUE(RunUntil([&] { return obs.Saw("listed team"); }));
  EXPECT_TRUE(obs.Saw("unknown team:j")) << "a torchx Job nobody tracked is offered to the observer";
  EXPECT_TRUE(tracker->Listed("team"));

  ASSERT_EQ(fake_.Post("/fake/jobs/team/j/phase", {{"phase", "Running"}}), 200);
  // The Jobs and the pods come on two watch streams: in either order.
  EXPECT_TRUE(RunUntil([&] { return obs.Saw("pod w/1 attempt 1 new RUNNING"); }));
  EXPECT_TRUE(RunUntil([&] { return obs.Saw("pod w/0 attempt 1 new RUNNING"); }));
  EXPECT_TRUE(RunUntil([&] { return obs.Saw("job team:j Running"); }));

  // Volcano replaces a pod (deletes it, makes another): gone, then the replica's next attempt.
  ASSERT_EQ(fake_.Post("/fake/pods/team/j-w-0-0/restart"), 200);
  ASSERT_TRUE(RunUntil([&] { return obs.Saw("pod w/0 attempt 2 new RUNNING"); }));
  EXPECT_TRUE(obs.Saw("pod gone w/0 attempt 1"));
  EXPECT_EQ(tracker->Pod("team:j", "w/0")->attempt, 2);
  // A relist finds both current pods: nothing is gone, no attempt is new.
  size_t before = obs.seen.size();
  ASSERT_EQ(fake_.Post("/fake/watches/expire", {{"how", "http"}}), 200);
  ASSERT_TRUE(RunUntil([&] { return obs.seen.size() >= before + 4; }));  // the Job, listed, two pods
  for (size_t i = before; i < obs.seen.size(); ++i) {
    EXPECT_EQ(obs.seen[i].find("gone"), std::string::npos) << obs.seen[i];
    EXPECT_EQ(obs.seen[i].find(" new "), std::string::npos) << obs.seen[i];
  }

  // The current pod deleted: gone, once.
  ASSERT_EQ(fake_.Post("/fake/pods/team/j-w-1-0/delete"), 200);
  ASSERT_TRUE(RunUntil([&] { return obs.Saw("pod gone w/1 attempt 1"); }));
  EXPECT_TRUE(tracker->Pod("team:j", "w/1")->terminal);

  // The Job deleted: every pod of it is finished before the observer hears.
  ASSERT_EQ(fake_.Request("DELETE", JobPath("team", "j"), "", &out), 200);
  ASSERT_TRUE(RunUntil([&] { return obs.Saw("gone team:j"); }));
  EXPECT_TRUE(tracker->Pod("team:j", "w/0")->terminal);
  tracker.reset();  // closes its reflectors
}

}  // namespace
}  // namespace torchxd::k8sbridge
