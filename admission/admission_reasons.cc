// Why a pending app waits, in words: Admission::Reason, and Reasons for a
// queue's pending apps at once (what their reasons share made once).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "admission/admission.h"
#include "core/duration.h"

namespace torchxd::admission {

// What every pending app's reason shares at one moment, each part made once when first needed.
struct Admission::ReasonParts {
  const Admission& a;
  int64_t now_ms;
  std::optional<std::string> free_gpus, free_all, head_clause;
  std::optional<int64_t> shadow;

  const std::string& FreeText(const Resources& gang) {
    if (a.free_.gpu > 0 || gang.gpu > 0) {
      if (!free_gpus) free_gpus = std::to_string(a.free_.gpu) + " free";
      return *free_gpus;
    }
    if (!free_all) free_all = DescribeResources(a.free_) + " free";
    return *free_all;
  }
  int64_t Shadow() {
    if (!shadow) shadow = a.ShadowTime(now_ms);
    return *shadow;
  }
  // " (HEAD, ITS GANG reserved)" (the head exists).
  const std::string& HeadClause() {
    if (!head_clause) {
      const Pending& h = *a.pending_.at(a.head_);
      head_clause = " (" + h.demand.name + ", " + DescribeResources(h.gang) + " reserved)";
    }
    return *head_clause;
  }
};

std::string Admission::Reason(const std::string& key, int64_t now_ms, int ahead, bool shadow_clause) const {
  auto it = pending_.find(key);
  if (it == pending_.end()) return "";
  ReasonParts parts{*this, now_ms, {}, {}, {}, {}};
  return ReasonFor(*it->second, parts, ahead, shadow_clause);
}

std::vector<std::string> Admission::Reasons(const QueueView& view, size_t limit, int64_t now_ms) const {
  std::vector<std::string> out;
  out.reserve(std::min(limit, view.pending.size()));
  ReasonParts parts{*this, now_ms, {}, {}, {}, {}};
  for (size_t i = 0; i < view.pending.size() && i < limit; ++i) {
    out.push_back(ReasonFor(*view.pending[i].app_, parts, static_cast<int>(i), true));
  }
  return out;
}

std::string Admission::ReasonFor(const Pending& app, ReasonParts& parts, int ahead, bool shadow_clause) const {
  int64_t now_ms = parts.now_ms;
  const QueueState* q = QueueOf(app.demand.queue);
  if (q == nullptr) q = &states_.front();
  const std::string& qname = q->spec.name;
  const std::string& free_text = parts.FreeText(app.gang);
  if (app.demand.key == head_) {
    std::string gpus;
    for (int g : reserved_gpus_) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    std::string out = "next to start: waiting for " + DescribeResources(app.gang) + " in queue " + qname + ": " +
                      free_text +
                      (gpus.empty() ? std::string()
                                    : reserved_gpus_.size() == 1 ? "; GPU " + gpus + " is reserved for it"
                                                                 : "; GPUs " + gpus + " are reserved for it");
    if (int64_t shadow = parts.Shadow(); shadow_clause && shadow != kNoEnd) {
      out += "; starts within " + core::FormatDurationMs(shadow - now_ms) + " at the latest (max_duration of what it waits on)";
    }
    return out;
  }
  const Entry self = EntryOf(const_cast<Pending&>(app));
  if (std::string cap = CapBlock(self, *q); !cap.empty()) return "waiting: " + cap;
  if (ahead < 0) {
    UserShares shares = Shares();
    ahead = 0;
    for (const Entry& e : q->pending) {
      if (e.app != &app && (e.app->demand.key == head_ || Before(e, self, shares, now_ms))) ++ahead;
    }
  }
  std::string out = "waiting for ";
  out += DescribeResources(app.gang);
  out += " in queue ";
  out += qname;
  out += ": ";
  out += free_text;
  out += ", ";
  out += Plural(ahead, "app", "apps");
  out += " ahead";
  if (!head_.empty()) {
    out += parts.HeadClause();
    if (int64_t shadow = parts.Shadow(); shadow != kNoEnd && shadow > now_ms && app.demand.max_duration_ms == 0 &&
        app.gang.FitsIn(free_)) {
      out += "; with -cfg max_duration=" + core::FormatDurationMs(shadow - now_ms) + " or less it could start before it";
    }
  }
  return out;
}

}  // namespace torchxd::admission
