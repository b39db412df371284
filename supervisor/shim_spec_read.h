// The shim's read of the spec the daemon sends it once on its control
// socket (supervisor/shim_protocol.h), apart from the rest of the shim's
// start so that it is tested on its own.
//
// Thread contract: blocking; the shim's one thread, before anything runs.
#ifndef TORCHXD_SUPERVISOR_SHIM_SPEC_READ_H_
#define TORCHXD_SUPERVISOR_SHIM_SPEC_READ_H_

#include <string>

#include "supervisor/shim_protocol.h"

namespace torchxd::supervisor {

// Reads the spec the daemon sends once on `fd`; false (with `error`) when it
// is not a complete, valid one: then nothing runs. What came behind it (a
// stop the daemon sent at once) is left in `rest` for the control loop.
bool ReadSpec(int fd, ShimSpec& spec, std::string& rest, std::string& error);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_SPEC_READ_H_
