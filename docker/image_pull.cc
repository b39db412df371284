#include "docker/image_pull.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/json_parse.h"

namespace torchxd::docker {

using nlohmann::json;

void PullProgress::Feed(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    std::string_view piece = bytes.substr(0, nl);
    if (!skipping_) {
      if (partial_.size() + piece.size() > kMaxLineBytes) {
        partial_.clear();
        skipping_ = true;
      } else {
        partial_.append(piece);
      }
    }
    if (nl == std::string_view::npos) return;
    if (!skipping_) Line(partial_);
    partial_.clear();
    skipping_ = false;
    bytes.remove_prefix(nl + 1);
  }
}

void PullProgress::Finish() {
  if (!skipping_ && !partial_.empty()) Line(partial_);
  partial_.clear();
  skipping_ = false;
}

void PullProgress::Line(std::string_view line) {
  json j = core::ParseJsonOrDiscarded(line);
  if (!j.is_object()) return;
  if (auto e = j.find("error"); e != j.end() && error_.empty()) {
    error_ = e->is_string() ? e->get<std::string>() : e->dump();
    if (error_.empty()) error_ = "the engine reported an error";
    return;
  }
  auto id = j.find("id");
  auto status = j.find("status");
  if (id == j.end() || !id->is_string() || status == j.end() || !status->is_string()) return;
  const std::string& s = status->get_ref<const std::string&>();
  // Lines about the image itself ("Pulling from library/x", id = the tag) are no layer.
  if (s.rfind("Pulling from", 0) == 0 || s.rfind("Digest:", 0) == 0 || s.rfind("Status:", 0) == 0) return;
  auto it = layers_.find(id->get<std::string>());
  if (it == layers_.end()) {
    if (layers_.size() >= kMaxLayers) return;
    it = layers_.emplace(id->get<std::string>(), Layer{}).first;
  }
  Layer& layer = it->second;
  if (s == "Downloading") {
    const json& detail = j.value("progressDetail", json::object());
    if (detail.is_object()) {
      auto number = [&](const char* key) -> uint64_t {
        auto v = detail.find(key);
        return v != detail.end() && v->is_number_unsigned() ? v->get<uint64_t>() : 0;
      };
      layer.current = number("current");
      if (uint64_t t = number("total"); t > 0) layer.total = t;
    }
  } else if (s == "Download complete" || s == "Pull complete" || s == "Already exists") {
    layer.done = true;
    if (layer.total > 0) layer.current = layer.total;
  }
}

uint64_t PullProgress::current() const {
  uint64_t sum = 0;
  for (const auto& [id, l] : layers_) sum += std::min(l.current, l.total > 0 ? l.total : l.current);
  return sum;
}

uint64_t PullProgress::total() const {
  uint64_t sum = 0;
  for (const auto& [id, l] : layers_) sum += l.total;
  return sum;
}

size_t PullProgress::layers_done() const {
  size_t n = 0;
  for (const auto& [id, l] : layers_) n += l.done ? 1 : 0;
  return n;
}

std::string PullProgress::Summary() const {
  if (layers_.empty()) return "";
  std::string out;
  if (total() > 0) out = DecimalBytes(current()) + " of " + DecimalBytes(total()) + ", ";
  return out + std::to_string(layers_done()) + " of " + std::to_string(layers_.size()) +
         (layers_.size() == 1 ? " layer" : " layers") + " done";
}

std::string DecimalBytes(uint64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
  }
  return buf;
}

}  // namespace torchxd::docker
