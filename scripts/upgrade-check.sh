#!/usr/bin/env bash
# The live-restore upgrade check: builds git REF (default HEAD~1) in a
# temporary worktree and runs LiveRestoreTest.APreviousBuilds… with it: the
# replicas REF's daemon and shims started must be adopted, cancelled and
# finished by this tree's build (run scripts/test.sh or setup.sh first).
#   scripts/upgrade-check.sh [REF]
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:-HEAD~1}
prev=$(mktemp -d /tmp/torchxd-prev.XXXXXX)
trap 'git worktree remove --force "$prev/src" >/dev/null 2>&1 || true; rm -rf "$prev"' EXIT
git worktree add --detach "$prev/src" "$ref" >/dev/null
cmake -S "$prev/src" -B "$prev/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$prev/build" --target torchxd torchxd-shim
echo "upgrade check: $(git rev-parse --short "$ref") -> $(git rev-parse --short HEAD) (working tree)"
TORCHXD_PREVIOUS_BIN="$prev/build/bin" ctest --test-dir "${BUILD_DIR:-build}" \
  -R 'LiveRestoreTest.APreviousBuildsReplicasAreAdoptedCancelledAndFinished' --output-on-failure
