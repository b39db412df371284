#!/usr/bin/env bash
# bench/setup-time.sh BASELINE [CANDIDATE]
#
# How long a new user waits for the build, measured on clean clones of two
# commits in the same run: CANDIDATE (default HEAD) and BASELINE (any commit,
# e.g. one from before a build change). For each, from a fresh clone:
#   demo   what scripts/demo.sh builds (SETUP_FOR=demo scripts/setup.sh)
#   full   what the test command builds first (scripts/setup.sh: every target)
#   touch  `touch daemon/service.cc` and the full build again
# It prints wall and CPU (user+sys) seconds of each, and the ten slowest
# compile steps of each full build from .ninja_log. Packages must already be
# installed (run scripts/setup.sh once); ccache is switched off so both
# commits build from nothing. Takes about an hour on 2 cores: it is not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=${1:?usage: bench/setup-time.sh BASELINE [CANDIDATE]}
candidate=${2:-HEAD}
work=$(mktemp -d /tmp/torchxd-setup-time.XXXXXX)
trap 'rm -rf "$work"' EXIT
export CCACHE_DISABLE=1

TIMEFORMAT='%R %U %S'
# Runs "$@" and prints "wall cpu" (seconds) on stdout; its own output goes to $log.
timed() {
  local log=$1
  shift
  local t
  t=$( { time "$@" >"$log" 2>&1; } 2>&1 ) || { echo "failed: $* (see $log)" >&2; tail -20 "$log" >&2; exit 1; }
  read -r wall user sys <<<"$t"
  awk -v w="$wall" -v u="$user" -v s="$sys" 'BEGIN { printf "%.0f %.0f\n", w, u + s }'
}

declare -A result
for which in candidate baseline; do
  ref=${!which}
  dir=$work/$which
  git clone -q --no-local . "$dir"
  git -C "$dir" checkout -q "$(git rev-parse "$ref")"
  echo "== $which: $(git -C "$dir" log -1 --format='%h %s' | cut -c1-70)" >&2
  result[$which.demo]=$(cd "$dir" && timed "$work/$which-demo.log" env SETUP_FOR=demo BUILD_DIR=build-demo scripts/setup.sh)
  result[$which.full]=$(cd "$dir" && timed "$work/$which-full.log" env BUILD_DIR=build scripts/setup.sh)
  touch "$dir/daemon/service.cc"
  result[$which.touch]=$(cd "$dir" && timed "$work/$which-touch.log" cmake --build build)
  echo "   ten slowest compile steps of the full build (s):" >&2
  awk 'NR > 1 { t[$4] = ($2 - $1) / 1000 } END { for (f in t) printf "%8.1f  %s\n", t[f], f }' "$dir/build/.ninja_log" |
    sort -rn | head -10 >&2
done

printf '\n%-8s %22s %22s %10s\n' step "candidate wall/cpu s" "baseline wall/cpu s" "cpu ratio"
for step in demo full touch; do
  read -r cw cc <<<"${result[candidate.$step]}"
  read -r bw bc <<<"${result[baseline.$step]}"
  ratio=$(awk -v b="$bc" -v c="$cc" 'BEGIN { printf "%.2fx", (c > 0 ? b / c : 0) }')
  printf '%-8s %22s %22s %10s\n' "$step" "$cw / $cc" "$bw / $bc" "$ratio"
done
