// Service's GPU requests: `gpus` (readings, holders; drain and undrain),
// `gpu_history` (utilization and memory over time), `gpu_timeline` (which
// app held which GPU when) and `usage` (GPU-seconds
// held and used per user and app). docs/protocol.md.
#include <pwd.h>

#include <cctype>
#include <cstdlib>

#include "core/app_status.h"
#include "core/json_reader.h"
#include "daemon/service.h"
#include "daemon/usage_report.h"

namespace torchxd::daemon {

using nlohmann::json;

namespace {

// Points per GPU in one `gpu_history` reply: a day of minutes.
constexpr int64_t kMaxHistoryPoints = 1440;
// Wall times clients may name: up to the year 2286.
constexpr int64_t kMaxWallMs = 9'999'999'999'999;
constexpr int64_t kDayMs = 24LL * 3600 * 1000;
constexpr int64_t kWeekMs = 7 * kDayMs;

// A user's name or numeric uid.
Result<uid_t> UserIdOf(const std::string& text) {
  if (text.empty() || text.size() > 256) return Fail(Error::InvalidArgument("params.user: a user name or a numeric uid"));
  if (struct passwd* pw = ::getpwnam(text.c_str())) return pw->pw_uid;
  char* end = nullptr;
  unsigned long long uid = std::strtoull(text.c_str(), &end, 10);
  if (*end == '\0' && std::isdigit(static_cast<unsigned char>(text[0])) && uid <= 4294967294ULL) {
    return static_cast<uid_t>(uid);
  }
  return Fail(Error::InvalidArgument("params.user: no such user " + text + " (a name or a numeric uid)"));
}

}  // namespace

void Service::Gpus(const json& params, const PeerInfo& peer, const Reply& reply) {
  core::JsonReader r(params, "params", {"drain", "undrain"});
  auto drain = r.OptionalInt("drain", 0, 1023);
  auto undrain = r.OptionalInt("undrain", 0, 1023);
  if (auto ok = r.Finish(); !ok) return reply->Error(ok.error());
  if (drain && undrain) return reply->Error(Error::InvalidArgument("params: drain and undrain do not go together"));
  if (drain || undrain) {
    if (!MayActOnAll(peer)) {
      return reply->Error(Error::PermissionDenied("only root, torchxd's own user and the admin group may " +
                                                  std::string(drain ? "drain" : "undrain") + " a GPU"));
    }
    if (!info_.gpus_drain) return reply->Error(Error::Unavailable("this torchxd runs with --no-admission: no GPU is handed out"));
    std::map<uint32_t, std::string> names;
    auto done = info_.gpus_drain(static_cast<int>(drain ? *drain : *undrain), drain.has_value(),
                                 "drained by " + seam::UserNameOf(peer.uid, names));
    if (!done) return reply->Error(done.error());
  }
  if (!info_.gpus_info) return reply->Result({{"sampling", {{"off", true}}}, {"gpus", json::array()}});
  reply->Result(info_.gpus_info());
}

void Service::GpuHistory(const json& params, const Reply& reply) {
  core::JsonReader r(params, "params", {"gpu", "from_ms", "to_ms", "points"});
  auto gpu = r.OptionalInt("gpu", 0, 1023);
  int64_t now = core::UnixNowMs();
  auto from = r.OptionalInt("from_ms", 0, kMaxWallMs);
  auto to = r.OptionalInt("to_ms", 0, kMaxWallMs);
  auto points = r.OptionalInt("points", 1, kMaxHistoryPoints);
  if (auto ok = r.Finish(); !ok) return reply->Error(ok.error());
  int64_t to_ms = to.value_or(now);
  int64_t from_ms = from.value_or(to_ms - 600'000);
  if (from_ms > to_ms) return reply->Error(Error::InvalidArgument("params.from_ms: after params.to_ms"));
  if (!info_.gpu_history) return reply->Result({{"from_ms", from_ms}, {"to_ms", to_ms}, {"step_s", 0}, {"gpus", json::array()}});
  json out = info_.gpu_history(gpu ? std::optional<int>(static_cast<int>(*gpu)) : std::nullopt, from_ms, to_ms,
                               static_cast<int>(points.value_or(600)));
  if (gpu && out["gpus"].empty()) {
    return reply->Error(Error::NotFound("GPU " + std::to_string(*gpu) + " does not exist on this box"));
  }
  reply->Result(out);
}

void Service::GpuTimeline(const json& params, const Reply& reply) {
  core::JsonReader r(params, "params", {"since_ms", "until_ms"});
  int64_t now = core::UnixNowMs();
  auto since = r.OptionalInt("since_ms", 0, kMaxWallMs);
  auto until = r.OptionalInt("until_ms", 0, kMaxWallMs);
  if (auto ok = r.Finish(); !ok) return reply->Error(ok.error());
  int64_t to = std::min(until.value_or(now), now);
  int64_t from = since.value_or(to - kDayMs);
  if (from > to) return reply->Error(Error::InvalidArgument("params.since_ms: after params.until_ms"));
  reply->Result(daemon::GpuTimeline(AllApps(), from, to));
}

void Service::Usage(const json& params, const PeerInfo& peer, const Reply& reply) {
  core::JsonReader r(params, "params", {"since_ms", "until_ms", "user"});
  int64_t now = core::UnixNowMs();
  auto since = r.OptionalInt("since_ms", 0, kMaxWallMs);
  auto until = r.OptionalInt("until_ms", 0, kMaxWallMs);
  auto user = r.OptionalString("user");
  if (auto ok = r.Finish(); !ok) return reply->Error(ok.error());
  UsageQuery q;
  q.to_ms = std::min(until.value_or(now), now);
  q.from_ms = since.value_or(q.to_ms - kWeekMs);
  if (q.from_ms > q.to_ms) return reply->Error(Error::InvalidArgument("params.since_ms: after params.until_ms"));
  if (user) {
    auto uid = UserIdOf(*user);
    if (!uid) return reply->Error(uid.error());
    q.user = *uid;
  }
  q.viewer = peer.uid;
  q.viewer_sees_all = MayActOnAll(peer);
  reply->Result(UsageReport(AllApps(), q));
}

}  // namespace torchxd::daemon
