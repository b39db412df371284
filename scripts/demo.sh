#!/usr/bin/env bash
# Sets up (packages + build) and runs the job-model demo: the builtin
# components, then what `dist.ddp -j 2x1` on the example training script
# expands to, per replica, on the local_cwd scheduler.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
torchx=${BUILD_DIR:-build}/cli/torchx
set -x
"$torchx" builtins
"$torchx" run --dryrun -s local_cwd dist.ddp -j 2x1 --tee 1 --env PET_REDIRECTS=1 \
  --script examples/train.py -- --steps 5
