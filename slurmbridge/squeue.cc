#include "slurmbridge/squeue.h"

#include <algorithm>
#include <charconv>
#include <ctime>

#include "core/text.h"

namespace torchxd::slurmbridge {
namespace {

constexpr const char* kFields[] = {"JobID",   "HetJobID", "HetJobOffset", "State",   "Reason",
                                   "DerivedEC", "exit_code", "NodeList",   "UserName", "SubmitTime",
                                   "StartTime", "EndTime",   "Name",       "RestartCnt", "WorkDir"};
constexpr size_t kFieldCount = sizeof(kFields) / sizeof(kFields[0]);

std::optional<int> Int(std::string_view s) {
  int v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// The first `ended` fields of `line`, each ended by kFieldEnd, and with
// `rest_is_last` what follows them as one more; nothing when it has fewer
// (or, without `rest_is_last`, more).
std::optional<std::vector<std::string_view>> Fields(std::string_view line, size_t ended, bool rest_is_last) {
  std::vector<std::string_view> f;
  size_t from = 0;
  while (f.size() < ended) {
    size_t end = line.find(kFieldEnd, from);
    if (end == std::string_view::npos) return std::nullopt;
    f.push_back(line.substr(from, end - from));
    from = end + 1;
  }
  if (rest_is_last) {
    f.push_back(line.substr(from));
  } else if (from != line.size()) {
    return std::nullopt;
  }
  return f;
}

// Each of the first `max_lines` lines of `text` that `read` makes a component of.
template <class Read>
std::vector<SlurmComponent> ReadLines(std::string_view text, size_t max_lines, Read read) {
  std::vector<SlurmComponent> out;
  size_t from = 0, lines = 0;
  while (from < text.size() && lines < max_lines) {
    size_t nl = text.find('\n', from);
    std::string_view line = text.substr(from, nl == std::string_view::npos ? std::string_view::npos : nl - from);
    from = nl == std::string_view::npos ? text.size() : nl + 1;
    ++lines;
    if (auto c = read(line)) out.push_back(std::move(*c));
  }
  return out;
}

std::optional<SlurmComponent> ReadSqueueLine(std::string_view line) {
  auto fields = Fields(line, kFieldCount, false);
  if (!fields) return std::nullopt;
  const auto& f = *fields;
  auto id = Int(f[0]);
  auto het = Int(f[1]);
  auto offset = Int(f[2]);
  if (!id || *id <= 0 || f[3].empty()) return std::nullopt;
  SlurmComponent c;
  bool is_het = het && *het > 0;
  c.job_id = std::to_string(is_het ? *het : *id);
  c.offset = is_het && offset ? *offset : 0;
  if (c.offset < 0) return std::nullopt;
  c.state = std::string(f[3]);
  c.reason = std::string(f[4]);
  c.derived_status = Int(f[5]);
  c.status = Int(f[6]);
  c.nodes = std::string(f[7]);
  c.user = std::string(f[8]);
  c.submit_time = std::string(f[9]);
  c.start_time = std::string(f[10]);
  c.end_time = std::string(f[11]);
  c.name = std::string(f[12]);
  c.restarts = Int(f[13]);
  if (c.restarts && *c.restarts < 0) c.restarts.reset();
  c.work_dir = std::string(f[14]);
  return c;
}

}  // namespace

std::string SqueueFormat() {
  std::string out;
  for (const char* f : kFields) {
    if (!out.empty()) out += ",";
    out += std::string(f) + ":" + kFieldEnd;
  }
  return out;
}

std::string SacctFields() { return "JobID,State,ExitCode,DerivedExitCode,NodeList,User,JobName,WorkDir"; }

namespace {

// sacct's "E:S" (exit code, signal) as a wait status.
std::optional<int> ExitPair(std::string_view s) {
  size_t colon = s.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto code = Int(s.substr(0, colon));
  auto sig = Int(s.substr(colon + 1));
  if (!code || !sig || *code < 0 || *code > 255 || *sig < 0 || *sig > 127) return std::nullopt;
  return *sig != 0 ? *sig : *code << 8;
}

std::optional<SlurmComponent> ReadSacctLine(std::string_view line) {
  auto fields = Fields(line, 7, true);  // WorkDir, last, has no separator after it
  if (!fields) return std::nullopt;
  const auto& f = *fields;
  std::string_view id = f[0];
  if (id.find('.') != std::string_view::npos) return std::nullopt;  // a step
  SlurmComponent c;
  size_t plus = id.find('+');
  auto job = Int(id.substr(0, plus));
  if (!job || *job <= 0) return std::nullopt;
  c.job_id = std::to_string(*job);
  if (plus != std::string_view::npos) {
    auto offset = Int(id.substr(plus + 1));
    if (!offset || *offset < 0) return std::nullopt;
    c.offset = *offset;
  }
  std::string_view state = f[1].substr(0, f[1].find(' '));  // "CANCELLED by 1000"
  if (state.empty()) return std::nullopt;
  c.state = std::string(state);
  c.reason = "None";
  c.status = ExitPair(f[2]);
  c.derived_status = ExitPair(f[3]);
  c.nodes = std::string(f[4]);
  c.user = std::string(f[5]);
  c.name = std::string(f[6]);
  c.work_dir = std::string(f[7]);
  return c;
}

}  // namespace

std::vector<SlurmComponent> ReadSacct(std::string_view text, size_t max_lines) {
  return ReadLines(text, max_lines, ReadSacctLine);
}

bool AccountingOff(std::string_view err) { return err.find("accounting storage is disabled") != std::string_view::npos; }

std::vector<SlurmComponent> ReadSqueue(std::string_view text, size_t max_lines) {
  return ReadLines(text, max_lines, ReadSqueueLine);
}

std::map<std::string, std::vector<SlurmComponent>> ByJob(std::vector<SlurmComponent> components) {
  std::map<std::string, std::vector<SlurmComponent>> out;
  for (auto& c : components) out[c.job_id].push_back(std::move(c));
  for (auto& [id, list] : out) {
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  }
  return out;
}

std::string JobMismatch(const std::vector<SlurmComponent>& job, const std::string& user,
                        const std::vector<std::string>& replicas) {
  if (job.empty()) return "Slurm holds no such job";
  if (job.front().user != user) return "it is " + job.front().user + "'s job, not " + user + "'s";
  std::vector<std::string> names;
  for (const auto& c : job) names.push_back(c.name);
  if (names != replicas) {
    std::string has, wanted;
    for (const auto& n : names) has += (has.empty() ? "" : ",") + n;
    for (const auto& n : replicas) wanted += (wanted.empty() ? "" : ",") + n;
    return "its het groups are named " + has + ", this app's " + wanted;
  }
  return "";
}

std::string GroupsText(size_t replicas) {
  return replicas == 1 ? "1 replica" : std::to_string(replicas) + " het groups (one per replica)";
}

bool RejectedAtSubmit(const std::vector<SlurmComponent>& job) {
  if (job.empty()) return false;
  return std::all_of(job.begin(), job.end(), [](const SlurmComponent& c) {
    bool refused = c.reason == "BadConstraints" || c.reason == "PartitionConfig";
    return c.state == "FAILED" && refused && c.submit_time == c.start_time && c.start_time == c.end_time;
  });
}

core::AppState AppStateFromSlurm(std::string_view state) {
  using core::AppState;
  while (!state.empty() && state.back() == '+') state.remove_suffix(1);
  static const std::map<std::string_view, AppState> kStates = {
      {"BOOT_FAIL", AppState::kFailed},  {"CANCELLED", AppState::kCancelled}, {"COMPLETED", AppState::kSucceeded},
      {"DEADLINE", AppState::kFailed},   {"FAILED", AppState::kFailed},       {"NODE_FAIL", AppState::kFailed},
      {"OUT_OF_MEMORY", AppState::kFailed}, {"PENDING", AppState::kPending},  {"PREEMPTED", AppState::kFailed},
      {"RUNNING", AppState::kRunning},   {"REQUEUED", AppState::kPending},    {"RESIZING", AppState::kPending},
      {"REVOKED", AppState::kFailed},    {"SUSPENDED", AppState::kPending},   {"TIMEOUT", AppState::kFailed},
      // Not in TorchX's table: a job finishing its epilog still runs; one being requeued waits.
      {"COMPLETING", AppState::kRunning}, {"CONFIGURING", AppState::kPending},
      {"REQUEUE_HOLD", AppState::kPending}, {"REQUEUE_FED", AppState::kPending},
  };
  auto it = kStates.find(state);
  return it == kStates.end() ? AppState::kUnknown : it->second;
}

std::optional<std::pair<std::string, int>> ReplicaOfName(std::string_view name) {
  size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  std::string_view digits = name.substr(dash + 1);
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  auto id = Int(digits);
  if (!id) return std::nullopt;
  return std::pair{std::string(name.substr(0, dash)), *id};
}

WaitStatus DecodeWaitStatus(int status) {
  WaitStatus w;
  if ((status & 0x7f) == 0) {
    w.exit_code = (status >> 8) & 0xff;
  } else if ((status & 0x7f) != 0x7f) {
    w.signal = status & 0x7f;
  }
  return w;
}

WaitStatus ReplicaWaitStatus(const SlurmComponent& c) {
  // Its steps' highest status spans a requeued job's earlier attempts: COMPLETED is this one's 0.
  if (AppStateFromSlurm(c.state) == core::AppState::kSucceeded) return {0, std::nullopt};
  if (c.derived_status && (*c.derived_status != 0 || !c.status)) return DecodeWaitStatus(*c.derived_status);
  if (c.status) return DecodeWaitStatus(*c.status);
  return {};
}

std::optional<int64_t> SlurmTimeMs(const std::string& s) {
  struct tm tm{};
  const char* end = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  tm.tm_isdst = -1;
  time_t t = ::mktime(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;
  return int64_t{t} * 1000;
}

bool NoneKnown(std::string_view err) { return err.find("Invalid job id specified") != std::string_view::npos; }

std::string ReasonText(std::string_view reason) {
  static const std::map<std::string_view, std::string_view> kWords = {
      {"Resources", "waiting for resources to become available"},
      {"Priority", "one or more higher priority jobs are queued ahead"},
      {"Dependency", "waiting for a job it depends on"},
      {"PartitionDown", "its partition is DOWN"},
      {"PartitionInactive", "its partition is INACTIVE"},
      {"PartitionNodeLimit", "it asks for more nodes than its partition allows"},
      {"PartitionTimeLimit", "its time limit exceeds its partition's"},
      {"NodeDown", "a node it needs is DOWN"},
      {"BeginTime", "its start time has not come yet"},
      {"JobHeldUser", "held by its user (scontrol release)"},
      {"JobHeldAdmin", "held by an administrator"},
      {"ReqNodeNotAvail", "a node it needs is not available"},
      {"Reservation", "waiting for its advanced reservation"},
      {"QOSMaxGRESPerUser", "its QOS's limit of GPUs (GRES) per user is reached"},
      {"QOSMaxCpuPerUserLimit", "its QOS's limit of CPUs per user is reached"},
      {"QOSMaxJobsPerUserLimit", "its QOS's limit of jobs per user is reached"},
      {"AssocMaxJobsLimit", "its association's limit of jobs is reached"},
      {"AssocGrpGRES", "its association's group limit of GRES is reached"},
      {"InvalidQOS", "its QOS is not valid"},
      {"InvalidAccount", "its account is not valid"},
      {"NodeFail", "a node it ran on failed"},
      {"BadConstraints", "its constraints cannot be satisfied"},
      {"Cleaning", "being requeued and still cleaning up its previous run"},
      {"launch failed requeued held", "its launch failed; requeued and held"},
  };
  if (reason.empty() || reason == "None") return "";
  auto it = kWords.find(reason);
  if (it == kWords.end()) return std::string(reason);
  return std::string(reason) + ": " + std::string(it->second);
}

}  // namespace torchxd::slurmbridge
