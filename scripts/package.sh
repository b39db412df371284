#!/usr/bin/env bash
# Builds the Debian package: a Release build installed under /usr, stripped,
# with the units, sysusers file, man pages and bash completion, into
# build-deb/torchxd_<version>_<arch>.deb. Install it with
#   sudo apt install ./build-deb/torchxd_*.deb
# which creates group torchx and enables and starts the system torchxd.
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_FOR=demo EXTRA_PACKAGES="dpkg-dev ${EXTRA_PACKAGES:-}" SETUP_PACKAGES_ONLY=1 scripts/setup.sh
cmake -S . -B build-deb -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DBUILD_TESTING=OFF \
  -DTORCHXD_WERROR=ON >/dev/null
cmake --build build-deb -j"$(nproc)"
(cd build-deb && cpack -G DEB >/dev/null)
ls build-deb/torchxd_*.deb
