#!/usr/bin/env bash
# Installs what torchxd needs on Debian 12 (only the missing packages; quiet
# when everything is there) and builds it into ./build.
#   scripts/setup.sh            # RelWithDebInfo build
#   BUILD_TYPE=Release scripts/setup.sh
#   BUILD_DIR=build-asan CMAKE_ARGS=-DTORCHXD_SANITIZE=ON scripts/setup.sh
#   SETUP_PACKAGES_ONLY=1 scripts/setup.sh   # install, do not build
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  g++ cmake ninja-build pkg-config
  libuv1-dev nlohmann-json3-dev libsqlite3-dev libcurl4-openssl-dev libspdlog-dev
  libcli11-dev libgtest-dev libgmock-dev libexpected-dev libyaml-cpp-dev libre2-dev libmicrohttpd-dev
  python3-torch python3-jsonschema python3-yaml sqlite3 util-linux systemd
  ${EXTRA_PACKAGES:-}
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[[ ${SETUP_PACKAGES_ONLY:-0} == 1 ]] && exit 0

build_type=${BUILD_TYPE:-RelWithDebInfo}
build_dir=${BUILD_DIR:-build}
# shellcheck disable=SC2086  # CMAKE_ARGS holds several words
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DTORCHXD_WERROR=ON ${CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
