// The replica's process tree, as torchxd-shim sees it: the shim is a child
// subreaper, so every orphaned descendant of the replica is reparented to it
// and can always be found (/proc/self/task/<tid>/children) and killed.
//
// Thread contract: the shim's single thread.
#ifndef TORCHXD_SUPERVISOR_SHIM_TREE_H_
#define TORCHXD_SUPERVISOR_SHIM_TREE_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace torchxd::supervisor {

struct ReplicaChild {
  pid_t pid = -1;
  bool reaped = false;
  int status = 0;  // waitpid status once reaped
  bool childless = false;  // the last ReapAvailable found no child at all (ECHILD)
  bool group_failed = false;  // LaunchReplica failed entering the cgroup, before the exec
};

struct ReplicaLaunch {
  std::string program;  // resolved path
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
  int stdout_fd = -1;
  int stderr_fd = -1;
  unsigned long nofile = 0;
  // A cgroup's cgroup.procs, opened for writing: the replica enters that group
  // first thing, before it runs anything (-1: it stays where the shim is).
  int cgroup_procs_fd = -1;
};

// Starts (vfork + exec) the replica in its own session and process group, with a
// parent-death SIGKILL (if the shim dies, the replica dies instead of
// writing into a pipe nobody reads). 0 on success, else the errno of the
// failed step (the exec's, stored by the child before it exits).
int LaunchReplica(const ReplicaLaunch& launch, ReplicaChild& child);

// Reaps every exited descendant without blocking; records the replica's status.
void ReapAvailable(ReplicaChild& child);
// SIGKILL to the replica's group and every descendant until none is left
// (SIGKILLed processes cannot fork, so this ends; ~20 s at most for D-state).
void KillTree(ReplicaChild& child);
// TERM+CONT to the replica's process group.
void TerminateGroup(const ReplicaChild& child);

// The program to exec: a name with '/' as is (relative to cwd), a bare name
// searched in the replica's PATH. "" with `err` when there is none.
std::string ResolveProgram(const std::string& entrypoint, const std::string& cwd,
                           const std::vector<std::string>& env, int& err);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_TREE_H_
