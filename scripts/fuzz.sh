#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) into build-fuzz and runs
# each for SECONDS (default 600), two at a time. New inputs that add coverage
# are merged into the kept corpus in tests/fuzz/corpus/<target>/, which the
# suite replays; a crash stops with its reproducer in build-fuzz/findings/.
#   scripts/fuzz.sh                 # every target, 10 minutes each
#   SECONDS_EACH=60 scripts/fuzz.sh protocol appdef
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRA_PACKAGES="clang libclang-rt-14-dev ${EXTRA_PACKAGES:-}" SETUP_PACKAGES_ONLY=1 scripts/setup.sh
targets=("$@")
((${#targets[@]})) || targets=(protocol appdef cfg torchxconfig kubeconfig watch docker_logs image_pull shim_spec shim_files index topology http squeue list_page stored_app)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTORCHXD_FUZZ=ON \
  -DBUILD_TESTING=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/%/_fuzz}"
seconds=${SECONDS_EACH:-600}
mkdir -p build-fuzz/findings build-fuzz/work
run_one() {
  local t=$1 work=build-fuzz/work/$1
  mkdir -p "$work"
  if ! build-fuzz/bin/"$t"_fuzz -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=4096 -timeout=30 \
      -artifact_prefix=build-fuzz/findings/"$t"- "$work" tests/fuzz/corpus/"$t" >build-fuzz/work/"$t".log 2>&1; then
    echo "fuzz: $t FOUND A CRASH: see build-fuzz/work/$t.log and build-fuzz/findings/" >&2
    return 1
  fi
  build-fuzz/bin/"$t"_fuzz -merge=1 -artifact_prefix=build-fuzz/findings/"$t"- tests/fuzz/corpus/"$t" "$work" \
    >>build-fuzz/work/"$t".log 2>&1
  echo "fuzz: $t ran ${seconds}s: $(grep -o 'Done [0-9]* runs' build-fuzz/work/"$t".log | head -1), no finding"
}
status=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  run_one "${targets[i]}" &
  a=$!
  b=
  if ((i + 1 < ${#targets[@]})); then run_one "${targets[i + 1]}" & b=$!; fi
  wait "$a" || status=1
  [[ -z $b ]] || wait "$b" || status=1
done
exit $status
