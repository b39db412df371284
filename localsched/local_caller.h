// The submitter of a local app as its replicas run: credentials for the
// shim and the identity (HOME, USER, LOGNAME) its replicas see.
//
// Thread contract: LookUpCaller reads the user database; call it on the loop
// (as every caller does) or any one thread.
#ifndef TORCHXD_LOCALSCHED_LOCAL_CALLER_H_
#define TORCHXD_LOCALSCHED_LOCAL_CALLER_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/result.h"

namespace torchxd::localsched {

struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<unsigned> run_as;  // {uid, gid, groups...}; empty = the daemon's user
  std::map<std::string, std::string> identity_env;
};

// The daemon's own user needs nothing; another needs a passwd entry
// (PermissionDenied without one).
Result<Caller> LookUpCaller(uid_t uid);

}  // namespace torchxd::localsched

#endif  // TORCHXD_LOCALSCHED_LOCAL_CALLER_H_
