#include "admission/admission.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "admission/gpu_placement.h"

namespace torchxd::admission {
namespace {

constexpr int64_t kAgeStepMs = 3600 * 1000;  // +1 priority per hour waited
constexpr int kMaxAgeBonus = 24;

Result<int> PositiveInt(const std::string& key, const std::string& value, int min) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < min || v > 1000000) {
    return Fail(Error::InvalidArgument(key + "=" + value + ": expected a whole number >= " + std::to_string(min)));
  }
  return static_cast<int>(v);
}

}  // namespace

std::string Plural(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string DescribeResources(const Resources& r) {
  std::vector<std::string> parts;
  if (r.gpu != 0) parts.push_back(Plural(r.gpu, "GPU", "GPUs"));
  if (r.cpu != 0) parts.push_back(Plural(r.cpu, "CPU", "CPUs"));
  if (r.mem_mb != 0) parts.push_back(std::to_string(r.mem_mb) + " MB");
  if (parts.empty()) return "nothing";
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += ", " + parts[i];
  return out;
}

Result<void> SetQueueKey(QueueSpec& queue, const std::string& key, const std::string& value) {
  if (key == "weight") {
    auto w = PositiveInt(key, value, 1);
    if (!w) return Fail(w.error());
    queue.weight = *w;
  } else if (key == "max_gpus") {
    auto n = PositiveInt(key, value, 0);
    if (!n) return Fail(n.error());
    queue.max_gpus = *n;
  } else if (key == "max_gpus_per_user") {
    auto n = PositiveInt(key, value, 0);
    if (!n) return Fail(n.error());
    queue.max_gpus_per_user = *n;
  } else if (key == "max_priority") {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || v < kMinUserPriority || v > kMaxPriority) {
      return Fail(Error::InvalidArgument(key + "=" + value + ": expected a whole number between " +
                                         std::to_string(kMinUserPriority) + " and " + std::to_string(kMaxPriority)));
    }
    queue.max_priority = static_cast<int>(v);
  } else {
    return Fail(Error::InvalidArgument("unknown queue setting `" + key +
                                       "` (expected weight, max_gpus, max_gpus_per_user or max_priority)"));
  }
  return {};
}

Result<void> CheckPriority(int priority, bool privileged, const QueueSpec& queue) {
  int lo = privileged ? kMinPriority : kMinUserPriority;
  int hi = privileged ? kMaxPriority : queue.max_priority.value_or(kMaxUserPriority);
  if (priority >= lo && priority <= hi) return {};
  if (privileged || priority < lo) {
    return Fail(Error::InvalidArgument("Run option: priority, must be between " + std::to_string(lo) + " and " +
                                       std::to_string(hi) + ", but was: " + std::to_string(priority)));
  }
  return Fail(Error::InvalidArgument("Run option: priority, must be between " + std::to_string(lo) + " and " +
                                     std::to_string(hi) + " in queue " + queue.name + ", but was: " +
                                     std::to_string(priority) +
                                     " (a higher priority is for root and the admin group; a queue's max_priority "
                                     "lets everyone go up to it)"));
}

Result<QueueSpec> ParseQueueSpec(const std::string& text) {
  QueueSpec q;
  size_t colon = text.find(':');
  q.name = text.substr(0, colon);
  bool name_ok = !q.name.empty() && q.name.size() <= 63;
  for (char c : q.name) {
    name_ok = name_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
  }
  if (!name_ok) {
    return Fail(Error::InvalidArgument("queue name `" + q.name +
                                       "`: use 1 to 63 of a-z, 0-9, - and _ (as a Volcano queue name)"));
  }
  if (colon == std::string::npos) return q;
  std::string rest = text.substr(colon + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? rest.size() + 1 : comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return Fail(Error::InvalidArgument("queue " + q.name + ": `" + item + "` is not key=value"));
    }
    if (auto set = SetQueueKey(q, item.substr(0, eq), item.substr(eq + 1)); !set) {
      return Fail(Error::InvalidArgument("queue " + q.name + ": " + set.error().message));
    }
  }
  return q;
}

Admission::Admission(BoxCapacity box, std::vector<QueueSpec> queues) : box_(std::move(box)), queues_(std::move(queues)) {
  if (std::none_of(queues_.begin(), queues_.end(), [](const QueueSpec& q) { return q.name == "default"; })) {
    queues_.insert(queues_.begin(), QueueSpec{"default", 1, std::nullopt, std::nullopt, std::nullopt});
  }
  for (const QueueSpec& q : queues_) {
    QueueState state;
    state.spec = q;
    states_.push_back(std::move(state));
  }
  total_ = {box_.topology.UsableCount(), box_.cpu, box_.mem_mb};
  free_ = total_;
  gpu_holder_.assign(box_.topology.size(), "");
  reserved_mask_.assign(box_.topology.size(), false);
}

Admission::QueueState* Admission::QueueOf(const std::string& name) {
  for (auto& q : states_) {
    if (q.spec.name == name) return &q;
  }
  return nullptr;
}
const Admission::QueueState* Admission::QueueOf(const std::string& name) const {
  return const_cast<Admission*>(this)->QueueOf(name);
}

std::vector<size_t> Admission::GangReplicas(const AppDemand& app) const {
  std::vector<size_t> out;
  std::map<int, int> taken;
  for (size_t i = 0; i < app.replicas.size(); ++i) {
    int role = app.replicas[i].role;
    int need = role < static_cast<int>(app.role_min.size()) ? app.role_min[role] : 1 << 30;
    if (taken[role]++ < need) out.push_back(i);
  }
  return out;
}

Resources Admission::GangNeed(const AppDemand& app) const {
  Resources r;
  for (size_t i : GangReplicas(app)) r += app.replicas[i].need;
  return r;
}

double Admission::Cost(const Resources& r) const {
  double c = 0;
  if (total_.gpu > 0) c = std::max(c, double(r.gpu) / total_.gpu);
  if (total_.cpu > 0) c = std::max(c, double(r.cpu) / total_.cpu);
  if (total_.mem_mb > 0) c = std::max(c, double(r.mem_mb) / total_.mem_mb);
  return std::max(c, 1e-3);  // an app declaring nothing still takes a turn
}

Admission::UserShares Admission::Shares() const {
  UserShares out;
  for (const auto& [user, used] : user_used_) out[user] = Cost(used);
  return out;
}

int Admission::EffectivePriority(int priority, int64_t submitted_ms, int64_t now_ms) {
  int64_t waited = std::max<int64_t>(0, now_ms - submitted_ms);
  return priority + static_cast<int>(std::min<int64_t>(kMaxAgeBonus, waited / kAgeStepMs));
}

bool Admission::Before(const Entry& a, const Entry& b, const UserShares& shares, int64_t now_ms) {
  int pa = EffectivePriority(a.priority, a.submitted_ms, now_ms);
  int pb = EffectivePriority(b.priority, b.submitted_ms, now_ms);
  if (pa != pb) return pa > pb;
  if (a.user != b.user) {
    auto sa = shares.find(a.user), sb = shares.find(b.user);
    double da = sa == shares.end() ? 0 : sa->second, db = sb == shares.end() ? 0 : sb->second;
    if (da != db) return da < db;
  }
  return a.seq < b.seq;
}

std::string Admission::CapBlock(const Entry& e, const QueueState& q) const {
  // GPUs out of service (drained, lost) left the box smaller than the app:
  // it neither starts nor holds a reservation (it would hold it forever)
  // until they come back, and the apps behind it go ahead.
  if (!e.gang.FitsIn(total_)) {
    int out = box_.topology.size() - box_.topology.UsableCount();
    return "it needs " + DescribeResources(e.gang) + " and this box has " + Plural(total_.gpu, "GPU", "GPUs") +
           " in service (" + Plural(out, "GPU", "GPUs") + " drained or lost: see torchx gpus)";
  }
  if (q.spec.max_gpus && q.used.gpu + e.gang.gpu > *q.spec.max_gpus) {
    return "queue " + q.spec.name + " is at its cap: " + std::to_string(q.used.gpu) + " of max_gpus=" +
           std::to_string(*q.spec.max_gpus) + " in use";
  }
  if (q.spec.max_gpus_per_user) {
    auto it = q.user_gpus.find(e.user);
    int used = it == q.user_gpus.end() ? 0 : it->second;
    if (used + e.gang.gpu > *q.spec.max_gpus_per_user) {
      return "user " + std::to_string(e.user) + " is at queue " + q.spec.name + "'s cap: " + std::to_string(used) +
             " of max_gpus_per_user=" + std::to_string(*q.spec.max_gpus_per_user) + " in use";
    }
  }
  return "";
}

const Admission::Entry* Admission::HeadOf(const QueueState& q, const UserShares& shares, int64_t now_ms) const {
  const Entry* best = nullptr;
  for (const Entry& e : q.pending) {
    if (e.app->demand.key == head_) continue;
    if (best != nullptr && !Before(e, *best, shares, now_ms)) continue;
    if (!CapBlock(e, q).empty()) continue;
    best = &e;
  }
  return best;
}

std::optional<std::vector<Placement>> Admission::Fit(const AppDemand& app, const std::vector<size_t>& which,
                                                     const std::vector<bool>& avoid,
                                                     const std::vector<bool>& prefer) const {
  Resources need;
  std::vector<int> counts;
  for (size_t i : which) {
    need += app.replicas[i].need;
    counts.push_back(app.replicas[i].need.gpu);
  }
  if (!need.FitsIn(free_)) return std::nullopt;
  std::vector<bool> free(box_.topology.size());
  for (int g = 0; g < box_.topology.size(); ++g) {
    free[g] = box_.topology.gpus[g].usable && gpu_holder_[g].empty() && (avoid.empty() || !avoid[g]);
  }
  auto sets = PlaceGang(box_.topology, std::move(free), counts, prefer);
  if (!sets) return std::nullopt;
  std::vector<Placement> out;
  for (size_t k = 0; k < which.size(); ++k) {
    const ReplicaDemand& r = app.replicas[which[k]];
    out.push_back(Placement{r.role, r.replica_id, std::move((*sets)[k]), r.need});
  }
  return out;
}

bool Admission::BackfillRoom(const Resources& need) const {
  if (head_.empty()) return true;
  const Resources& h = pending_.at(head_)->gang;
  return backfilled_.cpu + need.cpu <= total_.cpu - h.cpu && backfilled_.mem_mb + need.mem_mb <= total_.mem_mb - h.mem_mb;
}

Result<void> Admission::Check(const AppDemand& app) const {
  const QueueState* q = QueueOf(app.queue);
  if (q == nullptr) {
    std::string names;
    for (const auto& s : states_) names += (names.empty() ? "" : ", ") + s.spec.name;
    return Fail(Error::InvalidArgument("queue `" + app.queue + "` does not exist on this box (queues: " + names + ")"));
  }
  for (const ReplicaDemand& r : app.replicas) {
    if (!r.need.FitsIn(total_)) {
      return Fail(Error::InvalidArgument("a replica needs " + DescribeResources(r.need) +
                                         ", more than this whole box has (" + DescribeResources(total_) + ")"));
    }
  }
  Resources gang = GangNeed(app);
  if (!gang.FitsIn(total_)) {
    return Fail(Error::InvalidArgument("the app needs " + DescribeResources(gang) +
                                       " at once to start, more than this whole box has (" +
                                       DescribeResources(total_) + "); it could never start"));
  }
  if (q->spec.max_gpus && gang.gpu > *q->spec.max_gpus) {
    return Fail(Error::InvalidArgument("the app needs " + Plural(gang.gpu, "GPU", "GPUs") + " to start; queue " +
                                       q->spec.name + " allows " + std::to_string(*q->spec.max_gpus) +
                                       " (max_gpus): it could never start there"));
  }
  if (q->spec.max_gpus_per_user && gang.gpu > *q->spec.max_gpus_per_user) {
    return Fail(Error::InvalidArgument("the app needs " + Plural(gang.gpu, "GPU", "GPUs") + " to start; queue " +
                                       q->spec.name + " allows " + std::to_string(*q->spec.max_gpus_per_user) +
                                       " per user (max_gpus_per_user): it could never start there"));
  }
  return {};
}

void Admission::Enqueue(AppDemand app) {
  auto p = std::make_unique<Pending>();
  p->gang = GangNeed(app);
  p->demand = std::move(app);
  QueueState* q = QueueOf(p->demand.queue);
  if (q == nullptr) q = &states_.front();  // Check() refused unknown queues; kept rather than lost
  q->pending.push_back(EntryOf(*p));
  pending_[p->demand.key] = std::move(p);
}

Admission::Entry Admission::EntryOf(Pending& app) {
  const AppDemand& d = app.demand;
  return Entry{d.priority, d.user, d.seq, d.submitted_ms, app.gang, &app};
}

const Resources* Admission::PendingNeed(const std::string& key) const {
  auto it = pending_.find(key);
  return it == pending_.end() ? nullptr : &it->second->gang;
}

void Admission::SetHead(const std::string& key) {
  auto it = pending_.find(key);
  if (it == pending_.end() || !head_.empty()) return;
  Reserve(*it->second);
}

void Admission::Unqueue(QueueState& q, const Pending* app) {
  for (size_t i = 0; i < q.pending.size(); ++i) {
    if (q.pending[i].app != app) continue;
    q.pending[i] = q.pending.back();
    q.pending.pop_back();
    return;
  }
}

void Admission::Take(Running& run, const Placement& p) {
  for (int g : p.gpus) gpu_holder_[g] = run.demand.key;
  free_ -= p.held;
  run.held += p.held;
  user_used_[run.demand.user] += p.held;
  if (QueueState* q = QueueOf(run.demand.queue)) {
    q->used += p.held;
    q->user_gpus[run.demand.user] += p.held.gpu;
  }
  if (backfilled_apps_.count(run.demand.key)) backfilled_ += p.held;
  run.placed.push_back(p);
}

void Admission::Hold(AppDemand app, std::vector<Placement> placed, int64_t started_ms) {
  Running run;
  run.demand = std::move(app);
  if (run.demand.max_duration_ms > 0) {
    run.end_ms = started_ms + run.demand.max_duration_ms;
    ++limited_running_;
  }
  std::set<std::pair<int, int>> have;
  for (const Placement& p : placed) have.insert({p.role, p.replica_id});
  for (size_t i = 0; i < run.demand.replicas.size(); ++i) {
    const ReplicaDemand& r = run.demand.replicas[i];
    if (!have.count({r.role, r.replica_id})) run.waiting.push_back(i);
  }
  if (QueueState* q = QueueOf(run.demand.queue)) q->running.insert(run.demand.key);
  std::string key = run.demand.key;
  Running& stored = running_[key] = std::move(run);
  for (Placement& p : placed) {
    p.gpus.erase(std::remove_if(p.gpus.begin(), p.gpus.end(),
                                [&](int g) { return g < 0 || g >= box_.topology.size() || !gpu_holder_[g].empty(); }),
                 p.gpus.end());
    Take(stored, p);
  }
}

void Admission::Remove(const std::string& key) {
  if (auto it = pending_.find(key); it != pending_.end()) {
    if (QueueState* q = QueueOf(it->second->demand.queue)) Unqueue(*q, it->second.get());
    else Unqueue(states_.front(), it->second.get());
    if (head_ == key) ClearHead();
    pending_.erase(it);
    return;
  }
  auto it = running_.find(key);
  if (it == running_.end()) return;
  Running& run = it->second;
  for (const Placement& p : run.placed) Give(run, p);
  if (QueueState* q = QueueOf(run.demand.queue)) q->running.erase(key);
  backfilled_apps_.erase(key);
  if (run.end_ms != kNoEnd) --limited_running_;
  running_.erase(it);
}

void Admission::Give(Running& run, const Placement& p) {
  for (int g : p.gpus) {
    if (gpu_holder_[g] == run.demand.key) gpu_holder_[g].clear();
  }
  free_ += p.held;
  for (int g : p.gpus) {
    if (drained_held_.erase(g) > 0) free_.gpu -= 1;  // taken out of service while held
  }
  run.held -= p.held;
  Resources& user = user_used_[run.demand.user];
  user -= p.held;
  if (user.Empty()) user_used_.erase(run.demand.user);
  if (QueueState* q = QueueOf(run.demand.queue)) {
    q->used -= p.held;
    q->user_gpus[run.demand.user] -= p.held.gpu;
    if (q->user_gpus[run.demand.user] <= 0) q->user_gpus.erase(run.demand.user);
  }
  if (backfilled_apps_.count(run.demand.key)) backfilled_ -= p.held;
}

bool Admission::ReleaseReplica(const std::string& key, int role, int replica_id) {
  auto it = running_.find(key);
  if (it == running_.end()) return false;
  Running& run = it->second;
  auto same = [&](int r, int id) { return r == role && id == replica_id; };
  bool changed = std::erase_if(run.waiting, [&](size_t i) {
                   return same(run.demand.replicas[i].role, run.demand.replicas[i].replica_id);
                 }) > 0;
  auto placed = std::find_if(run.placed.begin(), run.placed.end(),
                             [&](const Placement& p) { return same(p.role, p.replica_id); });
  if (placed != run.placed.end()) {
    Give(run, *placed);
    run.placed.erase(placed);
    changed = true;
  }
  return changed;
}

bool Admission::WantReplica(const std::string& key, int role, int replica_id) {
  auto it = running_.find(key);
  if (it == running_.end()) return false;
  Running& run = it->second;
  for (const Placement& p : run.placed) {
    if (p.role == role && p.replica_id == replica_id) return false;
  }
  for (size_t i = 0; i < run.demand.replicas.size(); ++i) {
    const ReplicaDemand& r = run.demand.replicas[i];
    if (r.role != role || r.replica_id != replica_id) continue;
    auto at = std::lower_bound(run.waiting.begin(), run.waiting.end(), i);
    if (at != run.waiting.end() && *at == i) return false;
    run.waiting.insert(at, i);  // in replica order, as Grow takes them
    return true;
  }
  return false;
}

void Admission::Reserve(const Pending& app) {
  head_ = app.demand.key;
  backfilled_ = {};
  backfilled_apps_.clear();
  if (previous_head_.key == head_) {
    backfilled_ = previous_head_.backfilled;
    backfilled_apps_ = previous_head_.backfilled_apps;
  }
  // When the GPUs free now suffice, they are the reservation (the head then
  // waits only for cpu or memory). Otherwise it waits on the fewest running
  // apps: the largest holders first, and among their GPUs and the free ones
  // it prefers theirs, so that the free GPUs stay open to backfill.
  std::vector<bool> usable(box_.topology.size()), now(box_.topology.size());
  std::map<std::string, int> held;
  int free_now = 0;
  for (int g = 0; g < box_.topology.size(); ++g) {
    usable[g] = box_.topology.gpus[g].usable;
    now[g] = usable[g] && gpu_holder_[g].empty();
    free_now += now[g] ? 1 : 0;
    if (usable[g] && !gpu_holder_[g].empty()) ++held[gpu_holder_[g]];
  }
  std::vector<int> counts;
  int need = 0;
  for (size_t i : GangReplicas(app.demand)) {
    counts.push_back(app.demand.replicas[i].need.gpu);
    need += counts.back();
  }
  std::vector<bool> allowed = usable, prefer = now;
  if (free_now < need) {
    std::vector<std::pair<std::string, int>> holders(held.begin(), held.end());
    // Largest holders first; among equals the one whose max_duration ends first.
    std::stable_sort(holders.begin(), holders.end(), [this](const auto& a, const auto& b) {
      if (a.second != b.second) return a.second > b.second;
      return running_.at(a.first).end_ms < running_.at(b.first).end_ms;
    });
    std::set<std::string> waited;
    for (int have = free_now; have < need && waited.size() < holders.size();) {
      have += holders[waited.size()].second;
      waited.insert(holders[waited.size()].first);
    }
    for (int g = 0; g < box_.topology.size(); ++g) {
      prefer[g] = usable[g] && waited.count(gpu_holder_[g]) > 0;
      allowed[g] = now[g] || prefer[g];
    }
  }
  reserved_gpus_.clear();
  reserved_mask_.assign(box_.topology.size(), false);
  if (auto sets = PlaceGang(box_.topology, allowed, counts, prefer)) {
    for (const auto& set : *sets) {
      for (int g : set) {
        reserved_gpus_.push_back(g);
        reserved_mask_[g] = true;
      }
    }
  }
  std::sort(reserved_gpus_.begin(), reserved_gpus_.end());
}

void Admission::ClearHead() {
  head_.clear();
  reserved_gpus_.clear();
  reserved_mask_.assign(box_.topology.size(), false);
  backfilled_ = {};
  backfilled_apps_.clear();
}

void Admission::Charge(const QueueState& chosen, const std::vector<QueueState*>& backlogged, double cost) {
  double total = 0;
  bool chosen_counted = false;
  for (QueueState* q : backlogged) {
    q->current += q->spec.weight * cost;
    total += q->spec.weight * cost;
    chosen_counted = chosen_counted || q == &chosen;
  }
  QueueState& c = const_cast<QueueState&>(chosen);
  if (!chosen_counted) {
    c.current += c.spec.weight * cost;
    total += c.spec.weight * cost;
  }
  c.current -= total;
}

void Admission::Start(Pending& app, std::vector<Placement> placed, int64_t now_ms, bool before_shadow,
                      std::vector<Admitted>& out) {
  std::string key = app.demand.key;
  bool backfill = !head_.empty() && head_ != key && !before_shadow;
  if (head_ == key) ClearHead();
  if (backfill) backfilled_apps_.insert(key);
  std::set<std::pair<int, int>> started;
  for (const Placement& p : placed) started.insert({p.role, p.replica_id});
  Running run;
  for (size_t i = 0; i < app.demand.replicas.size(); ++i) {
    const ReplicaDemand& r = app.demand.replicas[i];
    if (!started.count({r.role, r.replica_id})) run.waiting.push_back(i);
  }
  if (app.demand.max_duration_ms > 0) {
    run.end_ms = now_ms + app.demand.max_duration_ms;
    ++limited_running_;
  }
  QueueState* q = QueueOf(app.demand.queue);
  if (q == nullptr) q = &states_.front();
  Unqueue(*q, &app);
  q->running.insert(key);
  run.demand = std::move(app.demand);
  pending_.erase(key);
  Running& stored = running_[key] = std::move(run);
  for (const Placement& p : placed) Take(stored, p);
  out.push_back(Admitted{key, std::move(placed)});
}

std::vector<Admitted> Admission::Pass(int64_t now_ms) {
  std::vector<Admitted> out;
  UserShares shares = Shares();
  // The head is picked again every pass, in the order below (as Slurm's
  // backfill does): an app that came later but ranks higher (priority, age,
  // DRF) takes the reservation. Re-picked, the same head keeps what it had.
  previous_head_ = {head_, backfilled_, backfilled_apps_, reserved_mask_};
  ClearHead();
  // Queue heads in SWRR order; a head that does not fit becomes the head of
  // the box (when there is none) or blocks its queue for this pass.
  std::vector<bool> blocked(states_.size(), false);
  // The shadow time changes with the head only: apps that end before it
  // leave it as it is, and backfill without a limit avoids what it waits on.
  std::string shadow_of;
  int64_t shadow = kNoEnd;
  auto shadow_now = [&] {
    if (shadow_of != head_) shadow = ShadowTime(now_ms), shadow_of = head_;
    return shadow;
  };
  for (;;) {
    std::vector<QueueState*> backlogged;
    std::vector<const Entry*> heads;
    QueueState* chosen = nullptr;
    const Entry* chosen_head = nullptr;
    size_t chosen_index = 0;
    for (size_t i = 0; i < states_.size(); ++i) {
      QueueState& q = states_[i];
      const Entry* h = q.pending.empty() ? nullptr : HeadOf(q, shares, now_ms);
      if (h == nullptr) continue;
      backlogged.push_back(&q);
      if (blocked[i]) continue;
      if (chosen == nullptr || q.current + q.spec.weight > chosen->current + chosen->spec.weight) {
        chosen = &q, chosen_head = h, chosen_index = i;
      }
    }
    if (chosen == nullptr) break;
    Pending& app = *chosen_head->app;
    std::optional<std::vector<Placement>> placed;
    bool before_shadow = false;
    if (head_.empty()) {
      // The head re-picked prefers the GPUs it was reserved: backfill kept them free.
      bool was_head = app.demand.key == previous_head_.key;
      placed = Fit(app.demand, GangReplicas(app.demand), {}, was_head ? previous_head_.reserved : std::vector<bool>{});
      if (!placed) {
        Reserve(app);
        continue;
      }
    } else {
      if (BackfillRoom(app.gang)) placed = Fit(app.demand, GangReplicas(app.demand), reserved_mask_, {});
      if (!placed && EndsBefore(app.demand, now_ms, shadow_now())) {
        placed = Fit(app.demand, GangReplicas(app.demand), {}, reserved_mask_);
        before_shadow = placed.has_value();
      }
    }
    if (!placed) {
      blocked[chosen_index] = true;
      continue;
    }
    double cost = Cost(app.gang);
    Start(app, std::move(*placed), now_ms, before_shadow, out);
    Charge(*chosen, backlogged, cost);
    shares = Shares();
  }
  if (head_.empty()) {
    Grow(out);
    return out;
  }
  // Backfill: apps behind blocked queue heads that fit outside the
  // reservation, or that end before the shadow time, in within-queue order
  // across queues.
  Resources room = free_;
  for (int g : reserved_gpus_) {
    if (gpu_holder_[g].empty()) room.gpu -= 1;
  }
  std::vector<Entry> candidates;
  for (auto& q : states_) {
    for (const Entry& e : q.pending) {
      if (e.app->demand.key == head_ || !CapBlock(e, q).empty()) continue;
      if ((e.gang.FitsIn(room) && BackfillRoom(e.gang)) ||
          (e.gang.FitsIn(free_) && EndsBefore(e.app->demand, now_ms, shadow_now()))) {
        candidates.push_back(e);
      }
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [&](const Entry& a, const Entry& b) { return Before(a, b, shares, now_ms); });
  for (const Entry& e : candidates) {
    QueueState* q = QueueOf(e.app->demand.queue);
    if (q == nullptr || !CapBlock(e, *q).empty()) continue;
    std::optional<std::vector<Placement>> placed;
    if (BackfillRoom(e.gang)) placed = Fit(e.app->demand, GangReplicas(e.app->demand), reserved_mask_, {});
    bool before_shadow = false;
    if (!placed && EndsBefore(e.app->demand, now_ms, shadow_now())) {
      placed = Fit(e.app->demand, GangReplicas(e.app->demand), {}, reserved_mask_);
      before_shadow = placed.has_value();
    }
    if (!placed) continue;
    std::vector<QueueState*> backlogged;
    for (auto& s : states_) {
      if (!s.pending.empty()) backlogged.push_back(&s);
    }
    double cost = Cost(e.gang);
    Start(*e.app, std::move(*placed), now_ms, before_shadow, out);
    Charge(*q, backlogged, cost);
  }
  return out;
}

int64_t Admission::ShadowTime(int64_t now_ms) const {
  if (head_.empty() || limited_running_ == 0) return kNoEnd;
  const Pending& h = *pending_.at(head_);
  if (h.gang.gpu > 0 && reserved_gpus_.empty()) return kNoEnd;  // no concrete GPU set to wait on
  int64_t t = now_ms;
  for (int g : reserved_gpus_) {
    if (!gpu_holder_[g].empty()) t = std::max(t, running_.at(gpu_holder_[g]).end_ms);
  }
  if (t == kNoEnd) return t;
  // CPUs and memory: running apps release theirs as they reach their ends.
  Resources need{0, h.gang.cpu, h.gang.mem_mb}, have{0, free_.cpu, free_.mem_mb};
  if (need.FitsIn(have)) return t;
  std::vector<std::pair<int64_t, const Resources*>> ends;
  for (const auto& [key, run] : running_) ends.emplace_back(run.end_ms, &run.held);
  std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [end, held] : ends) {
    if (end == kNoEnd) break;
    have.cpu += held->cpu, have.mem_mb += held->mem_mb;
    if (need.FitsIn(have)) return std::max(t, end);
  }
  return kNoEnd;
}

void Admission::Grow(std::vector<Admitted>& out) {
  std::vector<Running*> order;
  for (auto& [key, run] : running_) {
    if (!run.waiting.empty()) order.push_back(&run);
  }
  std::sort(order.begin(), order.end(), [](const Running* a, const Running* b) { return a->demand.seq < b->demand.seq; });
  for (Running* run : order) {
    std::vector<Placement> placed;
    while (!run->waiting.empty()) {
      auto fit = Fit(run->demand, {run->waiting.front()}, {}, {});
      if (!fit) break;
      Take(*run, fit->front());
      placed.push_back(std::move(fit->front()));
      run->waiting.erase(run->waiting.begin());
    }
    if (placed.empty()) continue;
    auto same = std::find_if(out.begin(), out.end(), [&](const Admitted& a) { return a.key == run->demand.key; });
    if (same == out.end()) {
      out.push_back(Admitted{run->demand.key, std::move(placed)});
    } else {
      same->replicas.insert(same->replicas.end(), placed.begin(), placed.end());
    }
  }
}

std::vector<Admission::QueueView> Admission::View(int64_t now_ms, size_t limit) const {
  UserShares shares = Shares();
  auto head = pending_.find(head_);
  const Pending* head_app = head == pending_.end() ? nullptr : head->second.get();
  std::vector<QueueView> out;
  std::vector<const Entry*> order;
  for (const QueueState& q : states_) {
    QueueView v;
    v.spec = &q.spec;
    v.used = q.used;
    v.running.assign(q.running.begin(), q.running.end());
    order.clear();
    for (const Entry& e : q.pending) order.push_back(&e);
    auto first = [&](const Entry* a, const Entry* b) {
      bool ha = a->app == head_app, hb = b->app == head_app;
      if (ha != hb) return ha;
      return Before(*a, *b, shares, now_ms);
    };
    v.pending_count = order.size();
    if (limit < order.size()) {
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(limit), order.end(), first);
      order.resize(limit);
    } else {
      std::sort(order.begin(), order.end(), first);
    }
    v.pending.reserve(order.size());
    for (const Entry* e : order) v.pending.push_back(PendingView(e->app));
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::string> Admission::GpuHolders() const { return gpu_holder_; }

bool Admission::SetGpuUsable(int gpu, bool usable, const std::string& reason) {
  if (gpu < 0 || gpu >= box_.topology.size()) return false;
  Gpu& g = box_.topology.gpus[static_cast<size_t>(gpu)];
  bool held = !gpu_holder_[static_cast<size_t>(gpu)].empty();
  if (!usable) {
    g.unusable_reason = reason;
    if (!g.usable) return true;
    g.usable = false;
    total_.gpu -= 1;
    if (held) {
      drained_held_.insert(gpu);
    } else {
      free_.gpu -= 1;
    }
    return true;
  }
  if (g.usable) return true;
  g.usable = true;
  g.unusable_reason.clear();
  total_.gpu += 1;
  // Held and drained: its holder frees it as any other. Held since before
  // (a restart re-adopted an app on an excluded GPU): likewise. Free: now.
  if (held) {
    drained_held_.erase(gpu);
  } else {
    free_.gpu += 1;
  }
  return true;
}

}  // namespace torchxd::admission
