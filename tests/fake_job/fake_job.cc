// fake_job: a replica whose behaviour the test chooses (Nomad's mock driver
// idea). Actions run in the order given:
//   --pidfile F           append "<pid>\n" to F
//   --stdout TEXT         write TEXT and a newline to stdout   (--stderr likewise)
//   --print-env           write every NAME=VALUE to stdout
//   --print-fds           write "fds: 0 1 2 ..." (open descriptors) to stdout
//   --print-cwd           write "cwd: <dir>" to stdout
//   --args                write "args: a|b|c" (the remaining argv) to stdout
//   --ignore-term         ignore SIGTERM from now on
//   --note-term F         from now on a SIGTERM appends "term\n" to F and is otherwise ignored
//   --grandchild F        fork a setsid'd grandchild that ignores SIGTERM,
//                         sleeps forever and appends its pid to F
//   --lines N             write N numbered lines "line <i>" to stdout
//   --error-file MSG      write a torchelastic error.json ($TORCHELASTIC_ERROR_FILE)
//   --fail-until N F      exit 1 unless file F counts N earlier runs (increments it)
//   --fail-first-if A B F exit 1 on the first run (file F absent) when A == B
//   --interleave N        N rounds of "out <i>" on stdout and "err <i>" on stderr, each
//                         line written in two pieces
//   --no-newline TEXT     write TEXT to stdout without a newline
//   --big-line BYTES      write BYTES 'a's to stdout in 64 KiB writes, no newline
//   --binary BYTES        write BYTES bytes of 0..255 to stdout
//   --spew-mb N           write N MiB of '.'-filled 64 KiB lines to stdout
//   --sleep S             sleep S seconds (fractions allowed)
//   --exit N              exit with N now
//   --kill-self SIG       raise signal SIG
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

extern char** environ;

namespace {

void Sleep(double seconds) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - static_cast<double>(ts.tv_sec)) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void AppendPid(const char* file, pid_t pid) {
  FILE* f = fopen(file, "a");
  if (f) {
    fprintf(f, "%d\n", pid);
    fclose(f);
  }
}

const char* term_note_file = nullptr;

// Only async-signal-safe calls: it runs in a signal handler.
void NoteTerm(int) {
  int saved = errno;
  int fd = open(term_note_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    (void)!write(fd, "term\n", 5);
    close(fd);
  }
  errno = saved;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--pidfile") {
      AppendPid(next(), getpid());
    } else if (a == "--stdout") {
      printf("%s\n", next());
    } else if (a == "--stderr") {
      fprintf(stderr, "%s\n", next());
    } else if (a == "--print-env") {
      for (char** e = environ; *e; ++e) printf("%s\n", *e);
    } else if (a == "--print-fds") {
      std::string fds = "fds:";
      DIR* d = opendir("/proc/self/fd");
      int dir_fd = dirfd(d);
      for (dirent* ent; (ent = readdir(d)) != nullptr;) {
        if (ent->d_name[0] == '.' || atoi(ent->d_name) == dir_fd) continue;
        fds += std::string(" ") + ent->d_name;
      }
      closedir(d);
      printf("%s\n", fds.c_str());
    } else if (a == "--print-cwd") {
      char buf[4096];
      printf("cwd: %s\n", getcwd(buf, sizeof(buf)));
    } else if (a == "--args") {
      std::string out = "args:";
      for (int k = i + 1; k < argc; ++k) out += (k == i + 1 ? " " : "|") + std::string(argv[k]);
      printf("%s\n", out.c_str());
      break;
    } else if (a == "--ignore-term") {
      signal(SIGTERM, SIG_IGN);
    } else if (a == "--note-term") {
      term_note_file = next();
      signal(SIGTERM, NoteTerm);
    } else if (a == "--grandchild") {
      const char* file = next();
      if (fork() == 0) {
        setsid();
        signal(SIGTERM, SIG_IGN);
        AppendPid(file, getpid());
        for (;;) pause();
      }
    } else if (a == "--numbered") {
      // N numbered lines on each stream, spread over S seconds: "out <k>" and "err <k>".
      long n = atol(next());
      double seconds = atof(next());
      for (long k = 0; k < n; ++k) {
        std::string o = "out " + std::to_string(k) + "\n", e = "err " + std::to_string(k) + "\n";
        (void)!write(1, o.data(), o.size());
        (void)!write(2, e.data(), e.size());
        if (seconds > 0) Sleep(seconds / static_cast<double>(n));
      }
    } else if (a == "--lines") {
      long n = atol(next());
      for (long k = 0; k < n; ++k) printf("line %ld\n", k);
    } else if (a == "--error-file") {
      const char* path = getenv("TORCHELASTIC_ERROR_FILE");
      if (path) {
        std::ofstream(path) << R"({"message": {"message": ")" << next()
                            << R"(", "errorCode": 3, "extraInfo": {"timestamp": "1795344391"}}})";
      }
    } else if (a == "--fail-until") {
      long n = atol(next());
      const char* file = next();
      long count = 0;
      if (FILE* f = fopen(file, "r")) {
        if (fscanf(f, "%ld", &count) != 1) count = 0;
        fclose(f);
      }
      if (FILE* f = fopen(file, "w")) {
        fprintf(f, "%ld\n", count + 1);
        fclose(f);
      }
      if (count + 1 < n) return 1;
    } else if (a == "--fail-first-if") {
      std::string x = next(), y = next();
      const char* file = next();
      if (x == y && access(file, F_OK) != 0) {
        if (FILE* f = fopen(file, "w")) fclose(f);
        return 1;
      }
    } else if (a == "--interleave") {
      long n = atol(next());
      for (long k = 0; k < n; ++k) {
        std::string o = "out " + std::to_string(k), e = "err " + std::to_string(k);
        (void)!write(1, o.data(), 3);
        (void)!write(2, e.data(), 3);
        (void)!write(1, o.data() + 3, o.size() - 3);
        (void)!write(1, "\n", 1);
        (void)!write(2, e.data() + 3, e.size() - 3);
        (void)!write(2, "\n", 1);
      }
    } else if (a == "--no-newline") {
      const char* t = next();
      (void)!write(1, t, strlen(t));
    } else if (a == "--big-line" || a == "--spew-mb") {
      long total = atol(next()) * (a == "--spew-mb" ? 1048576L : 1L);
      std::string chunk(65536, a == "--big-line" ? 'a' : '.');
      if (a == "--spew-mb") chunk.back() = '\n';
      for (long done = 0; done < total;) {
        long n = std::min<long>(static_cast<long>(chunk.size()), total - done);
        ssize_t w = write(1, chunk.data(), static_cast<size_t>(n));
        if (w <= 0) return 9;
        done += w;
      }
    } else if (a == "--binary") {
      long n = atol(next());
      std::string bytes;
      for (long k = 0; k < n; ++k) bytes += static_cast<char>(k % 256);
      (void)!write(1, bytes.data(), bytes.size());
    } else if (a == "--sleep") {
      Sleep(atof(next()));
    } else if (a == "--exit") {
      return atoi(next());
    } else if (a == "--kill-self") {
      raise(atoi(next()));
    }
  }
  return 0;
}
