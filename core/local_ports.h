// Named ports of local apps (a role's port_map): TorchX's components put the
// rendezvous port in the replicas' arguments (dist.ddp's `--rdzv_endpoint
// host:29500`), so two multi-node jobs on one box would bind the same port,
// or one would join the other's store. Each running local app gets its own
// free port for every named port its processes use, and their arguments say
// that one instead; the components are not changed.
//
// A named port is "used" where an argument holds `:<port>` not followed by a
// digit (an endpoint); only those are moved. The declared port is kept when
// it is free, so a lone app keeps TorchX's numbers; else a free one in the
// 999 above it, searched from a place the caller draws per app: another
// daemon on the box (another user's) that probed the same ports a moment ago
// has not bound its pick yet, and the same search order would hand both jobs
// one port (the second then joins the first's rendezvous store). When all
// 1,000 are taken (someone binds the whole range), a port the kernel offers
// as free, in any range; a port known to be taken is never handed out: the
// job would send its rendezvous to whoever listens there.
//
// Between the probe and the bind of the job's store (seconds: torch imports
// first) a port is free to any other daemon's probe as well. So a daemon
// claims each port it hands out (ClaimPort) until that app ends, and takes
// no port another holds a claim on: daemons of every user on the box (and
// the suite's) then never hand out one port twice. A claim is an abstract
// Unix socket named for the port, in the network namespace the ports are:
// the kernel drops it with its holder, so a killed daemon leaves none
// behind. Anyone can hold one, as anyone can bind a port: a claimed port is
// only passed over, as a bound one is.
//
// Thread contract: pure functions, but for the probes and claims (system
// calls); any thread.
#ifndef TORCHXD_CORE_LOCAL_PORTS_H_
#define TORCHXD_CORE_LOCAL_PORTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/app_def.h"
#include "core/replica_request.h"
#include "core/unique_fd.h"

namespace torchxd::core {

// Declared port -> its port_map name, for the named ports some replica's arguments use.
std::map<int, std::string> EndpointPorts(const AppDef& app, const std::vector<ReplicaRequest>& requests);

// Rewrites every `:<from>` endpoint in the arguments to `:<to>`.
void RemapEndpointPorts(std::vector<ReplicaRequest>& requests, const std::map<int, int>& from_to);

// For each port in `wanted`: itself when neither `taken` nor refused by
// `is_free`; else the first such port of port+1 .. port+999 searched from
// port+1+(spread % 999), wrapping; else the first such port of up to
// kElsewhereTries that `elsewhere` offers (KernelFreePort: any range); else 0,
// none (never the declared port: something holds it).
inline constexpr int kElsewhereTries = 16;
std::map<int, int> ChoosePorts(const std::map<int, std::string>& wanted, const std::set<int>& taken,
                               const std::function<bool(int)>& is_free, uint32_t spread = 0,
                               const std::function<int()>& elsewhere = {});

// A port the kernel offers as free now (an IPv4 bind to port 0, in its
// ephemeral range), 0 when it has none. Not claimed: the caller probes it as
// any other.
int KernelFreePort();

// Could a server bind `port` on every address now (IPv4 and IPv6)?
bool PortIsBindable(int port);

// A daemon's claim on a port it handed out, held while `fd` is open. `taken`
// when another process holds it (or the port is out of range); neither where
// no socket could be made (then nothing is held, and the port is not refused).
struct PortClaim {
  UniqueFd fd;
  bool taken = false;
};
PortClaim ClaimPort(int port);

// Unclaimed and bindable: what `--dryrun` shows a port by.
bool PortIsFree(int port);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_LOCAL_PORTS_H_
