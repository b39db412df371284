#include "seam/file_worker.h"

#include "seam/as_user.h"

namespace torchxd::seam {

uint64_t FileWorker::Post(uid_t user, uid_t uid, gid_t gid, Work work) {
  return worker_.Post(user, [uid, gid, work = std::move(work)] {
    AsUser as(uid, gid);
    return work();
  });
}

}  // namespace torchxd::seam
