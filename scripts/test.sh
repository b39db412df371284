#!/usr/bin/env bash
# Sets up (packages + build) and runs the whole test suite with ctest.
# The local_docker tests also need a Docker-API engine: podman with runc
# (aardvark-dns for container names, iptables for netavark's bridge) and a
# busybox-static rootfs for their image.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRA_PACKAGES="podman runc aardvark-dns netavark iptables busybox-static uidmap openssl ${EXTRA_PACKAGES:-}" scripts/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)"
