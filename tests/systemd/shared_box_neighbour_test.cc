// The hostile neighbour on a shared box: alice's distributed job beside
// everything bob and erin may do to the daemon at once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/client.h"
#include "tests/systemd/shared_box.h"

namespace torchxd::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Whether something listens on 127.0.0.1:`port`.
bool Listens(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// A page stream opened with `token` on the TCP listener and never read.
int OpenPageStream(int port, const std::string& token) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  int small = 4096;  // and a small window: what it does not read piles up in the daemon
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  std::string head = "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                     "\r\nAuthorization: token " + token + "\r\n\r\n";
  (void)!::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  return fd;
}

// The hostile neighbour, all at once: while alice runs a 2-node dist.ddp job
// and follows its logs, bob holds every connection he may, fills the cache,
// crash-loops 64 replicas, starts 256 replicas at once each with a 100 KiB
// environment, fills his queue with apps waiting for the GPU he holds, binds
// alice's rendezvous port before her job starts, and floods the logs past
// the box's log budget; erin opens page streams she never reads, writes a
// 2 GiB log index, and stops and kills her replicas' shims. Alice's job
// succeeds with every log line once (on another port), her finished app's
// logs stay, and her status stays quick.
SHARED_BOX_TEST(AHostileNeighbourLeavesAUsersDistributedJobAlone) {
  SHARED_BOX_DIR(t);
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-torch is not installed (/usr/bin/python3 -c 'import torch' failed)";
  }
  SharedBox box(t);
  ASSERT_TRUE(box.MakeUsers());
  std::ofstream(t / "gpu.json") << R"({"gpus": [{"index": 0, "uuid": "GPU-0"}]})";
  ASSERT_TRUE(box.Start({"--ui-listen", "127.0.0.1:0", "--cache-size", "40", "--gpu-topology",
                         (t / "gpu.json").string(), "--log-max-total", "4M", "--max-pending-per-user", "30"}));
  auto earlier = box.As("alice", "run --wait utils.echo --msg earlier");
  ASSERT_EQ(earlier.exit_code, 0) << earlier.err;
  fs::copy_file(fs::path(TORCHXD_SOURCE_DIR) / "examples/train.py", box.Home("alice") / "train.py");
  ASSERT_EQ(::chown((box.Home("alice") / "train.py").c_str(), box.Uid("alice"), box.Uid("alice")), 0);
  std::ofstream(box.Home("bob") / "storm.json")
      << R"({"name": "storm", "roles": [{"name": "r", "entrypoint": "/bin/false", "num_replicas": 64,
                                          "max_retries": 1000, "retry_policy": "REPLICA"}]})";
  ASSERT_EQ(::chown((box.Home("bob") / "storm.json").c_str(), box.Uid("bob"), box.Uid("bob")), 0);

  // The neighbours first: bob's apps, then every connection he may hold.
  auto storm = box.As("bob", "run -d -cfg restart_backoff=0.1,restart_backoff_max=0.1 ./storm.json");
  ASSERT_EQ(storm.exit_code, 0) << storm.err;
  for (int i = 0; i < 25; ++i) box.As("bob", "run -d utils.sh true");
  // A spawn storm whose environment times its replicas is 25 MiB (an argument holds at most 128 KiB).
  auto wide = box.As("bob", "run -d utils.sh --num_replicas 256 --env WIDE=" + std::string(100 << 10, 'w') + " sleep 120");
  EXPECT_EQ(wide.exit_code, 0) << wide.err.substr(0, 2000);
  // The GPU, then a queue of apps waiting for it, until bob's bound refuses more.
  auto gpu = box.As("bob", "run -d utils.sh --gpu 1 sleep 300");
  EXPECT_EQ(gpu.exit_code, 0) << gpu.err;
  int refused = 0;
  for (int i = 0; i < 32; ++i) {
    auto queued = box.As("bob", "run -d utils.sh --gpu 1 --env PAD=" + std::string(64 << 10, 'p') + " true");
    refused += queued.exit_code != 0 && queued.err.find("--max-pending-per-user 30") != std::string::npos;
  }
  EXPECT_GE(refused, 1) << "bob's queue was never full: this scenario proves nothing of it";
  // His logs: each app's over his share of the 4 MiB once it ends.
  for (int i = 0; i < 3; ++i) box.As("bob", "run -d utils.sh -- seq 1 400000");
  auto held = box.Hold("bob", 80);
  EXPECT_EQ(held.accepted, 64);
  auto ui = nlohmann::json::parse(box.As("erin", "ui --json").out);
  int port = std::stoi(ui["url"].get<std::string>().substr(17));
  std::vector<int> streams;
  for (int i = 0; i < 20; ++i) streams.push_back(OpenPageStream(port, ui["token"].get<std::string>()));
  auto idx = box.As("erin", "run --wait utils.sh sh -c 'echo x; truncate -s 2G \"$(dirname $TORCHELASTIC_ERROR_FILE)/combined.idx\"'");
  std::string idx_handle = SharedBox::HandleOf(idx);
  auto stopped = box.As("erin", "run -d utils.sh sh -c 'kill -STOP $PPID; sleep 300'");
  auto killed = box.As("erin", "run -d utils.sh sh -c 'sleep 300 & kill -9 $PPID; wait'");

  // Alice's job, followed as it runs.
  // Its own rendezvous port, not TorchX's 29500, which the suite's other jobs
  // use at the same time: daemons claim what they hand out, but a process no
  // daemon started can still bind a port between a probe and torchrun's bind.
  int rdzv_port = 29600 + static_cast<int>(::getpid() % 800);
  // Taken by bob first: the daemon hands alice's job another free port.
  box.Sh("bob", "/usr/bin/python3 -c 'import socket,time; s=socket.socket(); s.bind((\"0.0.0.0\", " +
                    std::to_string(rdzv_port) + ")); s.listen(); time.sleep(300)' >/dev/null 2>&1 &");
  bool squatted = false;
  for (int i = 0; i < 500 && !squatted; ++i) {
    squatted = Listens(rdzv_port);
    if (!squatted) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(squatted) << "bob's listener never bound " << rdzv_port;
  auto run = box.As("alice", "run -d dist.ddp -j 2x1 --rdzv_port " + std::to_string(rdzv_port) +
                                 " --tee 1 --env PET_REDIRECTS=1 --script " +
                                 (box.Home("alice") / "train.py").string() + " -- --steps 30");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string h = SharedBox::HandleOf(run);
  // Both in the background (no thread here: the measuring child below is forked).
  std::string torchx = std::string(TORCHX_BIN) + " --socket " + box.socket();
  box.Sh("alice", torchx + " log -t " + h + " > followed.txt 2>&1 &");
  box.Sh("erin", "for i in $(seq 20); do " + torchx + " log " + idx_handle + " >/dev/null 2>&1; done &");
  // Alice's status until the job ends, measured by a client as quick to be
  // scheduled as the daemon (both at the unit's Nice=-5): what the busy CPUs do
  // to her own shell is not the daemon's to answer for.
  std::string report = (box.Home("alice") / "status.txt").string();
  std::string socket = box.socket();
  int code = box.AsUserProcess("alice", [&] {
    std::vector<double> ms;
    std::string state;
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    while (std::chrono::steady_clock::now() < end) {
      auto client = DaemonClient::Connect(socket);
      if (!client) return 2;
      auto t0 = std::chrono::steady_clock::now();
      auto st = client->Call("status", {{"app_handle", h}});
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!st) return 3;
      state = (*st)["state"].get<std::string>();
      // Until the job ends, and for at least 30 calls: a job that ends before
      // the first call (busy cores delay this child) still gets a measurement
      // of the neighbour's load, which goes on.
      if ((state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED") && ms.size() >= 30) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::sort(ms.begin(), ms.end());
    std::ofstream(report) << state << " " << ms.size() << " " << ms[ms.size() / 2] << " "
                          << ms[std::min(ms.size() - 1, ms.size() * 99 / 100)] << "\n";
    return 0;
  }, -5);
  ASSERT_EQ(code, 0);
  Output followed;
  for (int i = 0; i < 300 && followed.out.find("step 29 ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    followed.out = SharedBox::ReadAll(box.Home("alice") / "followed.txt");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the follower's last lines
  followed.out = SharedBox::ReadAll(box.Home("alice") / "followed.txt");
  std::ifstream in(report);
  std::string state;
  size_t calls = 0;
  double median = 0, p99 = 0;
  in >> state >> calls >> median >> p99;
  std::cout << "measured: alice's status during the scenario: " << calls << " calls, median " << median << " ms, p99 " << p99
            << " ms\n";
  EXPECT_EQ(state, "SUCCEEDED") << box.As("alice", "log " + h).out;
  EXPECT_GT(calls, 20u);
  // The target is 50 ms, and bench/ reports the figures. Beside the rest of
  // the suite on 2 cores the p99 was once 1,040 ms (median 6 ms) while the
  // container tests flooded the disk: sqlite's checkpoints fsynced on the
  // loop (75-165 ms each under a `dd` beside it, once a second with bob's
  // restarts). They run on a thread of their own now. The test holds what no
  // scheduler explains: before, the index stalled every client for seconds
  // and each restart rewrote the whole app.
#if defined(__SANITIZE_ADDRESS__)
  const double bound_ms = 1000;  // the sanitizer build makes every call 2-3 times slower
#else
  const double bound_ms = 500;
#endif
  EXPECT_LT(p99, bound_ms);
  int once = 0;
  for (int step = 0; step < 30; ++step) {
    // Rank 0 prints it, on whichever replica the rendezvous made rank 0; --tee adds "[0]:".
    std::string line = "]:step " + std::to_string(step) + " loss ";
    size_t first = followed.out.find(line);
    once += first != std::string::npos && followed.out.find(line, first + 1) == std::string::npos;
  }
  EXPECT_EQ(once, 30) << "every step's line exactly once:\n" << followed.out;
  auto still = box.As("alice", "log " + SharedBox::HandleOf(earlier));
  EXPECT_EQ(still.exit_code, 0) << "bob's log flood evicted alice's logs: " << still.err;
  EXPECT_THAT(still.out, HasSubstr("earlier"));
  // What the neighbours did ended no worse than this for them: the stopped
  // and killed shims' replicas are gone or go with a cancel.
  EXPECT_THAT(box.As("erin", "status " + SharedBox::HandleOf(killed)).out, HasSubstr("FAILED"));
  EXPECT_EQ(box.Root("cancel " + SharedBox::HandleOf(stopped)).exit_code, 0);
  EXPECT_EQ(box.Root("cancel " + SharedBox::HandleOf(storm)).exit_code, 0);
  EXPECT_EQ(box.Root("cancel " + SharedBox::HandleOf(wide)).exit_code, 0);
  EXPECT_EQ(box.Root("cancel " + SharedBox::HandleOf(gpu)).exit_code, 0);
  box.Sh("bob", "pkill -u bob -f 'import socket,time' || true");
  for (int fd : streams) ::close(fd);
  SharedBox::Release(held);
}

}  // namespace
}  // namespace torchxd::testing
