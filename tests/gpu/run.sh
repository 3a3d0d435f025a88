#!/usr/bin/env bash
# The GPU suite: real CUDA programs run natively, under drk (its device pool
# on, the default), and under drk with DRK_DISABLE=1, each counted
# independently by a CUPTI injection library; check.py then holds drk's report
# against CUPTI, the programs' own counts and the native run. Run from the
# repository root on a machine with a GPU:
#
#   tests/gpu/run.sh [BUILD_DIR] [WORKLOAD...]
#
# BUILD_DIR (default: build) holds lib/libdrk_shim.so and tests/gpu/ (the
# programs and libdrk_test_cupti_count.so). WORKLOADs (default: all) are among
# rt_vecadd drv_vecadd routes triton_add cupy_ops jax_jit ppo vmm_heap vmm_pool
# alloc_heavy host_map host_reuse ctx_reset green_ctx ipc_pair alloc_frag alloc_memcheck gpt_nocache
# gpt_async gputime kernels_check kernels_check_ptx kernels_memcheck evolve.
# The memory workloads add modes: alloc_frag runs under DRK_DEFRAG=0 too (a
# pool that cannot stitch: it must run out of memory), ipc_pair under
# DRK_ALLOC=0; alloc_memcheck runs alloc_heavy under compute-sanitizer's
# memcheck, natively and with drk preloaded; gpt_nocache and gpt_async train
# with PYTORCH_NO_CUDA_MEMORY_CACHING=1 and with PyTorch's cudaMallocAsync
# backend. kernels_check runs drk's own kernels (kernels/) against a CPU
# reference, from their SASS and (kernels_check_ptx) their JIT'd PTX, and
# kernels_memcheck runs its quick form under compute-sanitizer's memcheck.
# evolve (evolve_check.py) runs programs/evolve_hazards.cu natively, under drk
# with DRK_EVOLVE=1 and with a planted bad variant (DRK_EVOLVE_PLANT), and the
# PPO trainer under DRK_EVOLVE=1: never a wrong result, the kernels drk cannot
# see refused, the n-body's win served.
#
# Every check prints one PASS/FAIL line; the last line is "N passed, M failed"
# and the exit status is non-zero when M > 0. With $OUT set, the logs, CUPTI
# counts and drk reports go to $OUT/gpu-suite.tar.gz and the printed lines to
# $OUT/gpu-suite-summary.txt.
#
# Environment: PYTHON (default python3); DRK_GPU_TIMEOUT (seconds one Python
# run may take, default 180); DRK_GPU_BUDGET (seconds for the whole suite,
# default 540: later workloads are failed as skipped rather than overrun);
# DRK_GPU_CUPTI_LIB (the libcupti.so.13 to use instead of searching for one);
# DRK_GPU_SANITIZER (the compute-sanitizer to use); DRK_GPU_EVOLVE (default
# 1: each workload judged by "check.py workload" also runs in mode "evolve":
# drk with DRK_EVOLVE=1 and DRK_PROFILE=1, every round timed for the shares
# below, without the CUPTI counter, whose injection would make drk's timing
# step aside; check.py --evolve holds its output to the native run's byte
# for byte and prints the share of GPU time drk could evolve and what it
# served; 0 leaves the mode out); DRK_GPU_GROW=1 (every run under drk has
# its page grower on, DRK_ALLOC_GROW=1). Every run under drk has a cache of
# its own (DRK_CACHE_DIR), so no run's evolution finds another's results.
# Other DRK_* variables and PyTorch's allocator settings are removed from
# every run: each mode sets its own.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
py_limit=${DRK_GPU_TIMEOUT:-180}
budget=${DRK_GPU_BUDGET:-540}
all_workloads=(rt_vecadd drv_vecadd routes triton_add cupy_ops jax_jit ppo vmm_heap vmm_pool
    alloc_heavy host_map host_reuse ctx_reset green_ctx ipc_pair alloc_frag alloc_memcheck gpt_nocache gpt_async gputime
    kernels_check kernels_check_ptx kernels_memcheck evolve)

build_arg=${1:-build}
[ $# -gt 0 ] && shift
if [ $# -gt 0 ]; then workloads=("$@"); else workloads=("${all_workloads[@]}"); fi

work=$(mktemp -d "${TMPDIR:-/tmp}/drk-gpu-suite.XXXXXX") || { echo "0 passed, 1 failed"; exit 1; }
summary=$work/summary.txt
pass=0
fail=0
start_s=$(date +%s)

say() { printf '%s\n' "$*" | tee -a "$summary"; }

# Tally lines that start with PASS or FAIL; print everything.
record() {
    local line seen=0
    while IFS= read -r line; do
        [ -z "$line" ] && continue
        say "$line"
        case $line in
        PASS*) pass=$((pass + 1)) seen=1 ;;
        FAIL*) fail=$((fail + 1)) seen=1 ;;
        esac
    done <<<"$1"
    return $((1 - seen))
}

verdict() { # ok scope check detail
    if [ "$1" = 1 ]; then record "PASS $2: $3: $4"; else record "FAIL $2: $3: $4"; fi
}

finish() {
    local final="$pass passed, $fail failed"
    say "logs: $work"
    echo "$final" >>"$summary"
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT" && cp "$summary" "$OUT/gpu-suite-summary.txt" &&
            tar -czf "$OUT/gpu-suite.tar.gz" -C "$(dirname "$work")" "$(basename "$work")" ||
            echo "could not write the logs to \$OUT=$OUT"
    fi
    echo "$final"
    [ "$fail" -eq 0 ]
    exit
}

# --- what is needed ---------------------------------------------------------
if ! build=$(cd "$build_arg" 2>/dev/null && pwd); then
    verdict 0 preflight "build directory" "$build_arg not found (build here first: cmake -S . -B build && cmake --build build)"
    finish
fi
shim=$build/lib/libdrk_shim.so
progs=$build/tests/gpu
counter=$progs/libdrk_test_cupti_count.so
if [ -f "$shim" ]; then
    verdict 1 preflight "drk library" "$shim"
else
    verdict 0 preflight "drk library" "$shim missing"
    finish
fi
if command -v nvidia-smi >/dev/null 2>&1; then
    say "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1)"
fi

# libcupti.so.13: the copy the Python frameworks use first (their nvidia
# wheels), then the toolkit's, then the loader's cache. Only libcupti and its
# helpers are linked into a private directory put on LD_LIBRARY_PATH, so no
# other CUDA library changes for the programs.
find_cupti() {
    "$PY" - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = []
for get in (site.getsitepackages, site.getusersitepackages):
    try:
        r = get()
        roots += r if isinstance(r, list) else [r]
    except Exception:
        pass
roots += [p for p in sys.path if p]
for r in dict.fromkeys(roots):
    for pat in ("nvidia/cuda_cupti/lib", "nvidia/cu13/lib", "nvidia/*/lib", "nvidia/*/*/lib"):
        for d in sorted(glob.glob(os.path.join(r, pat))):
            if os.path.exists(os.path.join(d, "libcupti.so.13")):
                print(os.path.join(d, "libcupti.so.13"))
EOF
    local f
    for f in /usr/local/cuda*/extras/CUPTI/lib64/libcupti.so.13 /usr/local/cuda*/lib64/libcupti.so.13 \
        /usr/local/cuda*/targets/x86_64-linux/lib/libcupti.so.13; do
        [ -e "$f" ] && echo "$f"
    done
    if command -v ldconfig >/dev/null 2>&1; then
        ldconfig -p 2>/dev/null | while read -r name _ _ path; do
            [ "$name" = libcupti.so.13 ] && echo "${path#=> }"
        done
    fi
}

cupti_missing=""
cupti_libdir=""
if [ ! -f "$counter" ]; then
    cupti_missing="$counter was not built (CUPTI not found at build time)"
else
    cupti_lib=${DRK_GPU_CUPTI_LIB:-$(find_cupti | head -n 1)}
    if [ -z "$cupti_lib" ] || [ ! -e "$cupti_lib" ]; then
        cupti_missing="libcupti.so.13 not found (searched the nvidia wheels, /usr/local/cuda*/{extras/CUPTI/lib64,lib64,targets/x86_64-linux/lib}, ldconfig -p)"
    else
        cupti_libdir=$work/cupti-lib
        mkdir -p "$cupti_libdir"
        src_dir=$(dirname "$cupti_lib")
        ln -sf "$cupti_lib" "$cupti_libdir/libcupti.so.13"
        for helper in libnvperf_host.so libnvperf_target.so libcheckpoint.so libpcsamplingutil.so; do
            [ -e "$src_dir/$helper" ] && ln -sf "$src_dir/$helper" "$cupti_libdir/$helper"
        done
    fi
fi
if [ -z "$cupti_missing" ]; then
    verdict 1 preflight "CUPTI counter" "$counter with $cupti_lib"
else
    verdict 0 preflight "CUPTI counter" "$cupti_missing; every CUPTI check fails"
fi

# The caller's drk options and PyTorch allocator settings must not change
# what a mode means.
clear_env=(-u DRK_DISABLE -u DRK_REPORT -u CUDA_INJECTION64_PATH -u DRK_TEST_CUPTI_OUT
    -u PYTORCH_NO_CUDA_MEMORY_CACHING -u PYTORCH_CUDA_ALLOC_CONF)
while IFS= read -r var; do
    case $var in
    DRK_GPU_*) ;;
    DRK_*) clear_env+=(-u "$var") ;;
    esac
done < <(compgen -e)

# --- running ------------------------------------------------------------------
# run_mode WORKLOAD MODE LIMIT COUNTED CMD...: one run, its outputs in
# $work/WORKLOAD/MODE/ (see check.py for the layout). MODE: native, drk
# (defaults: the device pool on), disabled (DRK_DISABLE=1), nodefrag
# (DRK_DEFRAG=0), noalloc (DRK_ALLOC=0), evolve (DRK_EVOLVE=1 DRK_PROFILE=1).
run_mode() {
    local w=$1 mode=$2 limit=$3 counted=$4
    shift 4
    local d=$work/$w/$mode
    mkdir -p "$d"
    local left=$((budget - ($(date +%s) - start_s)))
    [ "$left" -lt "$limit" ] && limit=$((left > 1 ? left : 1))
    echo "$limit" >"$d/timeout"
    if [ ! -x "$1" ] && ! command -v "$1" >/dev/null 2>&1; then
        echo "not built or not found: $1" >"$d/stderr"
        : >"$d/stdout"
        echo 127 >"$d/rc"
        return
    fi
    local -a env_args=("${clear_env[@]}" DRK_TEST_COUNTS="$d/counts.json")
    if [ "$counted" = 1 ] && [ -z "$cupti_missing" ]; then
        env_args+=(CUDA_INJECTION64_PATH="$counter" DRK_TEST_CUPTI_OUT="$d/cupti-%p.json"
            LD_LIBRARY_PATH="$cupti_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    fi
    case $mode in
    native) env_args=(-u LD_PRELOAD "${env_args[@]}") ;;
    drk) env_args+=(LD_PRELOAD="$shim" DRK_REPORT="$d/reports/") ;;
    disabled) env_args+=(LD_PRELOAD="$shim" DRK_REPORT="$d/reports/" DRK_DISABLE=1) ;;
    evolve) env_args+=(LD_PRELOAD="$shim" DRK_REPORT="$d/reports/" DRK_EVOLVE=1 DRK_PROFILE=1) ;;
    nodefrag) env_args+=(LD_PRELOAD="$shim" DRK_REPORT="$d/reports/" DRK_DEFRAG=0) ;;
    noalloc) env_args+=(LD_PRELOAD="$shim" DRK_REPORT="$d/reports/" DRK_ALLOC=0) ;;
    esac
    # Each run's evolution cache is its own.
    [ "$mode" != native ] && env_args+=(DRK_CACHE_DIR="$d/cache")
    # The page grower, off by default (it gains nothing measurable on the H200).
    [ "${DRK_GPU_GROW:-0}" = 1 ] && [ "$mode" != native ] && env_args+=(DRK_ALLOC_GROW=1)
    local t0 t1 ms
    t0=$(date +%s%N)
    env "${env_args[@]}" timeout -k 10 "$limit" "$@" >"$d/stdout" 2>"$d/stderr" </dev/null
    echo $? >"$d/rc"
    t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000))
    printf '%d.%03d\n' $((ms / 1000)) $((ms % 1000)) >"$d/wall"
}

# run_workload NAME LIMIT COUNTED MODES CHECK -- CMD...: CMD run in each of
# MODES (e.g. "native drk disabled"), then judged by "check.py CHECK"
# (CHECK: the check's name and its flags, e.g. "workload --losses").
run_workload() {
    local w=$1 limit=$2 counted=$3 modes=$4 check=$5
    shift 6
    say "== $w: $*"
    if [ $(($(date +%s) - start_s)) -ge "$budget" ]; then
        verdict 0 "$w" skipped "the suite's time budget (${budget} s) is spent"
        return
    fi
    local mode
    for mode in $modes; do
        run_mode "$w" "$mode" "$limit" "$counted" "$@"
    done
    if [ "${DRK_GPU_EVOLVE:-1}" = 1 ] && [ "${check%% *}" = workload ]; then
        run_mode "$w" evolve "$limit" 0 "$@"
        check="$check --evolve"
    fi
    judge "$w" "$check"
}

# judge NAME CHECK: check.py's verdicts on $work/NAME.
judge() {
    local w=$1 check=$2 out
    # shellcheck disable=SC2086 # check is a command and its flags
    out=$("$PY" "$here/check.py" ${check%% *} "$work/$w" --name "$w" ${check#"${check%% *}"} \
        --cupti-missing "$cupti_missing" 2>"$work/$w/check.stderr")
    record "$out" || verdict 0 "$w" check.py "printed no verdict: $(tail -n 3 "$work/$w/check.stderr" | tr '\n' ' ')"
}

# run_memcheck NAME LIMIT PROG...: PROG under compute-sanitizer's memcheck,
# natively with --leak-check full (the program frees all it allocates) and
# with drk preloaded without it (drk's pool keeps its pages mapped until the
# process ends: its cache, not the program's leak).
run_memcheck() {
    local w=$1 limit=$2
    shift 2
    say "== $w: compute-sanitizer --tool memcheck $*"
    local san=${DRK_GPU_SANITIZER:-}
    if [ -z "$san" ]; then
        san=$(command -v compute-sanitizer 2>/dev/null ||
            ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
    fi
    if [ -z "$san" ] || [ ! -x "$san" ]; then
        verdict 0 "$w" compute-sanitizer "not found (PATH, /usr/local/cuda*/bin; or set DRK_GPU_SANITIZER)"
        return
    fi
    if [ $(($(date +%s) - start_s)) -ge "$budget" ]; then
        verdict 0 "$w" skipped "the suite's time budget (${budget} s) is spent"
        return
    fi
    local -a memcheck=("$san" --tool memcheck --error-exitcode 9)
    run_mode "$w" native "$limit" 0 "${memcheck[@]}" --leak-check full "$@"
    run_mode "$w" drk "$limit" 0 "${memcheck[@]}" "$@"
    judge "$w" memcheck
}

# run_program NAME LIMIT CMD...: a program that checks itself, run once
# without drk (a piece of drk tested on the real driver): PASS when it exits
# 0 and its last line starts with "ok".
run_program() {
    local w=$1 limit=$2
    shift 2
    say "== $w: $*"
    mkdir -p "$work/$w"
    if [ ! -x "$1" ]; then
        verdict 0 "$w" self-check "not built: $1"
        return
    fi
    timeout -k 10 "$limit" "$@" >"$work/$w/stdout" 2>"$work/$w/stderr" </dev/null
    local rc=$? last
    last=$(tail -n 1 "$work/$w/stdout")
    if [ "$rc" = 0 ] && [[ $last == ok* ]]; then
        verdict 1 "$w" self-check "$last"
    else
        verdict 0 "$w" self-check "exit $rc: $(tail -n 3 "$work/$w/stderr" | tr '\n' ' ')"
    fi
}

# run_checker NAME LIMIT CMD...: a checker that runs its own modes and prints
# its own PASS/FAIL lines (given --out, its folder); a crash fails it.
run_checker() {
    local w=$1 limit=$2
    shift 2
    say "== $w: $*"
    mkdir -p "$work/$w"
    if [ $(($(date +%s) - start_s)) -ge "$budget" ]; then
        verdict 0 "$w" skipped "the suite's time budget (${budget} s) is spent"
        return
    fi
    timeout -k 10 "$limit" "$@" --out "$work/$w" >"$work/$w/stdout" 2>"$work/$w/stderr" </dev/null
    local rc=$?
    record "$(cat "$work/$w/stdout")" || rc=${rc/#0/no check printed}
    [ "$rc" = 0 ] || verdict 0 "$w" checker "exit $rc: $(tail -n 3 "$work/$w/stderr" | tr '\n' ' ')"
}

# run_sanitized NAME LIMIT PROG...: a self-checking PROG (as run_program)
# under compute-sanitizer's memcheck, its report in NAME/sanitizer.log; any
# error it finds makes the exit status 9.
run_sanitized() {
    local w=$1 limit=$2
    shift 2
    local san=${DRK_GPU_SANITIZER:-}
    if [ -z "$san" ]; then
        san=$(command -v compute-sanitizer 2>/dev/null ||
            ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
    fi
    if [ -z "$san" ] || [ ! -x "$san" ]; then
        say "== $w: compute-sanitizer --tool memcheck $*"
        verdict 0 "$w" compute-sanitizer "not found (PATH, /usr/local/cuda*/bin; or set DRK_GPU_SANITIZER)"
        return
    fi
    if [ ! -x "$1" ]; then
        say "== $w: compute-sanitizer --tool memcheck $*"
        verdict 0 "$w" self-check "not built: $1"
        return
    fi
    mkdir -p "$work/$w"
    run_program "$w" "$limit" "$san" --tool memcheck --error-exitcode 9 --log-file "$work/$w/sanitizer.log" "$@"
}

three="native drk disabled"
for w in "${workloads[@]}"; do
    case $w in
    rt_vecadd) run_workload "$w" 60 1 "$three" workload -- "$progs/rt_vecadd" 2000 1000 ;;
    drv_vecadd) run_workload "$w" 60 1 "$three" workload -- "$progs/drv_vecadd" 1000 500 100 100 ;;
    routes) run_workload "$w" 60 0 "$three" routes -- "$PY" "$here/workloads/routes_probe.py" ;;
    triton_add) run_workload "$w" "$py_limit" 1 "$three" workload -- "$PY" "$here/workloads/triton_add.py" --n 500 ;;
    cupy_ops) run_workload "$w" "$py_limit" 1 "$three" workload -- "$PY" "$here/workloads/cupy_ops.py" --n 300 ;;
    jax_jit) run_workload "$w" "$py_limit" 1 "$three" workload -- "$PY" "$here/workloads/jax_jit.py" --n 200 ;;
    ppo) run_workload "$w" "$py_limit" 1 "$three" "workload --losses" -- "$PY" "$here/workloads/ppo.py" --steps 50 ;;
    vmm_heap) run_program "$w" 60 "$progs/vmm_heap" ;;
    gputime) run_checker "$w" 300 "$PY" "$here/gputime_check.py" --shim "$shim" --steps 20 ;;
    evolve) run_checker "$w" 420 "$PY" "$here/evolve_check.py" --shim "$shim" --program "$progs/evolve_hazards" ;;
    vmm_pool) run_program "$w" 60 "$progs/vmm_pool" ;;
    alloc_heavy) run_workload "$w" 60 1 "$three" workload -- "$progs/alloc_heavy" ;;
    host_map) run_workload "$w" 60 1 "$three" workload -- "$progs/host_map" 20 ;;
    # natively (the program's own check), then under drk: the last line is drk's
    host_reuse) run_program "$w" 60 /bin/bash -c '"$1" >&2 && LD_PRELOAD="$2" "$1"' _ "$progs/host_reuse" "$shim" ;;
    ctx_reset) run_workload "$w" 60 1 "$three" workload -- "$progs/ctx_reset" 10 ;;
    green_ctx) run_program "$w" 60 /bin/bash -c '"$1" >&2 && LD_PRELOAD="$2" "$1"' _ "$progs/green_ctx" "$shim" ;;
    ipc_pair) run_workload "$w" 60 0 "native drk noalloc disabled" ipc -- "$progs/ipc_pair" ;;
    alloc_frag) run_workload "$w" 90 0 "native drk nodefrag disabled" frag -- "$progs/alloc_frag" ;;
    alloc_memcheck) run_memcheck "$w" 180 "$progs/alloc_heavy" ;;
    kernels_check) run_program "$w" 120 "$progs/kernels_check" ;;
    kernels_check_ptx) run_program "$w" 120 "$progs/kernels_check" --ptx ;;
    kernels_memcheck) run_sanitized "$w" 300 "$progs/kernels_check" --quick ;;
    gpt_nocache)
        run_workload "$w" "$py_limit" 1 "$three" "workload --losses --min-pool-allocs 1000" -- \
            env PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$PY" "$here/workloads/gpt_train.py" --steps 30
        ;;
    gpt_async)
        run_workload "$w" "$py_limit" 1 "$three" "workload --losses --min-pool-allocs 1000 --want-async" -- \
            env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$PY" "$here/workloads/gpt_train.py" --steps 30
        ;;
    *) verdict 0 "$w" workload "unknown (known: ${all_workloads[*]})" ;;
    esac
done
finish
