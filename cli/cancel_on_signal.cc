#include "cli/cancel_on_signal.h"

#include <pthread.h>
#include <unistd.h>

#include <cstring>
#include <iostream>

namespace torchxd::cli {
namespace {

void Say(const std::string& text) {
  std::string line = "torchx: " + text + "\n";
  for (size_t off = 0; off < line.size();) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

CancelOnSignal::CancelOnSignal(ConnectOptions connect, std::string handle, const CliContext& ctx)
    : connect_(std::move(connect)), handle_(std::move(handle)), ctx_(ctx) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGUSR1);  // Stop()'s wake-up
  pthread_sigmask(SIG_BLOCK, &set_, &old_mask_);
  watcher_ = std::thread([this] { Watch(); });
}

CancelOnSignal::~CancelOnSignal() { Stop(); }

int CancelOnSignal::Stop() {
  if (watcher_.joinable()) {
    stopping_ = true;
    pthread_kill(watcher_.native_handle(), SIGUSR1);
    watcher_.join();
    // A signal that arrived after the watcher left stays pending: take it here.
    sigset_t pending;
    sigpending(&pending);
    for (int sig : {SIGINT, SIGTERM}) {
      if (sigismember(&pending, sig) == 1 && received_ == 0) received_ = sig;
    }
    timespec zero{0, 0};
    while (sigtimedwait(&set_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  return received_;
}

void CancelOnSignal::Watch() {
  for (;;) {
    int sig = 0;
    if (sigwait(&set_, &sig) != 0) continue;
    if (sig == SIGUSR1) {
      if (stopping_) return;
      continue;
    }
    if (received_ != 0) {
      Say("stopped waiting for " + handle_ + " (its cancel was already sent)");
      ExitBySignal(sig);
    }
    received_ = sig;
    Say(std::string(sig == SIGINT ? "interrupted" : "terminated") + ": cancelling " + handle_ +
        " (Ctrl-C again to stop waiting)");
    auto client = ConnectToDaemon({connect_.socket, false}, ctx_);
    if (!client) {
      Say("could not cancel " + handle_ + ": " + client.error().message);
      continue;
    }
    auto done = client->Call("cancel", {{"app_handle", handle_}});
    if (!done) Say("could not cancel " + handle_ + ": " + done.error().message);
  }
}

void ExitBySignal(int sig) {
  std::cout.flush();
  std::cerr.flush();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);
}

}  // namespace torchxd::cli
