#!/usr/bin/env bash
# Sets up (packages + build) and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)"
