// torchxd-shim and its spec: no value can break out of a field, and the shim
// runs nothing unless it could take exactly the credentials the spec names.
// The forged specs are fed to the real static shim over its fd 3.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "supervisor/shim_protocol.h"

namespace torchxd::supervisor {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct ShimRun {
  std::string control;  // what the shim said on fd 3
  std::string out;      // the replica's stdout (the shim writes it to the log dir)
};

// The log directory of the last spec IdSpec made: open to every uid, since
// the replica's user (whoever the spec names) creates its files.
std::string g_log_dir;

std::string NewLogDir() {
  std::error_code ec;
  if (!g_log_dir.empty()) std::filesystem::remove_all(g_log_dir, ec);
  char tmpl[] = "/tmp/shim-test-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  ::chmod(dir.c_str(), 0777);
  return g_log_dir = dir;
}

std::string ReadAll(const std::string& path) {
  std::string out;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  char buf[4096];
  for (ssize_t n; fd.valid() && (n = ::read(fd.get(), buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Runs the shim with `spec` on its fd 3 and collects what it says until it
// ends. `close_write` false: our end stays open for writing (a daemon that
// stays), so only the shim ends the conversation.
ShimRun RunShim(const std::string& spec, bool close_write = true) {
  int ctl[2], out[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl), 0);
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, ctl[1], 3);
  std::string shim = TORCHXD_SHIM, parent = std::to_string(::getpid());
  char* argv[] = {shim.data(), parent.data(), nullptr};
  char path[] = "PATH=/usr/bin:/bin";
  char* env[] = {path, nullptr};
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, shim.c_str(), &actions, nullptr, argv, env), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(ctl[1]);
  ::close(out[1]);
  UniqueFd control(ctl[0]), output(out[0]);
  for (size_t off = 0; off < spec.size();) {
    ssize_t n = ::write(control.get(), spec.data() + off, spec.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  if (close_write) ::shutdown(control.get(), SHUT_WR);
  ShimRun r;
  char buf[4096];
  for (ssize_t n; (n = ::read(control.get(), buf, sizeof(buf))) > 0;) r.control.append(buf, static_cast<size_t>(n));
  for (ssize_t n; (n = ::read(output.get(), buf, sizeof(buf))) > 0;) r.out.append(buf, static_cast<size_t>(n));
  ::waitpid(pid, nullptr, 0);
  if (!g_log_dir.empty()) {
    r.out += ReadAll(g_log_dir + "/stdout.log");
    std::error_code ec;
    std::filesystem::remove_all(g_log_dir, ec);
    g_log_dir.clear();
  }
  return r;
}

ShimSpec IdSpec(unsigned uid, unsigned gid) {
  ShimSpec spec;
  spec.cwd = "/";
  spec.argv = {"/bin/sh", "-c", "echo $(id -u):$(id -g)"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.credentials.uid = uid;
  spec.credentials.gid = gid;
  spec.log_dir = NewLogDir();
  return spec;
}

TEST(ShimSpecTest, EveryValueRoundTripsWhateverItHolds) {
  ShimSpec spec = IdSpec(5001, 5002);
  spec.argv.push_back(std::string("a\0b\nuid 1\n0\n", 13));
  spec.env.push_back("X=\nend 0\n");
  spec.nofile = 1024;
  spec.credentials.groups = {5002, 27};
  std::string encoded = EncodeShimSpec(spec);
  ShimSpec back;
  std::string error;
  // NUL is refused at submit; here it only must not confuse the framing.
  EXPECT_EQ(DecodeShimSpec(encoded, back, error), ShimDecode::kInvalid);
  EXPECT_EQ(error, "NUL in an argument");
  spec.argv.back() = "a\nuid 0\n";
  encoded = EncodeShimSpec(spec);
  ASSERT_EQ(DecodeShimSpec(encoded, back, error), ShimDecode::kComplete) << error;
  EXPECT_EQ(back.argv, spec.argv);
  EXPECT_EQ(back.env, spec.env);
  EXPECT_EQ(back.credentials.uid, 5001u);
  EXPECT_EQ(back.credentials.groups, (std::vector<unsigned>{5002, 27}));
  EXPECT_EQ(back.nofile, 1024u);
  for (size_t cut = 0; cut < encoded.size(); ++cut) {
    ASSERT_EQ(DecodeShimSpec(encoded.substr(0, cut), back, error), ShimDecode::kNeedMore) << cut;
  }
  // A stop sent right behind the spec is the control stream's, where the shim asks for it.
  size_t used = 0;
  ASSERT_EQ(DecodeShimSpec(encoded + "stop 500\n", back, error, &used), ShimDecode::kComplete) << error;
  EXPECT_EQ(used, encoded.size());
  EXPECT_EQ(DecodeShimSpec(encoded + "stop 500\n", back, error), ShimDecode::kInvalid);
  EXPECT_EQ(error, "bytes after the end of the spec");
}

TEST(ShimSpecTest, ForgedSpecsAreRefused) {
  std::string good = EncodeShimSpec(IdSpec(0, 0));
  auto without = [&](const std::string& field) {
    std::string s = good;
    size_t at = s.find(field);
    size_t nl = s.find('\n', s.find('\n', at) + 1);
    return s.erase(at, nl - at + 1);
  };
  struct Case {
    std::string name, spec, error;
  };
  const Case cases[] = {
      {"the old NUL-separated form", std::string("/\0" "1\0" "id\0" "0\0" "0\0", 11), "malformed field header"},
      {"no uid", without("uid "), "spec without the credentials to run as"},
      {"no gid", without("gid "), "spec without the credentials to run as"},
      {"uid twice", std::string(good).replace(good.find("uid 1\n0\n"), 8, "uid 1\n0\nuid 1\n0\n"), "field uid given twice"},
      {"uid after the groups", good.substr(0, good.find("end ")) + "uid 1\n0\nend 0\n\n", "field uid out of order"},
      {"a length with a leading zero", std::string(good).replace(good.find("cwd 1\n/"), 7, "cwd 01\n/"), "malformed field length"},
      {"uid not a number", std::string(good).replace(good.find("uid 1\n0"), 7, "uid 2\n-1"), "invalid uid"},
      {"uid -1", std::string(good).replace(good.find("uid 1\n0"), 7, "uid 10\n4294967295"), "invalid uid"},
      {"a length that lies", std::string(good).replace(good.find("cwd 1\n/"), 7, "cwd 9\n/"), "does not end where"},
      {"unknown field", "torchxd-shim-spec 1\n2\nrun-as-root 1\n1\n", "unknown field run-as-root"},
      {"another version", "torchxd-shim-spec 1\n1\n", "not a version 2 spec"},
      {"a relative log directory", std::string(good).replace(good.find("log "), 4 + std::to_string(g_log_dir.size()).size() + 1 + g_log_dir.size(), "log 1\nx"), "invalid log directory"},
      {"keep other than 1", good.substr(0, good.find("end ")) + "keep 1\n0\nend 0\n\n", "invalid keep"},
      {"a nonce that is not hex", good.substr(0, good.find("end ")) + "nonce 2\nzz\nend 0\n\n", "invalid nonce"},
      {"bytes after the end", good + "x", "bytes after the end of the spec"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ShimSpec spec;
    std::string error;
    EXPECT_EQ(DecodeShimSpec(c.spec, spec, error), ShimDecode::kInvalid);
    EXPECT_THAT(error, HasSubstr(c.error));
  }
  std::error_code ec;
  std::filesystem::remove_all(g_log_dir, ec);
  g_log_dir.clear();
}

TEST(ShimTest, AForgedSpecRunsNothing) {
  // The injection that once ran replicas as root: fields smuggled in by NUL.
  ShimRun old_form = RunShim(std::string("/\0" "3\0" "/bin/sh\0" "-c\0" "echo ran\0" "0\0" "0\0", 28));
  EXPECT_THAT(old_form.control, StartsWith("spawn-failed 22 torchxd-shim refused the replica spec"));
  EXPECT_EQ(old_form.out, "");
  std::string no_credentials = EncodeShimSpec(IdSpec(0, 0));  // uid and gid fields cut out
  no_credentials.erase(no_credentials.find("uid "), no_credentials.find("end ") - no_credentials.find("uid "));
  ShimRun missing = RunShim(no_credentials);
  EXPECT_THAT(missing.control, HasSubstr("spec without the credentials to run as"));
  EXPECT_EQ(missing.out, "");
  ShimRun truncated = RunShim(EncodeShimSpec(IdSpec(0, 0)).substr(0, 40));
  EXPECT_THAT(truncated.control, HasSubstr("the spec ended early"));
  EXPECT_EQ(truncated.out, "");
}

// A control line that never ends (past the bound, no newline) costs the shim
// that connection, never its replica; a shorter unfinished one waits for more.
// Both come right behind the spec, where a stop sent at once would.
TEST(ShimTest, AControlLineThatNeverEndsDropsTheConnectionNotTheReplica) {
  auto spec = [] {
    ShimSpec s = IdSpec(::geteuid(), ::getegid());
    s.argv = {"/bin/sh", "-c", "sleep 0.3; echo done"};
    return EncodeShimSpec(s);
  };
  ShimRun endless = RunShim(spec() + std::string(kMaxControlLineBytes + 1, 'x'), /*close_write=*/false);
  EXPECT_THAT(endless.control, StartsWith("started "));
  EXPECT_THAT(endless.control, ::testing::Not(HasSubstr("exited"))) << "the connection was kept";
  EXPECT_EQ(endless.out, "done\n") << "the replica ran to its end";
  ShimRun unfinished = RunShim(spec() + std::string(100, 'x'), /*close_write=*/false);
  EXPECT_THAT(unfinished.control, HasSubstr("exited 0"));
  EXPECT_EQ(unfinished.out, "done\n");
}

TEST(ShimTest, TheReplicaRunsAsExactlyTheSpecsUser) {
  if (::geteuid() != 0) {
    ShimRun other = RunShim(EncodeShimSpec(IdSpec(::getuid() + 1, ::getgid())));
    EXPECT_THAT(other.control, HasSubstr("cannot become uid"));
    EXPECT_EQ(other.out, "");
    GTEST_SKIP() << "dropping to another user needs root";
  }
  ShimSpec alice = IdSpec(5001, 5001);
  alice.credentials.groups = {5001};
  ShimRun dropped = RunShim(EncodeShimSpec(alice));
  EXPECT_THAT(dropped.control, StartsWith("started "));
  EXPECT_EQ(dropped.out, "5001:5001\n");
  ShimRun root = RunShim(EncodeShimSpec(IdSpec(0, 0)));
  EXPECT_EQ(root.out, "0:0\n");  // root's own apps, as root asked
}

}  // namespace
}  // namespace torchxd::supervisor
