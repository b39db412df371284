// PullProgress: what an engine's image pull stream (POST /images/create, one
// JSON object per line) says so far: bytes of each layer downloaded and to
// download, layers done, and the first error. Docker and podman's compat API
// write the same lines:
//   {"status":"Downloading","progressDetail":{"current":1,"total":9},"id":"a1"}
//   {"status":"Pull complete","id":"a1"}   {"error":"…","errorDetail":{…}}
// Input is the engine's: lines are bounded, layers too, and what is not
// understood is skipped.
//
// Thread contract: none (a value type).
#ifndef TORCHXD_DOCKER_IMAGE_PULL_H_
#define TORCHXD_DOCKER_IMAGE_PULL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace torchxd::docker {

class PullProgress {
 public:
  static constexpr size_t kMaxLineBytes = 64 * 1024;  // longer lines are skipped
  static constexpr size_t kMaxLayers = 512;

  void Feed(std::string_view bytes);
  // The last line, if the stream ended without a newline.
  void Finish();

  uint64_t current() const;  // bytes downloaded, all layers
  uint64_t total() const;    // bytes to download, of the layers whose size is known
  size_t layers() const { return layers_.size(); }
  size_t layers_done() const;
  const std::string& error() const { return error_; }
  // "340/1200 MB, 2 of 5 layers" (what is known so far; "" before anything).
  std::string Summary() const;

 private:
  struct Layer {
    uint64_t current = 0;
    uint64_t total = 0;
    bool done = false;
  };
  void Line(std::string_view line);

  std::map<std::string, Layer> layers_;
  std::string partial_;
  bool skipping_ = false;  // inside a line longer than kMaxLineBytes
  std::string error_;
};

// "1.2 GB", "340 MB", "12 kB": decimal units, as docker pull prints them.
std::string DecimalBytes(uint64_t bytes);

}  // namespace torchxd::docker

#endif  // TORCHXD_DOCKER_IMAGE_PULL_H_
