#!/usr/bin/env bash
# Installs what torchxd needs on Debian 12 (only the missing packages; quiet
# when everything is there) and builds it into ./build.
#   scripts/setup.sh            # RelWithDebInfo build
#   BUILD_TYPE=Release scripts/setup.sh
#   BUILD_DIR=build-asan CMAKE_ARGS=-DTORCHXD_SANITIZE=ON scripts/setup.sh
#   SETUP_PACKAGES_ONLY=1 scripts/setup.sh   # install, do not build
#   SETUP_FOR=demo scripts/setup.sh          # only what the demo runs: torchx, torchxd, torchxd-shim
set -euo pipefail
cd "$(dirname "$0")/.."

# What building torchx, torchxd and torchxd-shim needs; python3-torch (the demo's
# job, and the tests') is not needed to build, so it installs while the build runs.
PACKAGES=(
  g++ cmake ninja-build pkg-config
  libuv1-dev nlohmann-json3-dev libsqlite3-dev libcurl4-openssl-dev libspdlog-dev
  libcli11-dev libexpected-dev libyaml-cpp-dev libre2-dev libmicrohttpd-dev
)
RUNTIME_PACKAGES=(python3-torch)
# What the test suite needs besides.
TEST_PACKAGES=(libgtest-dev libgmock-dev python3-jsonschema python3-yaml sqlite3 util-linux systemd dpkg-dev file)
demo=0
[[ ${SETUP_FOR:-test} == demo ]] && demo=1
((demo)) || PACKAGES+=("${TEST_PACKAGES[@]}")
# shellcheck disable=SC2206  # EXTRA_PACKAGES is a list of words (what the tests run, not what they build)
RUNTIME_PACKAGES+=(${EXTRA_PACKAGES:-})

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
updated=0
# Installs those of "$@" not installed yet (apt-get update first, once).
install() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  if ((!updated)); then
    $sudo apt-get update -qq
    updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
install "${PACKAGES[@]}"
if [[ ${SETUP_PACKAGES_ONLY:-0} == 1 ]]; then
  install "${RUNTIME_PACKAGES[@]}"
  exit 0
fi
# The runtime packages download and unpack while the compiler runs (apt and
# the build use different resources); the script waits for both.
install "${RUNTIME_PACKAGES[@]}" &
runtime_pid=$!

build_type=${BUILD_TYPE:-RelWithDebInfo}
build_dir=${BUILD_DIR:-build}
# -g1 (line tables: backtraces and profiles with file:line, not variables):
# full -g costs a third more compile time. Set CMAKE_ARGS to override.
flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
if command -v ccache >/dev/null; then
  flags+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)  # a re-run rebuilds nothing it has seen
fi
# shellcheck disable=SC2086  # CMAKE_ARGS holds several words
if ((demo)); then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DTORCHXD_WERROR=ON -DBUILD_TESTING=OFF \
    "${flags[@]}" ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" --target torchx torchxd torchxd-shim
else
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DTORCHXD_WERROR=ON -DBUILD_TESTING=ON \
    "${flags[@]}" ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$build_dir" -j"$(nproc)"
fi
wait "$runtime_pid" || { echo "setup: installing ${RUNTIME_PACKAGES[*]} failed" >&2; exit 1; }
