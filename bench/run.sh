#!/usr/bin/env bash
# Builds torchxd in Release and measures it against its targets (bench/README.md).
# Prints a table; writes the figures to bench/results.json (or $1).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_TYPE=Release BUILD_DIR=build-release scripts/setup.sh >/dev/null
out=${1:-bench/results.json}
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), sched_autogroup $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo absent)"
build-release/bin/torchxd_bench build-release/bin "$out"
# The web page, in headless Chromium (skipped, saying why, without chromium or tests/browser/node_modules).
if [[ -z ${BENCH_ONLY:-} || ,${BENCH_ONLY}, == *,web,* ]] && command -v node >/dev/null; then
  TORCHXD_BIN_DIR=$PWD/build-release/bin node bench/web.mjs "${out%.json}-web.json"
fi
