#!/usr/bin/env bash
# Sets up (packages + build) and runs the whole test suite with ctest, then
# builds the tree again with AddressSanitizer + UndefinedBehaviorSanitizer
# (torchxd-shim stays static and plain) and runs the same suite there.
# The local_docker tests also need a Docker-API engine: podman with runc
# (aardvark-dns for container names, iptables for netavark's bridge) and a
# busybox-static rootfs for their image; unshare (util-linux) and ip (iproute2)
# give that engine its own network and mount namespaces.
#   TORCHXD_SANITIZERS=0 scripts/test.sh   # the plain build only
set -euo pipefail
cd "$(dirname "$0")/.."
# The browser tests drive Debian's chromium with playwright-core from npm
# (pinned in tests/browser/package-lock.json); /metrics is checked with the
# Prometheus project's own text parser (python3-prometheus-client); the
# TorchX plugin's tests import the pinned TorchX trees, which need tabulate,
# fsspec, filelock and typing-inspect from Debian. The slurm scheduler's tests
# start a real Slurm on localhost (tests/slurm/slurm_cluster.sh) from Debian's
# slurm-wlm and munge.
EXTRA_PACKAGES="slurm-wlm slurm-client munge podman runc aardvark-dns netavark iptables iproute2 busybox-static uidmap openssl chromium python3-prometheus-client python3-tabulate python3-fsspec python3-filelock python3-typing-inspect python3-importlib-metadata ${EXTRA_PACKAGES:-}" scripts/setup.sh
if command -v npm >/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error --prefix tests/browser
else
  echo "test: npm is not installed: the browser tests will skip"
fi
sanitizers=${TORCHXD_SANITIZERS:-1}
asan_pid=
if [[ $sanitizers != 0 ]]; then
  # The sanitizer build compiles while the plain suite runs: the suite's tests
  # wait on processes, sockets and timers far more than they compute, and they
  # pass with both cores busy. Its output is shown if it fails.
  mkdir -p build-asan
  # Its own process group, so that a failing plain suite stops the compilers too.
  BUILD_DIR=build-asan CMAKE_ARGS=-DTORCHXD_SANITIZE=ON setsid scripts/setup.sh >build-asan/setup.log 2>&1 &
  asan_pid=$!
  trap '[[ -z $asan_pid ]] || kill -- -"$asan_pid" 2>/dev/null || true' EXIT
fi
# Two tests per core: the suite waits on processes, sockets and timers far
# more than it computes (a plain run used ~100 s of CPU in 215 s on 2 cores at
# -j2, and took 130 s at -j4; the sanitizer suite 190 s at -j4, ~270 s at -j2).
jobs=$((2 * $(nproc)))
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$jobs"
if [[ $sanitizers != 0 ]]; then
  echo "test: waiting for the sanitizer build (build-asan/setup.log)"
  if ! wait "$asan_pid"; then
    asan_pid=
    tail -n 60 build-asan/setup.log >&2
    echo "test: the sanitizer build failed: build-asan/setup.log" >&2
    exit 1
  fi
  asan_pid=
  # Any report fails its test: UBSan aborts, ASan stops at the first error.
  ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs"
fi
