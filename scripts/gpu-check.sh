#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (and PyTorch with CUDA): starts a private
# torchxd that finds the GPUs through the real libnvidia-ml, runs a job that
# holds 2 GiB of GPU memory and multiplies matrices for 30 s, and prints what
# torchxd says (`torchx gpus`, `torchx status`, `torchx usage`) beside what
# nvidia-smi says.
# The GPU's UUID, the job's memory and its utilization must agree within
# NVML's own granularity. Then the hand-over: a job that ignores SIGTERM holds
# the GPU, a second waits for it, the first is cancelled; the second must start
# only once nvidia-smi no longer lists the first one's process. A few minutes in all.
#   scripts/gpu-check.sh [BIN_DIR]     # default build/bin
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/bin}")
command -v nvidia-smi >/dev/null || { echo "gpu-check: no nvidia-smi: not a GPU machine" >&2; exit 2; }
python=${PYTHON:-python3}
work=$(mktemp -d)
sock=$work/torchxd.sock
"$bin/torchxd" --socket "$sock" --state-dir "$work/state" --run-dir "$work/run" --log-level info \
  >"$work/daemon.log" 2>&1 &
daemon=$!
finish() {
  local rc=$?
  kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true
  if ((rc != 0)); then echo "gpu-check: failed ($rc); the daemon's log ends:" >&2; tail -40 "$work/daemon.log" >&2; fi
  rm -rf "$work"
}
trap finish EXIT
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
tx() { "$bin/torchx" --socket "$sock" "$@"; }
cat >"$work/fill.py" <<'EOF'
import time, torch
held = torch.empty(2 * 2**30 // 4, dtype=torch.float32, device="cuda")  # 2 GiB
a = torch.randn(4096, 4096, device="cuda")
end = time.time() + 30
while time.time() < end:
    a = a @ a
    a = a / a.norm()
torch.cuda.synchronize()
print("done", flush=True)
EOF
echo "== daemon: $(grep -m1 'capacity:' "$work/daemon.log" || true)"
handle=$(cd "$work" && tx run -d -cfg log_dir="$work/logs" utils.python --gpu 1 --script fill.py)
echo "== job $handle"
sleep 15  # CUDA up, memory held, kernels running
echo "== torchx gpus"
tx gpus
echo "== nvidia-smi"
nvidia-smi --query-gpu=index,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw \
  --format=csv
nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv
echo "== torchx status"
tx status "$handle"
echo "== torchx gpus --json (the job's GPU)"
tx gpus --json >"$work/gpus.json"
nvidia-smi --query-gpu=uuid,memory.used --format=csv,noheader,nounits >"$work/smi.csv"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$work/smi-apps.csv"
"$python" - "$work" <<'EOF' || disagree=1
import json, sys
work = sys.argv[1]
smi = dict(l.split(", ") for l in open(f"{work}/smi.csv").read().split("\n") if l)
apps = dict(l.split(", ") for l in open(f"{work}/smi-apps.csv").read().split("\n") if l)
bad = 0
for g in json.load(open(f"{work}/gpus.json"))["gpus"]:
    if g["held_by"] or g["processes"]:
        print(json.dumps(g, indent=1))
    theirs = int(smi.get(g["uuid"], -1))
    # Both read within a second of each other; the job's memory is steady by now.
    ok = abs(g["memory_used_mb"] - theirs) <= max(64, theirs // 50)
    bad += not ok
    print(f"memory used, GPU {g['index']}: torchxd {g['memory_used_mb']} MiB, nvidia-smi {theirs} MiB:", "agree" if ok else "DISAGREE")
    for p in g["processes"]:
        theirs = int(apps.get(str(p["pid"]), -1))
        ok = p["used_mb"] == theirs
        bad += not ok
        print(f"process {p['pid']}: torchxd {p['used_mb']} MiB, nvidia-smi {theirs} MiB:", "agree" if ok else "DISAGREE")
sys.exit(1 if bad else 0)
EOF
tx log "$handle" | tail -3
for _ in $(seq 60); do tx status "$handle" | grep -qE 'State: (SUCCEEDED|FAILED|CANCELLED)' && break; sleep 1; done
echo "== torchx status (ended: its GPU-hours)"
tx status "$handle" | tail -2
echo "== torchx usage --since 1h"
tx usage --since 1h

echo "== hand-over: a holder that ignores SIGTERM, a job waiting behind it"
cat >"$work/hold.py" <<'EOF'
import os, signal, time, torch
signal.signal(signal.SIGTERM, lambda *a: print("SIGTERM ignored", flush=True))
held = torch.empty(2**30 // 4, dtype=torch.float32, device="cuda")
torch.cuda.synchronize()
print("holding pid", os.getpid(), flush=True)
time.sleep(600)
EOF
cat >"$work/next.py" <<'EOF'
import os, time, torch
x = torch.ones(1, device="cuda")
print("next started pid", os.getpid(), "at", time.time(), flush=True)
EOF
holder=$(cd "$work" && tx run -d -cfg log_dir="$work/logs" utils.python --gpu 1 --script hold.py)
for _ in $(seq 60); do tx log "$holder" 2>/dev/null | grep -q holding && break; sleep 1; done
tx log "$holder" | grep holding
next=$(cd "$work" && tx run -d -cfg log_dir="$work/logs" utils.python --gpu 1 --script next.py)
sleep 2
echo "-- the waiting job:"; tx list | grep -E "REASON|${next##*/}" || true
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
start=$(date +%s.%N)
tx cancel --grace-period 5 "$holder"
echo "-- cancel returned after $("$python" -c "import time; print(round(time.time() - $start, 2))") s"
for _ in $(seq 60); do tx status "$next" | grep -qE 'State: (SUCCEEDED|FAILED|CANCELLED)' && break; sleep 1; done
echo "-- events of the holder"; tx events "$holder"
echo "-- events of the next job"; tx events "$next"
tx log "$next" | grep "next started"
echo "== torchx gpus (after)"
tx gpus

echo "== dist.ddp on the GPU (torchrun, NCCL)"
cat >"$work/ddp.py" <<'EOF'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
t = torch.ones(4, device="cuda") * (dist.get_rank() + 1)
dist.all_reduce(t)
print("rank", dist.get_rank(), "of", dist.get_world_size(), "sum", t.tolist(),
      "CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
dist.destroy_process_group()
EOF
ddp=$(cd "$work" && tx run -d -cfg log_dir="$work/logs" dist.ddp -j 1x1 --gpu 1 --script ddp.py)
for _ in $(seq 90); do tx status "$ddp" | grep -qE 'State: (SUCCEEDED|FAILED|CANCELLED)' && break; sleep 1; done
tx status "$ddp" | grep -E "State|Msg"
tx log "$ddp" | grep -E "rank|Error" | tail -5
exit "${disagree:-0}"
