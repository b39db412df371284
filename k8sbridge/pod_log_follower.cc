#include "k8sbridge/pod_log_follower.h"

#include "core/text.h"

#include <cstdio>
#include <ctime>

#include "core/app_status.h"

namespace torchxd::k8sbridge {
namespace {
constexpr int64_t kReadTimeoutMs = 10000;  // a one-off read (no follow) never holds a `log` call longer
}  // namespace

std::pair<std::optional<int64_t>, std::string_view> SplitTimestamp(std::string_view line) {
  size_t space = line.find(' ');
  if (space == std::string_view::npos) return {core::ParseRfc3339Nanos(line), std::string_view()};
  auto ns = core::ParseRfc3339Nanos(line.substr(0, space));
  if (!ns) return {std::nullopt, line};
  return {ns, line.substr(space + 1)};
}

PodLogFollower::PodLogFollower(KubeApi* api, std::string ns, std::string pod, std::string container,
                               int64_t after_ns, LineFn on_line, EndFn on_end, bool follow)
    : api_(api), last_ns_(after_ns), on_line_(std::move(on_line)), on_end_(std::move(on_end)) {
  std::string query = follow ? "?follow=true&timestamps=true" : "?timestamps=true";
  if (!container.empty()) query += "&container=" + core::UrlEscape(container);
  if (after_ns > 0) {
    // sinceTime has second precision: ask from that second, skip what we have.
    int64_t ms = after_ns / 1000000;
    std::string since = core::FormatRfc3339Utc(ms - ms % 1000);
    query += "&sinceTime=" + core::UrlEscape(since);
  }
  request_ = api_->Stream(PodLogPath(ns, pod) + query, [this](std::string_view line) { OnLine(line); },
                          [this](long status, Result<void> result) {
                            request_ = 0;
                            auto end = std::move(on_end_);  // survives `this` being destroyed by it
                            end(status, std::move(result));
                          },
                          follow ? 0 : kReadTimeoutMs);
}

PodLogFollower::~PodLogFollower() {
  if (request_ != 0) api_->Cancel(request_);
}

void PodLogFollower::OnLine(std::string_view line) {
  auto [ns, text] = SplitTimestamp(line);
  if (ns) {
    if (*ns <= last_ns_) return;  // already stored
    last_ns_ = *ns;
  }
  std::string with_newline(text);
  with_newline += '\n';
  on_line_(ns.value_or(last_ns_), with_newline);
}

}  // namespace torchxd::k8sbridge
