// Fuzz target: squeue's and sacct's parsable output (what a Slurm, or a squeue on the
// daemon's PATH, prints) read back: every component read names a job and a
// group, the replica names parse or not, the wait statuses decode.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "slurmbridge/squeue.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto components = torchxd::slurmbridge::ReadSqueue(text, 1000);
  TORCHXD_CHECK(components.size() <= 1000);
  for (const auto& c : components) {
    TORCHXD_CHECK(!c.job_id.empty() && c.offset >= 0);
    (void)torchxd::slurmbridge::ReplicaOfName(c.name);
    (void)torchxd::slurmbridge::AppStateFromSlurm(c.state);
    (void)torchxd::slurmbridge::ReasonText(c.reason);
    if (c.derived_status) (void)torchxd::slurmbridge::DecodeWaitStatus(*c.derived_status);
  }
  (void)torchxd::slurmbridge::ByJob(std::move(components));
  for (const auto& c : torchxd::slurmbridge::ReadSacct(text, 1000)) {
    TORCHXD_CHECK(!c.job_id.empty() && c.offset >= 0);
    if (c.derived_status) (void)torchxd::slurmbridge::DecodeWaitStatus(*c.derived_status);
  }
  return 0;
}
