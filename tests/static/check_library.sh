#!/usr/bin/env bash
# Static checks of libdrk_shim.so and drk's sources:
#  - the exported symbols are exactly the hooked names of interpose/hooks.h and dlsym
#    (both glibc versions);
#  - the library needs nothing but libc (and libdl/libpthread/libelf) and never the driver;
#  - no constructors (drk starts lazily) and no bare dlsym calls (the real one is found
#    with dlvsym and called through a pointer);
#  - getenv only where options are read; no allocation, lock or getenv in the files the
#    launch path runs through;
#  - drk's own kernels (kernels/kernels.h) are in it: the fatbin hidden (local) and 64-byte
#    aligned, as the driver wants it.
# Usage: check_library.sh LIBRARY SOURCE_DIR [--sanitized]
#   --sanitized: the library is a sanitizer build, which needs the sanitizer
#   runtimes and carries their constructors.
set -u
lib=$1 src=$2 sanitized=${3:-}
fail=0
no() { echo "FAIL: $*"; fail=1; }

# CUPTI's ways in (shim/hooks_cupti.c), so drk's GPU timing steps aside for a profiler.
cupti=$(sed -n 's/^DRK_CUPTI_FORWARD(\(cupti[A-Za-z0-9_]*\),.*/\1/p' "$src/shim/hooks_cupti.c")
[ "$(echo "$cupti" | wc -w)" -ge 3 ] || no "CUPTI forwards parsed badly: $cupti"
expected=$( (sed -n 's/^ *X(\(cu[A-Za-z0-9_]*\),.*/\1/p' "$src/interpose/hooks.h"; echo "$cupti" | tr ' ' '\n';
             echo InitializeInjectionNvtx2; echo 'dlsym@GLIBC_2.2.5'; echo 'dlsym@@GLIBC_2.34') | sort)
actual=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
if [ "$expected" != "$actual" ]; then
    no "exported symbols differ from the hook list (< expected, > exported):"
    diff <(echo "$expected") <(echo "$actual") | grep '^[<>]'
fi
[ "$(echo "$expected" | wc -l)" -gt 40 ] || no "hook list parsed badly: $(echo "$expected" | wc -l) names"

while read -r needed; do
    case "$needed" in
        libc.so.6|libdl.so.2|libpthread.so.0|libelf.so.1|ld-linux-x86-64.so.2) ;;
        libasan.so.*|libubsan.so.*) [ -n "$sanitized" ] || no "library needs $needed" ;;
        *) no "library needs $needed" ;;
    esac
done < <(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')

# One .init_array entry is the toolchain's frame_dummy; more would be a constructor.
init=$(readelf -S -W "$lib" | sed -n 's/.*\.init_array *INIT_ARRAY *[0-9a-f]* [0-9a-f]* \([0-9a-f]*\).*/\1/p')
[ -n "$init" ] || no "cannot read .init_array's size"
[ -n "$sanitized" ] || [ $((16#${init:-0})) -le 8 ] || no ".init_array holds $((16#$init / 8)) entries: a constructor?"
readelf -S -W "$lib" | grep -q '\.ctors' && no "library has .ctors"

fatbin=$(nm "$lib" | awk '$3 == "drk_kernels_fatbin" {print $1, $2}')
case "$fatbin" in
    "") no "drk_kernels_fatbin (kernels/) is not in the library" ;;
    *" "[a-z]) [ $((16#${fatbin%% *} % 64)) = 0 ] || no "drk_kernels_fatbin at 0x${fatbin%% *}: not 64-byte aligned" ;;
    *) no "drk_kernels_fatbin is a global symbol ($fatbin): it must be hidden" ;;
esac

code=(base interpose shim alloc evolve kernels)
grep -rnE '__attribute__\s*\(\(\s*(constructor|destructor)' "${code[@]/#/$src/}" && no "constructor in sources"
# (comment lines, which start with * or //, may name dlsym)
grep -rnE '(^|[^_A-Za-z0-9])dlsym\s*\(' --include='*.c' --include='*.h' "${code[@]/#/$src/}" \
    | grep -vE '^[^:]*:[0-9]+:\s*(\*|/\*|//)' && no "bare dlsym call"
grep -rnlE '(^|[^_A-Za-z0-9])getenv\s*\(' --include='*.c' "${code[@]/#/$src/}" | grep -v 'base/settings.c$' && no "getenv outside base/settings.c"
hot=(shim/hooks_launch.c shim/exports.c shim/hook.h shim/calls.h shim/calls.c shim/state.h base/counter.h evolve/registry.c evolve/arena.c evolve/facts.c interpose/real.h alloc/recorder.h shim/hooks_memory.c)
for f in "${hot[@]}"; do
    [ -f "$src/$f" ] || { no "$f (a launch-path file) is missing: update this list"; continue; }
    grep -nE '(^|[^_A-Za-z0-9])(malloc|calloc|realloc|getenv|pthread_mutex_lock|pthread_rwlock_[a-z]*lock|fprintf|printf)\s*\(' "$src/$f" \
        && no "$f: allocation, lock, getenv or stdio on the launch path"
done

[ $fail = 0 ] && echo "static checks passed"
exit $fail
