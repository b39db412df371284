#!/usr/bin/env bash
# The .deb, built from this build tree with cpack, installed into a scratch
# root with dpkg --root (maintainer scripts run with DPKG_ROOT, as dpkg does
# for such roots): its files, dependencies, group, enabled units, man pages
# and completion are checked, the installed torchxd runs a job, and removal
# takes it all away again.
#   deb_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
for tool in dpkg-shlibdeps cpack systemctl systemd-sysusers; do
  if ! command -v "$tool" >/dev/null; then
    echo "package test skipped: $tool is not installed (apt-get install dpkg-dev systemd)"
    exit 0
  fi
done
tmp=$(mktemp -d /tmp/torchxd-deb.XXXXXX)
daemon=
cleanup() {
  [[ -n $daemon ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack"; }
deb=$(ls "$tmp"/out/torchxd_*.deb)
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")

info=$(dpkg-deb --info "$deb")
for dep in libmicrohttpd12 libuv1 libsqlite3-0 systemd; do
  grep -q "Depends:.*$dep" <<<"$info" || fail "Depends lacks $dep: $(grep Depends <<<"$info")"
done
files=$(dpkg-deb -c "$deb")
for f in bin/torchx bin/torchxd libexec/torchxd/torchxd-shim lib/systemd/system/torchxd.service \
    lib/systemd/system/torchxd.socket lib/systemd/user/torchxd.service lib/sysusers.d/torchxd.conf \
    share/man/man1/torchx.1 share/man/man8/torchxd.8 share/bash-completion/completions/torchx \
    share/doc/torchxd/web-ui.md lib/python3/dist-packages/torchxd/scheduler.py \
    lib/python3/dist-packages/torchx_plugins/schedulers/torchxd.py \
    lib/python3/dist-packages/torchxd-0.1.0.dist-info/entry_points.txt; do
  grep -q " \.$prefix/$f\$" <<<"$files" || fail "the package lacks $prefix/$f"
done

root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
touch "$root/var/lib/dpkg/status"
cp /etc/group /etc/passwd "$root/etc/"
grep -v '^torchx:' /etc/group >"$root/etc/group" || true
dpkg --root="$root" --force-script-chrootless --force-depends --force-not-root --log=/dev/null -i "$deb" \
  >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }
grep -q '^torchx:' "$root/etc/group" || fail "postinst did not create group torchx"
[[ -L $root/etc/systemd/system/sockets.target.wants/torchxd.socket ]] || fail "torchxd.socket is not enabled"
[[ -L $root/etc/systemd/system/multi-user.target.wants/torchxd.service ]] || fail "torchxd.service is not enabled"
grep -q '^ExecStart='"$prefix"'/bin/torchxd --system' "$root$prefix/lib/systemd/system/torchxd.service" ||
  fail "the unit does not start the installed torchxd"
grep -q '^\.SS run$' "$root$prefix/share/man/man1/torchx.1" || fail "torchx.1 lacks the run command"
grep -q 'ui-listen' "$root$prefix/share/man/man8/torchxd.8" || fail "torchxd.8 lacks --ui-listen"
for page in man1/torchx.1 man8/torchxd.8; do
  for section in EXAMPLES ENVIRONMENT FILES 'EXIT STATUS'; do
    grep -q "^\.SH $section\$" "$root$prefix/share/man/$page" || fail "$page lacks $section"
  done
  long=$(awk 'length > 80' "$root$prefix/share/man/$page")
  [[ -z $long ]] || fail "$page has lines over 80 columns: $long"
done
# torchxd --help points at documentation that the package installs.
docdir=$("$root$prefix/bin/torchxd" --help | sed -n 's/.*installed in \(\/[^ ]*\)$/\1/p')
[[ -f $root$docdir/README.md && -f $root$docdir/gpus.md && -f $root$docdir/protocol.md ]] ||
  fail "torchxd --help points at $docdir, which the package does not fill"

# The installed binaries find each other (torchxd-shim in ../libexec/torchxd) and run a job.
bin=$root$prefix/bin
sock=$tmp/run/torchxd.sock
mkdir -p "$tmp/run"
"$bin/torchxd" --socket "$sock" --state-dir "$tmp/state" >"$tmp/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
out=$(TORCHX_NO_AUTOSTART=1 "$bin/torchx" --socket "$sock" run --wait utils.echo --msg packaged 2>&1) ||
  fail "the installed torchx could not run a job: $out $(cat "$tmp/daemon.log")"
grep -q 'echo/0 packaged' <<<"$out" || fail "unexpected output: $out"

# Completion asks the programs themselves.
completion=$(PATH="$bin:$PATH" TORCHX_NO_AUTOSTART=1 TORCHXD_SOCKET="$sock" bash -c "
  source '$root$prefix/share/bash-completion/completions/torchx'
  COMP_WORDS=(torchx st); COMP_CWORD=1; _torchx; echo \"\${COMPREPLY[*]}\"
  COMP_WORDS=(torchx run utils.e); COMP_CWORD=2; _torchx; echo \"\${COMPREPLY[*]}\"
  COMP_WORDS=(torchx log --str); COMP_CWORD=2; _torchx; echo \"\${COMPREPLY[*]}\"
  COMP_WORDS=(torchx status ''); COMP_CWORD=2; _torchx; echo \"\${COMPREPLY[*]}\"")
grep -q '^status$' <<<"$(sed -n 1p <<<"$completion" | tr ' ' '\n')" || fail "no command completion: $completion"
grep -q 'utils.echo' <<<"$(sed -n 2p <<<"$completion")" || fail "no component completion: $completion"
grep -q -- '--streams' <<<"$(sed -n 3p <<<"$completion")" || fail "no option completion: $completion"
grep -q 'local_cwd://torchx/echo-' <<<"$(sed -n 4p <<<"$completion")" || fail "no app handle completion: $completion"
kill "$daemon"
wait "$daemon" || true
daemon=

dpkg --root="$root" --force-script-chrootless --force-not-root --log=/dev/null -r torchxd >"$tmp/dpkg.log" 2>&1 ||
  { cat "$tmp/dpkg.log"; fail "dpkg -r"; }
[[ ! -e $bin/torchxd ]] || fail "torchxd is still installed"
[[ ! -L $root/etc/systemd/system/sockets.target.wants/torchxd.socket ]] || fail "torchxd.socket is still enabled"
echo "package test passed: $(basename "$deb") installs, runs a job, completes, and removes cleanly"
