#!/usr/bin/env bash
# The instructions drk itself executes per cuLaunchKernel (an observed launch
# of a known kernel and shape), counted by callgrind on the stand-in driver:
# instructions are counted inside drk's cuLaunchKernel and not inside the
# driver's one it calls (callgrind toggles collection at each function of
# that name). Two runs, N and 2N launches; their difference over N is the
# steady-state cost, free of start-up. Deterministic for a given build, so a
# bound catches work added to the launch path. Not a timing.
# Usage: launch_instructions.sh LIBRARY LAUNCH_LOOP [BOUND]
set -u
lib=$1 loop=$2 bound=${3:-150}
command -v valgrind >/dev/null || { echo "FAIL: valgrind not found (scripts/setup.sh installs it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() {
    LD_PRELOAD=$lib DRK_REPORT= valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$1" \
        --toggle-collect=cuLaunchKernel "$loop" "$1" >"$tmp/log.$1" 2>&1 || { cat "$tmp/log.$1"; exit 1; }
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/log.$1"
}
n=1000
a=$(count $n) b=$(count $((2 * n)))
[ -n "$a" ] && [ -n "$b" ] || { echo "FAIL: no callgrind count"; cat "$tmp"/log.*; exit 1; }
per=$(( (b - a) / n ))
echo "drk's own instructions per cuLaunchKernel: $per ($a for $n launches, $b for $((2 * n)); bound $bound)"
[ "$per" -gt 0 ] || { echo "FAIL: nothing counted inside drk's cuLaunchKernel"; exit 1; }
[ "$per" -le "$bound" ] || { echo "FAIL: the launch path costs more than $bound instructions"; exit 1; }
