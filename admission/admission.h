// Admission on one shared box: which pending apps start now, and on which
// GPUs. A pure, event-driven engine (no clock, no I/O: `now` is passed in);
// the daemon runs a Pass after each submit, exit and cancel.
//
// Model
//  - Capacity: the usable GPUs of a GpuTopology, CPUs and memory (MB).
//  - Demand: each replica needs its role's gpu, cpu, memMB (TorchX's -1 = 0).
//  - Gang: an app starts when all its replicas fit, or for roles with
//    min_replicas at least that many; the others start later as room frees
//    (growth). What an app holds is held until Release (its last process
//    group is gone): retried replicas keep their GPUs.
//  - Queues: declared with a weight and optional caps (max_gpus,
//    max_gpus_per_user). Across queues, smooth weighted round robin (nginx's
//    SWRR) over the queues with pending apps, charged in resource units: the
//    start of an app costing c (its dominant share of the box) adds w·c to
//    every such queue and takes Σw·c from the chosen one. With equal apps
//    this is exactly nginx's sequence (3:1 → a a b a). Within a queue:
//    higher priority (+1 per hour waited, up to +24), then the user's lower
//    dominant share of what runs (DRF over gpu, cpu, memMB), then submit order.
//  - No starvation: the first app picked that does not fit becomes the head
//    and holds a reservation: a concrete GPU set plus its cpu and memory.
//    The set is the GPUs free now when they suffice; else the GPUs of the
//    fewest running apps (largest first) before free ones, which stay open
//    to backfill; the best placement among those. Every pass picks the head
//    again in this order (as Slurm's backfill does), so an app that came
//    later but ranks higher takes the reservation; aging (+1 per hour, up
//    to 24) lifts whatever waits. While it waits, other apps start only outside it:
//    their GPUs avoid the reserved set, and what started since the
//    reservation plus the new app leaves room for the head's cpu and memory
//    (backfill without runtime estimates).
//  - Time limits (EASY backfill): an app with max_duration is stopped at it,
//    so its end is known. The shadow time is when the head can start at the
//    latest: the last end among the holders of its reserved GPUs, and the end
//    by which enough CPUs and memory are released. An app with max_duration
//    that ends by then may start now anywhere, the reservation included
//    (it prefers the reserved GPUs, leaving the others to backfill without
//    a limit). Apps without a limit never end as far as this is concerned.
//  - Growth: replicas beyond min_replicas start, in submit order, when no
//    head waits and they fit. A replica scaled away (torchx scale) frees what
//    it holds once it ended (ReleaseReplica); scaled back, it is growth again
//    (WantReplica).
//
// Thread contract: one instance, one thread.
#ifndef TORCHXD_ADMISSION_ADMISSION_H_
#define TORCHXD_ADMISSION_ADMISSION_H_

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "admission/gpu_topology.h"
#include "core/result.h"

namespace torchxd::admission {

struct Resources {
  int gpu = 0;
  int64_t cpu = 0;  // cores
  int64_t mem_mb = 0;

  Resources& operator+=(const Resources& o) {
    gpu += o.gpu, cpu += o.cpu, mem_mb += o.mem_mb;
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    gpu -= o.gpu, cpu -= o.cpu, mem_mb -= o.mem_mb;
    return *this;
  }
  Resources operator*(int n) const { return {gpu * n, cpu * n, mem_mb * n}; }
  bool FitsIn(const Resources& room) const { return gpu <= room.gpu && cpu <= room.cpu && mem_mb <= room.mem_mb; }
  bool Empty() const { return gpu == 0 && cpu == 0 && mem_mb == 0; }
};

// "4 GPUs, 16 CPUs, 64000 MB" (only what is not zero; "nothing" when all are).
std::string DescribeResources(const Resources& r);
// "1 GPU", "3 GPUs": `n` and its noun.
std::string Plural(int64_t n, const std::string& one, const std::string& many);

struct QueueSpec {
  std::string name;
  int weight = 1;
  std::optional<int> max_gpus;
  std::optional<int> max_gpus_per_user;
  std::optional<int> max_priority;  // the highest priority anyone may ask for here (default kMaxUserPriority)
};

// "NAME[:weight=W][,max_gpus=N][,max_gpus_per_user=N][,max_priority=P]" (torchxd --queue).
[[nodiscard]] Result<QueueSpec> ParseQueueSpec(const std::string& text);
// A queue's setting from a config section: key weight, max_gpus, max_gpus_per_user or max_priority.
[[nodiscard]] Result<void> SetQueueKey(QueueSpec& queue, const std::string& key, const std::string& value);

// Priorities (-cfg priority): everyone may lower theirs, down to
// kMinUserPriority (as Slurm's nice); above kMaxUserPriority, or the queue's
// max_priority, is for root and the admin group (`privileged`), who may use
// the whole [kMinPriority, kMaxPriority].
inline constexpr int kMinPriority = -1000;
inline constexpr int kMaxPriority = 1000;
inline constexpr int kMinUserPriority = -100;
inline constexpr int kMaxUserPriority = 0;
// Why `priority` is refused in `queue` for this caller, or nothing.
[[nodiscard]] Result<void> CheckPriority(int priority, bool privileged, const QueueSpec& queue);

struct BoxCapacity {
  GpuTopology topology;
  int64_t cpu = 0;
  int64_t mem_mb = 0;
};

struct ReplicaDemand {
  int role = 0;        // index into the AppDef's roles
  int replica_id = 0;  // within its role
  Resources need;
};

struct AppDemand {
  std::string key;   // unique per app ("scheduler/app_id")
  std::string name;  // app_id, for messages
  std::string label;  // what users know it by (its app handle); the key when empty
  std::string queue = "default";
  int priority = 0;
  uint32_t user = 0;
  uint64_t seq = 0;  // submit order
  int64_t submitted_ms = 0;
  std::vector<ReplicaDemand> replicas;  // role then replica order
  std::vector<int> role_min;            // per role: replicas needed to start (num_replicas, or min_replicas)
  int64_t max_duration_ms = 0;          // stopped this long after it starts; 0 = no limit
};

inline constexpr int64_t kNoEnd = std::numeric_limits<int64_t>::max();  // an app without max_duration

struct Placement {
  int role = 0;
  int replica_id = 0;
  std::vector<int> gpus;  // GPU indices, ascending
  Resources held;
};

struct Admitted {
  std::string key;
  std::vector<Placement> replicas;  // those to start now (all of the gang, or growth)
};

class Admission {
  struct Pending;

 public:
  Admission(BoxCapacity box, std::vector<QueueSpec> queues);

  const BoxCapacity& box() const { return box_; }
  const std::vector<QueueSpec>& queues() const { return queues_; }

  // Can this app ever start here? InvalidArgument naming what can never fit.
  [[nodiscard]] Result<void> Check(const AppDemand& app) const;
  // Waits for a Pass to start it. Check()ed by the caller.
  void Enqueue(AppDemand app);
  // Marks a pending app as the head (a restarted daemon keeps its head).
  void SetHead(const std::string& key);
  // Records an app that runs already (re-adopted after a restart) with what
  // its replicas hold, and when it started; replicas not placed wait as growth.
  void Hold(AppDemand app, std::vector<Placement> placed, int64_t started_ms);
  // The app leaves: pending, it is dropped; running, all it holds is freed.
  void Remove(const std::string& key);
  // A running app's replica left its role's scale and no process of it is
  // left: what it holds is freed now (not at the app's end), and it is no
  // longer growth. False when it held nothing and waited for nothing.
  bool ReleaseReplica(const std::string& key, int role, int replica_id);
  // That replica is back in scale: it waits as growth (Pass places it while
  // no head waits) unless it holds a placement already. False when nothing changed.
  bool WantReplica(const std::string& key, int role, int replica_id);
  // Takes GPU `gpu` out of service (`usable` false: a drain, or a reading that
  // lost it; `reason` says which) or puts it back. Out of service it is never
  // placed again and no longer counts in the box's total; an app holding it
  // keeps it until it ends, and it is not freed then. Back in service it is
  // free as soon as no app holds it. False for an index the box lacks.
  bool SetGpuUsable(int gpu, bool usable, const std::string& reason);

  // Starts what may start now: gangs and growth, each with its placement.
  std::vector<Admitted> Pass(int64_t now_ms);

  bool IsPending(const std::string& key) const { return pending_.count(key) > 0; }
  // The queue of that name, or null.
  const QueueSpec* Queue(const std::string& name) const {
    const QueueState* q = QueueOf(name);
    return q == nullptr ? nullptr : &q->spec;
  }
  // What a pending app needs to start (its gang), or null.
  const Resources* PendingNeed(const std::string& key) const;
  // Why a pending app waits, in words (empty when it is not pending).
  // `ahead`: apps before it in its queue when the caller knows (View order), else -1.
  // `shadow`: whether the head's reason ends with when it starts at the latest
  // (relative to now; a caller that shows a clock time leaves it out).
  std::string Reason(const std::string& key, int64_t now_ms, int ahead = -1, bool shadow = true) const;
  // A pending app as View lists it: valid until the admission next changes.
  class PendingView {
   public:
    const AppDemand& demand() const;
    const std::string& key() const;
    const Resources& need() const;  // what it needs to start (its gang)

   private:
    friend class Admission;
    explicit PendingView(const Pending* app) : app_(app) {}
    const Pending* app_;
  };
  struct QueueView {
    const QueueSpec* spec;
    Resources used;
    std::vector<std::string> running;  // app keys
    std::vector<PendingView> pending;  // the first `limit`, in the order they would start
    size_t pending_count = 0;          // all of them
  };
  std::vector<QueueView> View(int64_t now_ms, size_t limit = SIZE_MAX) const;
  // The Reason of each of the first `limit` of a view's pending apps, with what
  // their reasons share made once.
  std::vector<std::string> Reasons(const QueueView& view, size_t limit, int64_t now_ms) const;
  const std::string& head() const { return head_; }
  const std::vector<int>& reserved_gpus() const { return reserved_gpus_; }
  Resources free() const { return free_; }
  Resources total() const { return total_; }
  // When the head can start at the latest, from the ends of apps with
  // max_duration; kNoEnd when it waits on an app without one (or no head).
  int64_t ShadowTime(int64_t now_ms) const;
  std::vector<std::string> GpuHolders() const;  // per GPU: the app key holding it, or ""

 private:
  struct Pending {
    AppDemand demand;
    Resources gang;  // what it needs to start
  };
  struct Entry {  // a pending app as a queue scans it
    int priority;
    uint32_t user;
    uint64_t seq;
    int64_t submitted_ms;
    Resources gang;
    Pending* app;
  };
  struct Running {
    AppDemand demand;
    std::vector<Placement> placed;
    std::vector<size_t> waiting;  // indices into demand.replicas not started yet (growth)
    Resources held;
    int64_t end_ms = kNoEnd;      // started + max_duration
  };
  struct QueueState {
    QueueSpec spec;
    double current = 0;  // SWRR
    Resources used;
    std::map<uint32_t, int> user_gpus;
    std::vector<Entry> pending;
    std::set<std::string> running;
  };
  using UserShares = std::map<uint32_t, double>;

  static Entry EntryOf(Pending& app);
  struct ReasonParts;
  std::string ReasonFor(const Pending& app, ReasonParts& parts, int ahead, bool shadow_clause) const;
  QueueState* QueueOf(const std::string& name);
  const QueueState* QueueOf(const std::string& name) const;
  Resources GangNeed(const AppDemand& app) const;
  double Cost(const Resources& r) const;  // dominant share of the box
  UserShares Shares() const;
  static int EffectivePriority(int priority, int64_t submitted_ms, int64_t now_ms);
  static bool Before(const Entry& a, const Entry& b, const UserShares& shares, int64_t now_ms);
  std::string CapBlock(const Entry& e, const QueueState& q) const;  // "" = not capped
  const Entry* HeadOf(const QueueState& q, const UserShares& shares, int64_t now_ms) const;
  std::vector<size_t> GangReplicas(const AppDemand& app) const;
  // Placements for replicas `which` of the app in what is free, avoiding
  // `avoid` GPUs; nullopt if they do not all fit.
  std::optional<std::vector<Placement>> Fit(const AppDemand& app, const std::vector<size_t>& which,
                                            const std::vector<bool>& avoid, const std::vector<bool>& prefer) const;
  bool BackfillRoom(const Resources& need) const;
  // May this app start now on anything free, the reservation included? (it ends by `shadow_ms`)
  static bool EndsBefore(const AppDemand& app, int64_t now_ms, int64_t shadow_ms) {
    return app.max_duration_ms > 0 && shadow_ms != kNoEnd && now_ms + app.max_duration_ms <= shadow_ms;
  }
  void Reserve(const Pending& app);
  void ClearHead();
  // `before_shadow`: it ends before the head's shadow time (it does not count as backfill).
  void Start(Pending& app, std::vector<Placement> placed, int64_t now_ms, bool before_shadow,
             std::vector<Admitted>& out);
  void Take(Running& run, const Placement& p);
  void Give(Running& run, const Placement& p);  // Take undone
  void Grow(std::vector<Admitted>& out);  // replicas of running elastic apps, while no head waits
  void Charge(const QueueState& chosen, const std::vector<QueueState*>& backlogged, double cost);
  void Unqueue(QueueState& q, const Pending* app);

  BoxCapacity box_;
  std::vector<QueueSpec> queues_;
  std::vector<QueueState> states_;
  Resources total_, free_;
  std::vector<std::string> gpu_holder_;  // per GPU
  std::set<int> drained_held_;  // out of service while an app holds them: not freed when it ends
  std::map<std::string, std::unique_ptr<Pending>> pending_;
  std::map<std::string, Running> running_;
  std::map<uint32_t, Resources> user_used_;
  std::string head_;
  std::vector<int> reserved_gpus_;
  std::vector<bool> reserved_mask_;
  Resources backfilled_;                  // started since the head was reserved, still held
  std::set<std::string> backfilled_apps_;
  struct PreviousHead {
    std::string key;
    Resources backfilled;
    std::set<std::string> backfilled_apps;
    std::vector<bool> reserved;
  } previous_head_;  // the head before this pass picked one
  size_t limited_running_ = 0;  // running apps with max_duration (the shadow time is kNoEnd without)
};

inline const AppDemand& Admission::PendingView::demand() const { return app_->demand; }
inline const std::string& Admission::PendingView::key() const { return app_->demand.key; }
inline const Resources& Admission::PendingView::need() const { return app_->gang; }

}  // namespace torchxd::admission

#endif  // TORCHXD_ADMISSION_ADMISSION_H_
