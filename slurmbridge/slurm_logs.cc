// SlurmScheduler's logs: each replica's slurm-<job>-<role>-<replica>.out/.err
// in the job's directory, read on the FileWorker with the job owner's rights
// (a link or a file of someone else's is never read), from where the last
// read stopped, at most kReadRound bytes per file per read, into the log
// store. A file that shrank was written again (a requeue): read from its start.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/unique_fd.h"
#include "slurmbridge/sbatch_script.h"
#include "slurmbridge/slurm_scheduler.h"

namespace torchxd::slurmbridge {


namespace {

constexpr uint64_t kReadRound = 4u << 20;

struct FileRead {
  std::string bytes;
  uint64_t offset = 0;  // where `bytes` start
  bool exists = false;
  bool more = false;  // the round's bound was reached
  bool rewritten = false;  // written again since `fresh_ms`: read from its start
  std::string problem;
};

// `fresh_ms`: when a new attempt started (0: none awaited); a file modified since, or shorter
// than `offset`, was written again by it.
FileRead ReadFrom(const std::string& path, uint64_t offset, uid_t owner, int64_t fresh_ms) {
  FileRead r;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno != ENOENT) r.problem = "cannot open " + path + ": " + std::strerror(errno);
    return r;
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    r.problem = path + " is not a regular file";
    return r;
  }
  if (st.st_uid != owner) {
    r.problem = path + " is not the job owner's file: not read";
    return r;
  }
  r.exists = true;
  uint64_t size = static_cast<uint64_t>(st.st_size);
  int64_t modified_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  if (size < offset || (fresh_ms > 0 && modified_ms >= fresh_ms)) {
    offset = 0;  // written again from its start
    r.rewritten = fresh_ms > 0;
  }
  r.offset = offset;
  uint64_t want = std::min<uint64_t>(size - offset, kReadRound);
  r.more = size - offset > kReadRound;
  r.bytes.resize(want);
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd.get(), r.bytes.data() + got, want - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  r.bytes.resize(got);
  return r;
}

}  // namespace

void SlurmScheduler::ReadLogs(SlurmApp& app) {
  if (shut_down_ || files_ == nullptr) return;
  if (app.read_ticket != 0) {
    app.read_again = true;
    return;
  }
  struct Want {
    std::string key, out, err;
    uint64_t out_offset, err_offset;
    int64_t out_fresh_ms, err_fresh_ms;
  };
  std::vector<Want> wants;
  for (const auto& r : app.rec->replicas) {
    std::string key = r.Key().String();
    std::string name = r.role + "-" + std::to_string(r.replica_id);
    const ReplicaLog& l = app.logs[key];
    wants.push_back({key, app.job_dir + "/" + ReplicaLogName(app.rec->app_id, name, false),
                     app.job_dir + "/" + ReplicaLogName(app.rec->app_id, name, true), l.out_offset,
                     l.err_offset, l.out_fresh_ms, l.err_fresh_ms});
  }
  std::string app_id = app.rec->app_id;
  bool ended = app.rec->Ended();
  uid_t owner = app.rec->owner_uid;
  app.read_ticket = files_->Post(owner, owner, app.rec->owner_gid, [this, wants, app_id, ended, owner] {
    auto results = std::make_shared<std::vector<std::pair<FileRead, FileRead>>>();
    for (const auto& w : wants) {
      results->emplace_back(ReadFrom(w.out, w.out_offset, owner, w.out_fresh_ms),
                            ReadFrom(w.err, w.err_offset, owner, w.err_fresh_ms));
    }
    return std::function<void()>([this, wants, results, app_id, ended] {
      auto it = apps_.find(app_id);
      if (it == apps_.end()) return;
      SlurmApp& a = *it->second;
      a.read_ticket = 0;
      seam::AppRecord& rec = *a.rec;
      int64_t now = core::UnixNowMs();
      bool wrote = false, more = false, problem_changed = false;
      for (size_t i = 0; i < wants.size(); ++i) {
        const auto& [out, err] = (*results)[i];
        ReplicaLog& l = a.logs[wants[i].key];
        supervisor::ReplicaInfo* r = nullptr;
        for (auto& x : rec.replicas) {
          if (x.Key().String() == wants[i].key) r = &x;
        }
        if (r == nullptr) continue;
        if ((out.exists || err.exists) && !logs_->HasWriter(rec, wants[i].key)) {
          (void)logs_->Open(rec, wants[i].key, r->log_dir, std::nullopt);
        }
        for (const auto* f : {&out, &err}) {
          bool is_err = f == &err;
          uint64_t& offset = is_err ? l.err_offset : l.out_offset;
          if (!f->exists) continue;
          if (f->rewritten) (is_err ? l.err_fresh_ms : l.out_fresh_ms) = 0;  // the new attempt's file, from 0
          l.seen = true;
          if (!f->bytes.empty()) {
            logs_->Write(rec, wants[i].key, is_err ? logfiles::OutputStream::kStderr : logfiles::OutputStream::kStdout,
                         f->bytes, now);
            wrote = true;
          }
          offset = f->offset + f->bytes.size();
          more = more || f->more;
        }
        std::string problem = !out.problem.empty() ? out.problem : err.problem;
        if (problem.empty() && ended && !l.seen) {
          problem = "no log file " + ReplicaLogName(rec.app_id, r->role + "-" + std::to_string(r->replica_id), false) +
                    " in " + a.job_dir + " on this host: the job's nodes wrote it where torchxd cannot see it " +
                    "(a filesystem this host does not share?)";
        }
        if (problem != l.problem) {
          l.problem = problem;
          problem_changed = true;
        }
      }
      if (ended && !more && !a.read_again && !a.logs_done) {
        a.logs_done = true;
        for (const auto& w : wants) logs_->EndAttempt(rec, w.key, now);  // a last line without its newline
        logs_->Enforce();
        room_wanted_.insert(rec.owner_uid);
        PollSoon();  // which makes that room, outside this read's continuation
      }
      if (wrote || problem_changed || a.logs_done) {
        logs_->Notify(seam::AppKey(rec));
        if (a.logs_done || problem_changed || now - a.persisted_ms >= 1000) (void)Persist(a);
      }
      auto waiters = std::move(a.read_waiters);
      a.read_waiters.clear();
      if (more || a.read_again) {
        a.read_again = false;
        ReadLogs(a);
        if (!waiters.empty() && a.read_ticket != 0) {
          a.read_waiters = std::move(waiters);
          return;
        }
      }
      for (auto& w : waiters) w();
    });
  });
}

void SlurmScheduler::BeforeLogRead(const seam::AppRecord& rec, std::function<void()> ready) {
  auto it = apps_.find(rec.app_id);
  if (it == apps_.end() || it->second->logs_done) return ready();
  SlurmApp& app = *it->second;
  app.read_waiters.push_back(std::move(ready));
  ReadLogs(app);
}

void SlurmScheduler::OnFollow(const seam::AppRecord& rec) {
  auto it = apps_.find(rec.app_id);
  if (it != apps_.end() && !it->second->logs_done) ReadLogs(*it->second);
}

}  // namespace torchxd::slurmbridge
