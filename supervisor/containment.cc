#include "supervisor/containment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <charconv>
#include <cstring>
#include <string_view>
#include <fstream>
#include <vector>
#include <sstream>

namespace torchxd::supervisor {
namespace {

std::string ReadSmall(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

Result<void> WriteSmall(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Fail(Error::Io("open " + path + ": " + strerror(errno)));
  ssize_t n = ::write(fd, text.data(), text.size());
  int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Fail(Error::Io("write " + path + ": " + strerror(e)));
  return {};
}

// The value of `key` in a flat keyed file (cgroup.events, memory.events:
// "key value" lines); -1 when absent.
long long KeyValue(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.size() <= key.size() || line.compare(0, key.size(), key) != 0 || line[key.size()] != ' ') continue;
    long long v = 0;
    auto [ptr, ec] = std::from_chars(line.data() + key.size() + 1, line.data() + line.size(), v);
    return ec == std::errc() ? v : -1;
  }
  return -1;
}

// The cgroup2 mount point from /proc/self/mountinfo ("" when there is none).
std::string Cgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, dev, root, mount;
    if (fields >> id >> parent >> dev >> root >> mount) return mount;
  }
  return "";
}

// This process's group in the v2 hierarchy ("/..."), from /proc/self/cgroup.
std::string OwnGroup() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

bool MakeDir(const std::string& path) { return ::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST; }

}  // namespace

std::unique_ptr<Containment> Containment::ProcessGroups(std::string why) {
  std::unique_ptr<Containment> c(new Containment());
  c->why_not_ = std::move(why);
  return c;
}

std::unique_ptr<Containment> Containment::Discover(const std::string& id, const std::string& cgroup_root) {
  std::string mount = cgroup_root.empty() ? Cgroup2Mount() : cgroup_root;
  if (mount.empty()) return ProcessGroups("no cgroup v2 hierarchy is mounted");
  std::string own = cgroup_root.empty() ? OwnGroup() : "/";
  if (own.empty()) return ProcessGroups("this process is in no cgroup v2 group");
  // A daemon that re-executed itself (or a restarted one) is already in its leaf.
  if (own.size() > 7 && own.compare(own.size() - 7, 7, "/daemon") == 0) own = own.substr(0, own.size() - 7);
  if (own.empty()) own = "/";
  std::string subtree;
  bool controllers = false;
  std::string no_top;  // why root has no subtree at the top
  if (::geteuid() == 0) {
    // Root: a subtree of its own at the top of the hierarchy, outside any
    // service's group, so that it may enable controllers and a restarted
    // service (placed by its manager in its own group) never meets them.
    subtree = mount + "/torchxd-" + id;
    if (MakeDir(subtree)) {
      controllers = true;
    } else {
      no_top = "cannot make " + subtree + ": " + strerror(errno);
      subtree.clear();
    }
  }
  if (subtree.empty()) {
    // A user, or root where the top is not its (a container's cgroup
    // namespace): the group its service manager delegated (Delegate=yes, in
    // both units). The daemon moves into a leaf of it; without the
    // controllers, which its manager would have to place a restarted daemon
    // around (systemd 254's DelegateSubgroup=).
    std::string base = mount + own;
    if (own == "/" || ::access(base.c_str(), W_OK) != 0 || !MakeDir(base + "/daemon") ||
        !WriteSmall(base + "/daemon/cgroup.procs", std::to_string(::getpid()))) {
      return ProcessGroups((no_top.empty() ? "" : no_top + ", and ") + "its cgroup " + own +
                           " is not delegated to this user (a systemd unit with Delegate=yes makes it so)");
    }
    subtree = base;
  }
  if (::access((subtree + "/cgroup.kill").c_str(), F_OK) != 0 &&
      ::access((subtree + "/daemon/cgroup.kill").c_str(), F_OK) != 0) {
    // The top of a hierarchy has no cgroup.kill; a group made in it does, from Linux 5.14.
    std::string probe = subtree + "/probe-" + std::to_string(::getpid());
    bool has_kill = MakeDir(probe) && ::access((probe + "/cgroup.kill").c_str(), F_OK) == 0;
    ::rmdir(probe.c_str());
    if (!has_kill) return ProcessGroups("the kernel has no cgroup.kill (Linux 5.14 and later)");
  }
  std::unique_ptr<Containment> c(new Containment());
  c->subtree_ = subtree;
  c->spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  // Limits where the controllers reach the subtree (never on a hybrid host's controller-less v2).
  std::string available = controllers ? ReadSmall(subtree + "/cgroup.controllers") : "";
  for (const char* controller : {"memory", "cpu"}) {
    if (available.find(controller) == std::string::npos) continue;
    if (!WriteSmall(subtree + "/cgroup.subtree_control", std::string("+") + controller)) continue;
    (std::string(controller) == "memory" ? c->memory_ : c->cpu_) = true;
  }
  return c;
}

std::string Containment::Describe() const {
  if (!cgroups()) return "process groups (no cgroup v2 containment: " + why_not_ + "): " + kContainmentGap;
  std::string limits = memory_ && cpu_ ? "memMB and cpu enforced"
                       : memory_       ? "memMB enforced, cpu not (no cpu controller delegated)"
                       : cpu_          ? "cpu enforced, memMB not (no memory controller delegated)"
                                       : "memMB and cpu not enforced (no memory or cpu controller delegated)";
  return "cgroup v2 (" + subtree_ + "; " + limits + ")";
}

std::string Containment::TakeGroup(const std::string& name) const {
  if (!cgroups()) return "";
  if (kept_.empty()) return subtree_ + "/" + name;
  std::string group = std::move(kept_.back());
  kept_.pop_back();
  return group;
}

Result<void> Containment::Create(const std::string& group, const AttemptLimits& limits) const {
  if (!Owns(group)) return Fail(Error::Internal("not a group of this torchxd: " + group));
  if (::mkdir(group.c_str(), 0755) != 0 && errno != EEXIST) {
    return Fail(Error::Io("cannot make the replica's cgroup " + group + ": " + strerror(errno)));
  }
  if (memory_ && limits.mem_mb > 0) {
    if (auto ok = WriteSmall(group + "/memory.max", std::to_string(static_cast<long long>(limits.mem_mb) << 20)); !ok) {
      return Fail(ok.error());
    }
  }
  if (cpu_ && limits.cpu > 0) {
    if (auto ok = WriteSmall(group + "/cpu.max", std::to_string(limits.cpu * 100000LL) + " 100000"); !ok) {
      return Fail(ok.error());
    }
  }
  return {};
}

std::string Containment::MakeHostGroup() const {
  if (!cgroups()) return "";
  std::string group = subtree_ + "/h-" + std::to_string(::getpid()) + "-" + std::to_string(++hosts_made_);
  if (::mkdir(group.c_str(), 0755) != 0) return "";
  return group;
}

Result<void> Containment::Enter(const std::string& group, pid_t pid) const {
  return WriteSmall(group + "/cgroup.procs", std::to_string(pid));
}

void Containment::Kill(const std::string& group) const {
  std::string path = group + "/cgroup.kill";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid() && (errno == EMFILE || errno == ENFILE) && spare_.valid()) {
    spare_.reset();  // out of descriptors: the spare is given up for this one
    fd.reset(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  }
  if (fd.valid()) (void)!::write(fd.get(), "1", 1);
  fd.reset();
  if (!spare_.valid()) spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

bool Containment::Populated(const std::string& group) const {
  auto it = events_.find(group);
  if (it == events_.end()) {
    UniqueFd fd(::open((group + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC));
    // Gone (or never made); when it cannot be read (out of descriptors) a process may be in it.
    if (!fd.valid()) return errno != ENOENT;
    it = events_.emplace(group, std::move(fd)).first;
  }
  char buf[256];
  ssize_t n = ::pread(it->second.get(), buf, sizeof(buf), 0);
  if (n <= 0) {
    events_.erase(it);  // removed meanwhile
    return false;
  }
  return KeyValue(std::string_view(buf, static_cast<size_t>(n)), "populated") > 0;
}

bool Containment::OomKilled(const std::string& group) const {
  return KeyValue(ReadSmall(group + "/memory.events"), "oom_kill") > 0;
}

void Containment::Remove(const std::string& group) const {
  events_.erase(group);
  ::rmdir(group.c_str());
}

void Containment::Release(const std::string& group, const AttemptLimits& limits, bool killed) const {
  bool limited = (memory_ && limits.mem_mb > 0) || (cpu_ && limits.cpu > 0);
  if (killed || limited || kept_.size() >= kMaxKept || !Owns(group) || (memory_ && OomKilled(group))) return Remove(group);
  kept_.push_back(group);
}

bool Containment::Owns(const std::string& group) const {
  if (!cgroups() || group.size() <= subtree_.size() + 1 || group.compare(0, subtree_.size() + 1, subtree_ + "/") != 0) {
    return false;
  }
  std::string name = group.substr(subtree_.size() + 1);
  return name.find('/') == std::string::npos && name != "." && name != ".." && name != "daemon";
}

std::vector<std::string> Containment::GroupsNamed(const char* prefix) const {
  std::vector<std::string> out;
  DIR* d = cgroups() ? ::opendir(subtree_.c_str()) : nullptr;
  if (d == nullptr) return out;
  size_t n = std::strlen(prefix);
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_type == DT_DIR && std::strncmp(e->d_name, prefix, n) == 0) out.push_back(subtree_ + "/" + e->d_name);
  }
  ::closedir(d);
  return out;
}

void Containment::RemoveEmptyHostGroups() const {
  for (const auto& group : GroupsNamed("h-")) ::rmdir(group.c_str());  // fails while a host lives
}

void Containment::Sweep(const std::set<std::string>& keep) const {
  RemoveEmptyHostGroups();
  for (const auto& group : GroupsNamed("a-")) {
    if (keep.count(group) != 0 || std::find(kept_.begin(), kept_.end(), group) != kept_.end()) continue;
    if (Populated(group)) Kill(group);  // gone a moment later; removed then, or at the next start
    Remove(group);
  }
}

void Containment::RemoveSubtree(bool replicas_stopped) const {
  for (const auto& group : kept_) Remove(group);
  kept_.clear();
  // Each empty group goes. Once the replicas were stopped, those still in
  // use end a moment later (a host after its last attempt, a killed group's
  // processes), longer on a busy machine: they are waited for, a little,
  // not left behind. Replicas left running keep theirs.
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    size_t left = 0;
    for (const char* prefix : {"a-", "h-"}) {
      for (const auto& group : GroupsNamed(prefix)) {
        if (Populated(group)) {
          ++left;
        } else {
          Remove(group);
        }
      }
    }
    if (left == 0 || !replicas_stopped || std::chrono::steady_clock::now() >= give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (cgroups() && subtree_.find("/torchxd-") != std::string::npos) ::rmdir(subtree_.c_str());
}

}  // namespace torchxd::supervisor
