#!/usr/bin/env bash
# The package on a fresh Debian 12 with systemd as PID 1: debootstraps a
# minimal bookworm root (from Debian's archive), boots it in podman
# (--systemd=always), then `apt install ./torchxd_*.deb` there and checks
# that the system torchxd runs, a user in group torchx runs a job and reads
# the page's API, a job survives `systemctl restart torchxd` and a reinstall
# (each line once), and `apt remove` stops and removes it. Not part of the
# suite (it downloads a base system); run it after scripts/package.sh.
#   scripts/deb-check.sh [build-deb/torchxd_*.deb]
set -euo pipefail
cd "$(dirname "$0")/.."
deb=$(realpath "${1:-$(ls build-deb/torchxd_*.deb | head -1)}")
EXTRA_PACKAGES="debootstrap podman runc ${EXTRA_PACKAGES:-}" SETUP_FOR=demo SETUP_PACKAGES_ONLY=1 scripts/setup.sh
work=$(mktemp -d /tmp/torchxd-deb-check.XXXXXX)
name=torchxd-deb-check-$$
export CONTAINERS_CONF=$PWD/tests/docker/containers.conf
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
step() { echo "deb-check: $*"; }

step "debootstrap bookworm (minbase + systemd)"
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl,ca-certificates bookworm "$work/root" \
  http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 || { tail "$work/debootstrap.log"; exit 1; }
cp "$deb" "$work/root/root/"
printf 'for i in $(seq 1 15); do echo tick $i; sleep 1; done\n' >"$work/root/tick.sh"
podman run -d --name "$name" --systemd=always --privileged --network host --cgroupns=host \
  --rootfs "$work/root" /sbin/init >/dev/null
inside() { podman exec "$name" sh -c "$*"; }
for _ in $(seq 50); do inside systemctl is-system-running >/dev/null 2>&1 && break; sleep 0.2; done

step "apt install ./$(basename "$deb")"
inside "apt-get update -qq && cd /root && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ./$(basename "$deb") >/dev/null"
inside "systemctl is-active torchxd.socket torchxd.service" | tr '\n' ' '; echo
inside "getent group torchx && test -S /run/torchxd/ui.sock"

step "a user in group torchx runs a job and reads the page's API"
inside "useradd -m -G torchx alice"
as_alice() { inside "su alice -c 'cd ~ && TORCHXD_SOCKET=/run/torchxd/torchxd.sock $*'"; }
as_alice torchx run --wait utils.echo --msg hello 2>&1 | grep -q 'echo/0 hello'
inside "su alice -c 'curl -sf --unix-socket /run/torchxd/ui.sock http://localhost/api/session'" | grep -q '"user":"alice"'

step "a job survives systemctl restart torchxd and a reinstall"
h=$(as_alice torchx run -d utils.sh sh /tick.sh | tail -1)
sleep 2
inside "systemctl restart torchxd"
sleep 2
inside "cd /root && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall ./$(basename "$deb") >/dev/null"
as_alice torchx status "$h" | grep -q RUNNING
for _ in $(seq 40); do as_alice torchx status "$h" | grep -q SUCCEEDED && break; sleep 0.5; done
as_alice torchx status "$h" | grep -q SUCCEEDED
lines=$(as_alice torchx log "$h" | grep -c tick)
[[ $lines == 15 ]] || { echo "deb-check: $lines of 15 lines"; exit 1; }

step "apt remove"
inside "DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq torchxd >/dev/null"
if inside "systemctl is-active --quiet torchxd.service"; then echo "deb-check: still running"; exit 1; fi
if inside "test -e /usr/bin/torchxd"; then echo "deb-check: still installed"; exit 1; fi
echo "deb-check: passed"
