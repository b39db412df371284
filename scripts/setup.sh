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

# What building torchx, torchxd and torchxd-shim needs, and python3-torch for the demo's job.
PACKAGES=(
  g++ cmake ninja-build pkg-config
  libuv1-dev nlohmann-json3-dev libsqlite3-dev libcurl4-openssl-dev libspdlog-dev
  libcli11-dev libexpected-dev libyaml-cpp-dev libre2-dev libmicrohttpd-dev
  python3-torch
)
# What the test suite needs besides.
TEST_PACKAGES=(libgtest-dev libgmock-dev python3-jsonschema python3-yaml sqlite3 util-linux systemd dpkg-dev)
demo=0
[[ ${SETUP_FOR:-test} == demo ]] && demo=1
((demo)) || PACKAGES+=("${TEST_PACKAGES[@]}")
# shellcheck disable=SC2206  # EXTRA_PACKAGES is a list of words
PACKAGES+=(${EXTRA_PACKAGES:-})

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[[ ${SETUP_PACKAGES_ONLY:-0} == 1 ]] && exit 0

build_type=${BUILD_TYPE:-RelWithDebInfo}
build_dir=${BUILD_DIR:-build}
# shellcheck disable=SC2086  # CMAKE_ARGS holds several words
if ((demo)); then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DTORCHXD_WERROR=ON -DBUILD_TESTING=OFF \
    ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" --target torchx torchxd torchxd-shim
else
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DTORCHXD_WERROR=ON -DBUILD_TESTING=ON \
    ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$build_dir" -j"$(nproc)"
fi
