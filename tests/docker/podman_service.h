// PodmanService: a private Docker-API engine for tests and bench/: podman's
// service (runc, cgroupfs, ulimits within the hard limits, file events
// logger from tests/docker/containers.conf; private --root/--runroot, vfs
// storage, a private network config dir) on a socket in `dir`, with a busybox
// image imported from busybox-static (no registry). Start() returns "" or why
// podman cannot run here.
//
// The service runs in its own network and mount namespaces: podman 4.3 keeps
// aardvark-dns state in the fixed /run/containers/networks and names bridges
// podmanN host-wide, so two suites on one machine (or one killed mid-test)
// would otherwise share and poison each other's container DNS. Here the
// bridges, veths, netns files and aardvark state live and die with the
// service. Everything after Start() therefore talks to the service's socket
// (RemoteCommand), never to podman's local mode.
#ifndef TORCHXD_TESTS_DOCKER_PODMAN_SERVICE_H_
#define TORCHXD_TESTS_DOCKER_PODMAN_SERVICE_H_

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/shell.h"

extern char** environ;

namespace torchxd::testing {

inline constexpr char kBusyboxImage[] = "localhost/torchxd-busybox:latest";

class PodmanService {
 public:
  std::filesystem::path dir;
  std::string socket;

  std::string Start(const std::filesystem::path& where) {
    namespace fs = std::filesystem;
    dir = where;
    fs::remove_all(dir);
    fs::create_directories(dir / "networks");
    for (const char* tool : {"/usr/bin/podman", "/usr/sbin/runc", "/bin/busybox"}) {
      std::error_code ec;
      if (!fs::exists(tool, ec)) return std::string(tool) + " is not installed (apt-get install podman runc busybox-static)";
    }
    std::ifstream base(TORCHXD_SOURCE_DIR "/tests/docker/containers.conf");
    std::ofstream conf(dir / "containers.conf");
    conf << base.rdbuf() << "\n[network]\nnetwork_backend = \"netavark\"\nnetwork_config_dir = \""
         << (dir / "networks").string() << "\"\n";
    conf.close();
    ::setenv("CONTAINERS_CONF", (dir / "containers.conf").c_str(), 1);
    std::string root = (dir / "rootfs").string();
    std::string build = "set -e; mkdir -p " + root + "/bin " + root + "/proc " + root + "/sys " + root + "/dev " +
                        root + "/etc " + root + "/tmp; cp /bin/busybox " + root +
                        "/bin/; for a in sh echo cat sleep true hostname nslookup ping env nc timeout [; do ln -sf busybox " +
                        root + "/bin/$a; done; tar -C " + root + " -c . | " + Command() + " import - " +
                        kBusyboxImage + " >/dev/null";
    Output imported = RunShell(build, (dir / "import.err").string());
    if (imported.exit_code != 0) return "podman cannot import an image here: " + imported.err.substr(0, 300);
    socket = (dir / "podman.sock").string();
    if (RunShell("command -v unshare && command -v setpriv && command -v ip", (dir / "tools.err").string())
            .exit_code != 0)
      return "unshare, setpriv or ip is missing (apt-get install util-linux iproute2)";
    std::string inside = "set -e; ip link set lo up; mkdir -p /run/containers/networks /run/netns; "
                         "mount -t tmpfs torchxd-test /run/containers/networks; mount -t tmpfs torchxd-test /run/netns; "
                         "exec " +
                         Command() + " system service --time=0 unix://" + socket;
    std::vector<std::string> argv = {"/bin/sh", "-c",
                                     // pdeathsig: a killed test takes its engine along
                                     "exec setpriv --pdeathsig TERM unshare --mount --net --propagation private sh -c " +
                                         Quote(inside) + " 2>" + Quote((dir / "service.log").string())};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (::posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, args.data(), environ) != 0) return "cannot spawn podman";
    // Answering, not only there: the file exists from bind(), a moment before listen().
    for (int i = 0; i < 300 && !Answers(socket); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!Answers(socket)) return "podman system service did not start: " + Slurp(dir / "service.log").substr(0, 300);
    // A trial container proves the runtime works here (cgroups, network).
    Output trial = RunShell(RemoteCommand() + " run --rm --network none " + kBusyboxImage + " true",
                            (dir / "trial.err").string());
    if (trial.exit_code != 0) return "podman cannot run a container here: " + trial.err.substr(0, 300);
    return "";
  }

  void Stop() {
    if (pid_ > 0) {
      RunShell(RemoteCommand() + " rm -af -t 0 >/dev/null", (dir / "rm.err").string());
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    RunShell(Command() + " system reset -f >/dev/null 2>&1 || true", (dir / "reset.err").string());
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  // Through the running service, inside its namespaces.
  std::string RemoteCommand() const { return "podman --remote --url unix://" + socket; }

  // Local mode: only before the service starts and after it stopped.
  std::string Command() const {
    return "podman --root " + Quote((dir / "root").string()) + " --runroot " + Quote((dir / "runroot").string()) +
           " --storage-driver vfs";
  }

 private:
  static bool Answers(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    struct sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  }
  static std::string Slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  pid_t pid_ = -1;
};

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_DOCKER_PODMAN_SERVICE_H_
