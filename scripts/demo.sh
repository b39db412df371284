#!/usr/bin/env bash
# The main job: set up (packages, build), then run a real 2-node distributed
# PyTorch job (torch.distributed all-reduce on CPU/gloo) through torchxd and
# show its status and logs. `torchx` starts the user's torchxd if none runs.
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_FOR=demo scripts/setup.sh   # torchx, torchxd and torchxd-shim only; the tests build in scripts/test.sh
torchx=${BUILD_DIR:-build}/bin/torchx
# A free rendezvous port, so concurrent runs never collide.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
set -x
# Debian's torch 1.13 torchrun needs --tee 1 and PET_REDIRECTS=1 on Python 3.11.
# As in TorchX, `run` streams each replica's lines (`train/0 ...`) to stderr and
# exits 0 only if the job SUCCEEDED; the handle is its only stdout line.
handle=$("$torchx" run dist.ddp -j 2x1 --tee 1 --env PET_REDIRECTS=1 --rdzv_port "$port" \
  --script examples/train.py -- --steps 5)
"$torchx" status "$handle"
"$torchx" log -n 3 "$handle/train/0"   # the stored log, readable from any shell
"$torchx" list
"$torchx" daemon status  # started by the first torchx command, still running
