#!/usr/bin/env bash
# bash completion (packaging/torchx.bash-completion) through bash itself, with
# COMP_LINE/COMP_POINT as bash sets them and COMP_WORDS split at its default
# COMP_WORDBREAKS (':' and '=' included): handles across their ':' and '//',
# ROLE/REPLICA for log, queue names, -cfg keys per scheduler, a component's
# options. Against a private torchxd of this build.
#   completion_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$(cd "$1" && pwd)
completion=$2/packaging/torchx.bash-completion
tmp=$(mktemp -d /tmp/torchxd-completion.XXXXXX)
daemon=
cleanup() {
  [[ -n $daemon ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

sock=$tmp/torchxd.sock
"$bin/torchxd" --socket "$sock" --state-dir "$tmp/state" --queue default --queue big:weight=2 >"$tmp/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
export PATH="$bin:$PATH" TORCHX_NO_AUTOSTART=1 TORCHXD_SOCKET=$sock
handle=$(cd "$tmp" && torchx run --wait utils.echo --num_replicas 2 --msg hi 2>/dev/null | head -1)
[[ $handle == local_cwd://torchx/echo-* ]] || fail "no app to complete: $handle $(cat "$tmp/daemon.log")"

# What bash would offer for LINE (the cursor at its end), one answer per line.
complete_line() {
  bash -c '
    source "$1"
    COMP_LINE=$2
    COMP_POINT=${#COMP_LINE}
    # The words as bash splits them with its default COMP_WORDBREAKS.
    words=$(sed -E "s/([:=])/ \1 /g" <<<"$COMP_LINE")
    read -ra COMP_WORDS <<<"$words"
    [[ $COMP_LINE =~ [[:space:]]$ ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    _torchx
    printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$1"
}
expect() {  # expect LINE ANSWER...: each ANSWER is among what LINE completes to
  local line=$1 got
  shift
  got=$(complete_line "$line")
  for want in "$@"; do
    grep -qxF -- "$want" <<<"$got" || fail "\`$line<TAB>\` does not offer \`$want\`; it offers: $(tr '\n' ' ' <<<"$got")"
  done
}
expect_not() {
  local line=$1 got
  shift
  got=$(complete_line "$line")
  for unwanted in "$@"; do
    ! grep -qxF -- "$unwanted" <<<"$got" || fail "\`$line<TAB>\` offers \`$unwanted\`"
  done
}

trimmed=${handle#local_cwd:}  # bash already holds "local_cwd:" as words of their own
expect "torchx st" status
expect "torchx status " "$handle"
expect "torchx status local_cwd://tor" "$trimmed"
expect "torchx events local_cwd://torchx/echo-" "$trimmed"
expect "torchx log $handle/" "$trimmed/echo"
expect "torchx log $handle/echo/" "$trimmed/echo/0" "$trimmed/echo/1"
expect "torchx queue " default big
expect "torchx run -cfg queue=" default big
expect "torchx run -cfg log_dir=/tmp,queue=b" big
expect "torchx run -cfg " log_dir= queue= max_duration=
expect "torchx run -s local_docker -cfg " copy_env= queue=
expect_not "torchx run -s local_docker -cfg " log_dir=
expect "torchx run utils.echo --" --msg --num_replicas
expect "torchx run utils.e" utils.echo
expect "torchx log --str" --streams
echo "completion test passed"
