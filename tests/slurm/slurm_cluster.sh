#!/bin/bash
# A real Slurm on localhost for tests and the README's walk-through, from
# Debian's slurm-wlm and munge: munged, slurmctld and two slurmd (two nodes:
# a heterogeneous job puts each het group on a node of its own), all state in
# DIR, on free ports, cgroup-free (proctrack/linuxproc, task/none).
#
#   slurm_cluster.sh start DIR      prints the slurm.conf to export as SLURM_CONF
#   slurm_cluster.sh restart-ctld DIR
#   slurm_cluster.sh stop-ctld DIR | start-ctld DIR
#   slurm_cluster.sh stop DIR       cancels every job, stops the daemons
# Exit 77 (with the reason) where Slurm cannot run here: not root, packages missing.
set -euo pipefail
cmd=${1:?usage: slurm_cluster.sh start|stop|restart-ctld|stop-ctld|start-ctld DIR}
dir=${2:?DIR}
sbin=/usr/sbin

skip() { echo "slurm cluster unavailable: $*" >&2; exit 77; }

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_for() {  # seconds, command...
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# True while process $1 runs: a zombie has ended (kill -0 still finds it until
# whoever adopted the daemons reaps it, which some init processes do late).
running() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]; }
not_running() { local p; for p in "$@"; do ! running "$p" || return 1; done; }

start_ctld() {
  setsid $sbin/slurmctld -D -i -f "$dir/slurm.conf" >"$dir/log/ctld.out" 2>&1 < /dev/null &
  echo $! >"$dir/ctld.pid"
  wait_for 15 env SLURM_CONF="$dir/slurm.conf" scontrol ping || { cat "$dir/log/ctld.out" >&2; skip "slurmctld did not answer"; }
}

stop_ctld() {
  [[ -f $dir/ctld.pid ]] || return 0
  local pid; pid=$(cat "$dir/ctld.pid")
  kill "$pid" 2>/dev/null || true
  wait_for 20 not_running "$pid" || kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/ctld.pid"
}

case $cmd in
start)
  [[ $(id -u) == 0 ]] || skip "slurmd must run as root to start jobs as their users"
  for b in $sbin/munged $sbin/slurmctld $sbin/slurmd; do [[ -x $b ]] || skip "$b is not installed (apt-get install slurm-wlm munge)"; done
  for b in sbatch squeue scancel sinfo scontrol; do command -v $b >/dev/null || skip "$b is not on PATH (apt-get install slurm-client)"; done
  mkdir -p "$dir"/{munge,state,log,spool/n0,spool/n1}
  chmod 711 "$dir" "$dir/munge"
  head -c 1024 /dev/urandom >"$dir/munge/key"
  chmod 400 "$dir/munge/key"
  # The nodes are named for this machine's host name and another name of it (torchrun hosts
  # its rendezvous on the node whose host name het group 0's node has: the lighter node,
  # which Slurm fills first). Slurm takes "localhost" for the real host name.
  n0=$(hostname)
  n1=$(awk -v h="$n0" '$1 ~ /^127\./ { for (i = 2; i <= NF; i++) if ($i != "localhost" && $i != h) print $i }' /etc/hosts | head -1)
  if [[ $n0 != localhost && -n $n1 ]] && getent hosts "$n0" >/dev/null; then
    touch "$dir/nodes-resolve"
  else
    n0=n0 n1=n1
  fi
  cat >"$dir/slurm.conf" <<CONF
ClusterName=torchxdtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pidfile
SlurmdPidFile=$dir/slurmd-%n.pidfile
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
MinJobAge=3600
SlurmdParameters=config_overrides
SlurmctldTimeout=10
KillWait=5
NodeName=$n0 NodeHostname=$n0 NodeAddr=127.0.0.1 Port=$(free_port) Weight=1 CPUs=8 RealMemory=8000 State=UNKNOWN
NodeName=$n1 NodeHostname=$n1 NodeAddr=127.0.0.1 Port=$(free_port) Weight=2 CPUs=8 RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=$n0,$n1 Default=YES MaxTime=INFINITE State=UP
PartitionName=down Nodes=$n0,$n1 MaxTime=INFINITE State=DOWN
CONF
  sed -i "s|^SlurmdSpoolDir=.*|SlurmdSpoolDir=$dir/spool/%n|" "$dir/slurm.conf"
  setsid $sbin/munged -F --force -S "$dir/munge/socket" --key-file="$dir/munge/key" --pid-file="$dir/munge/pid" \
    --seed-file="$dir/munge/seed" --log-file="$dir/log/munged.log" >"$dir/log/munged.out" 2>&1 < /dev/null &
  echo $! >"$dir/munged.pid"
  wait_for 10 test -S "$dir/munge/socket" || skip "munged did not start: $(cat "$dir/log/munged.out")"
  mkdir -p "$dir/spool/$n0" "$dir/spool/$n1"
  start_ctld
  i=0
  for n in $n0 $n1; do
    setsid $sbin/slurmd -D -N "$n" -f "$dir/slurm.conf" >"$dir/log/slurmd-$n.out" 2>&1 < /dev/null &
    echo $! >"$dir/slurmd$i.pid"
    i=$((i + 1))
  done
  export SLURM_CONF=$dir/slurm.conf
  wait_for 30 bash -c '[[ $(sinfo -h -p debug -o "%D %T" | grep -c idle) -ge 1 && $(sinfo -h -N -p debug -o "%T" | grep -c idle) == 2 ]]' ||
    { cat "$dir"/log/*.out >&2; skip "the two slurmd did not register"; }
  echo "$dir/slurm.conf"
  ;;
stop)
  export SLURM_CONF=$dir/slurm.conf
  scancel --full --user=root --state=pending,running >/dev/null 2>&1 || true
  for u in $(squeue -h -o %u 2>/dev/null | sort -u); do scancel --user="$u" >/dev/null 2>&1 || true; done
  wait_for 10 bash -c '[[ -z $(squeue -h -t running,completing -o %i) ]]' || true
  slurmds=$(cat "$dir"/slurmd*.pid 2>/dev/null || true)
  for p in $slurmds; do kill "$p" 2>/dev/null || true; done
  # A slurmd whose step could not tell an absent slurmctld it ended waits on it: 10 s, then
  # it goes, and so do the step daemons of these nodes (they hold the nodes' logs open).
  wait_for 10 not_running $slurmds || true
  for p in $slurmds; do kill -9 "$p" 2>/dev/null || true; done
  for p in $(pgrep -x slurmstepd || true); do
    if find "/proc/$p/fd" -lname "$dir/*" 2>/dev/null | grep -q .; then kill -9 "$p" 2>/dev/null || true; fi
  done
  rm -f "$dir"/slurmd*.pid
  stop_ctld
  [[ -f $dir/munged.pid ]] && kill "$(cat "$dir/munged.pid")" 2>/dev/null
  rm -f "$dir/munged.pid"
  ;;
restart-ctld) stop_ctld; start_ctld ;;
stop-ctld) stop_ctld ;;
start-ctld) start_ctld ;;
*) echo "unknown command $cmd" >&2; exit 2 ;;
esac
