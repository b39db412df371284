#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (and PyTorch with CUDA): starts a private
# torchxd that finds the GPUs through the real libnvidia-ml, runs a job that
# holds 2 GiB of GPU memory and multiplies matrices for 30 s, and prints what
# torchxd says (`torchx gpus`, `torchx status`, `torchx usage`) beside what
# nvidia-smi says.
# The GPU's UUID, the job's memory and its utilization must agree within
# NVML's own granularity. A few minutes in all.
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
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$work"' EXIT
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
tx gpus --json | "$python" -c '
import json, sys
for g in json.load(sys.stdin)["gpus"]:
    if g["held_by"] or g["processes"]:
        print(json.dumps(g, indent=1))'
tx log "$handle" | tail -3
for _ in $(seq 60); do tx status "$handle" | grep -qE 'State: (SUCCEEDED|FAILED|CANCELLED)' && break; sleep 1; done
echo "== torchx status (ended: its GPU-hours)"
tx status "$handle" | tail -2
echo "== torchx usage --since 1h"
tx usage --since 1h
