#include "daemon/gpu_service_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/unique_fd.h"

namespace torchxd::daemon {

using nlohmann::json;

namespace {

constexpr size_t kMaxFileBytes = 1 << 20;

}  // namespace

Result<std::map<std::string, std::string>> LoadOutOfService(const std::string& path) {
  std::map<std::string, std::string> out;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    if (errno == ENOENT) return out;
    return Fail(Error::Io("open " + path + ": " + std::strerror(errno)));
  }
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail(Error::Io("read " + path + ": " + std::strerror(errno)));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxFileBytes) return Fail(Error::InvalidArgument(path + ": larger than 1 MiB"));
  }
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) return Fail(Error::InvalidArgument(path + ": not a JSON object of GPU UUID to reason"));
  for (const auto& [uuid, why] : doc.items()) {
    if (!why.is_string() || uuid.empty() || out.size() >= kMaxOutOfService) {
      return Fail(Error::InvalidArgument(path + ": `" + uuid + "` is not a GPU UUID with its reason"));
    }
    out[uuid] = why.get<std::string>();
  }
  return out;
}

Result<void> SaveOutOfService(const std::string& path, const std::map<std::string, std::string>& gpus) {
  std::string text = json(gpus).dump(2) + "\n";
  std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Fail(Error::Io("open " + tmp + ": " + std::strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail(Error::Io("write " + tmp + ": " + std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return Fail(Error::Io("fsync " + tmp + ": " + std::strerror(errno)));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Fail(Error::Io("rename " + tmp + ": " + std::strerror(errno)));
  return {};
}

}  // namespace torchxd::daemon
