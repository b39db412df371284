#!/usr/bin/env bash
# The main job: set up (packages, build), then run a real 2-node distributed
# PyTorch job (torch.distributed all-reduce on CPU/gloo) through torchxd and
# show its status and logs. `torchx` starts the user's torchxd if none runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
torchx=${BUILD_DIR:-build}/bin/torchx
# A free rendezvous port, so concurrent runs never collide.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
set -x
# Debian's torch 1.13 torchrun needs --tee 1 and PET_REDIRECTS=1 on Python 3.11.
handle=$("$torchx" run dist.ddp -j 2x1 --tee 1 --env PET_REDIRECTS=1 --rdzv_port "$port" \
  --script examples/train.py -- --steps 5)
"$torchx" log -t "$handle"
"$torchx" status "$handle"
"$torchx" list
"$torchx" daemon status  # started by the first torchx command, still running
