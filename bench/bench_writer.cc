// bench_writer: the output load for the capture benchmark (and its baseline).
//   bench_writer bulk BYTES        BYTES in 64 KiB writes (newline-terminated 64 KiB lines)
//   bench_writer lines N           N lines of 100 bytes ("%09d" + filler + '\n'), stdio-buffered
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  std::string mode = argv[1];
  long long n = atoll(argv[2]);
  if (mode == "bulk") {
    std::string chunk(65536, 'x');
    chunk.back() = '\n';
    for (long long done = 0; done < n;) {
      size_t len = static_cast<size_t>(std::min<long long>(static_cast<long long>(chunk.size()), n - done));
      ssize_t w = write(1, chunk.data(), len);
      if (w <= 0) return 1;
      done += w;
    }
    return 0;
  }
  char line[101];
  memset(line, 'y', sizeof(line));
  line[99] = '\n';
  for (long long i = 0; i < n; ++i) {
    snprintf(line, 10, "%09llu", static_cast<unsigned long long>(i) % 1000000000ULL);
    line[9] = ' ';
    fwrite(line, 1, 100, stdout);
  }
  return fflush(stdout) == 0 ? 0 : 1;
}
