#!/usr/bin/env bash
# drk allocation benchmarks: the same programs natively and under drk (default
# options: its device and pinned host pools on), interleaved in one run, so the
# speedups compare like with like. See tests/bench/README.md, "Allocation".
#
#   tests/bench/alloc.sh [BUILD_DIR]        (from the repository root; default build/)
#
# Knobs (environment): BENCH_ALLOC_ROUNDS (5), BENCH_ALLOC_PAIRS (20000, the
# anchor), BENCH_ALLOC_THREAD_PAIRS (20000 per thread, async),
# BENCH_ALLOC_THREAD_PAIRS_SYNC (2500 per thread, cuMemAlloc),
# BENCH_ALLOC_THREAD_STEADY (20000: untimed pairs per thread before the
# threads cases time their pairs again, as threads-steady/...),
# BENCH_ALLOC_TORCH_ROUNDS (3), BENCH_ALLOC_TORCH_STEPS (30),
# BENCH_ALLOC_BUDGET_S (300: rounds stop being added past it),
# BENCH_ALLOC_MAX (260000000: the anchor's largest size) and
# BENCH_ALLOC_THREAD_MAX (16000000), smaller only for a smaller device (the
# stand-in driver of the CPU tests has 1 GiB, unless FAKECUDA_TOTAL_MIB says).
# With $OUT set: $OUT/alloc_bench.json (everything), $OUT/alloc_raw.jsonl (one
# line a run, written as it goes) and $OUT/alloc_logs/ (each run's output,
# packed into $OUT/alloc_logs.tar.gz at the end).
# Exit status: 0 when every case measured at least one native/drk pair,
# whatever the speedups (a benchmark reports, it does not fail); else 1.
set -uo pipefail
# $EPOCHREALTIME below must use '.' for decimals.
export LC_NUMERIC=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_arg=${1:-$root/build}
if ! build=$(cd "$build_arg" 2>/dev/null && pwd); then
  echo "alloc.sh: build directory '$build_arg' not found (build it, then: tests/bench/alloc.sh BUILD_DIR)" >&2
  exit 1
fi
cd "$root" || exit 1
shim=$build/lib/libdrk_shim.so
bench=$build/tests/bench/alloc_bench
torch_step=$here/torch_alloc_step.py
stats=$here/alloc_stats.py

rounds=${BENCH_ALLOC_ROUNDS:-5}
pairs=${BENCH_ALLOC_PAIRS:-20000}
tpairs=${BENCH_ALLOC_THREAD_PAIRS:-20000}
tpairs_sync=${BENCH_ALLOC_THREAD_PAIRS_SYNC:-2500}
tsteady=${BENCH_ALLOC_THREAD_STEADY:-20000}
torch_rounds=${BENCH_ALLOC_TORCH_ROUNDS:-3}
torch_steps=${BENCH_ALLOC_TORCH_STEPS:-30}
budget=${BENCH_ALLOC_BUDGET_S:-300}
amax=${BENCH_ALLOC_MAX:-260000000}
tmax=${BENCH_ALLOC_THREAD_MAX:-16000000}
# Seconds kept for the PyTorch cases: 2 configs x (native, drk, drk_grow) x 2 rounds
# at what a PyTorch process took in the preflight (10-13 s on an H200 with
# PyTorch 2.11), plus its 30 timed steps. The first config stops early enough
# to leave the second its two rounds.
torch_proc_s=14

die() { echo "alloc.sh: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 not found"
command -v timeout >/dev/null || die "timeout (coreutils) not found"
[[ -f $shim ]] || die "$shim not found (build the project first)"
[[ -x $bench ]] || die "$bench not found (cmake --build BUILD --target alloc_bench)"

# Default options for drk means no DRK_* from the caller's environment, in
# the drk runs and the native ones alike; PyTorch's allocator settings are
# the cases' own.
unset_vars=$(compgen -e | grep -E '^(DRK_|PYTORCH_CUDA_ALLOC_CONF$|PYTORCH_NO_CUDA_MEMORY_CACHING$)' || true)
for v in $unset_vars; do unset "$v"; done

work=$(mktemp -d "${TMPDIR:-/tmp}/drk-alloc-bench.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$work"' EXIT
if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT/alloc_logs" || die "cannot write to \$OUT=$OUT"
  raw=$OUT/alloc_raw.jsonl
  logs=$OUT/alloc_logs
  : >"$raw"
else
  raw=$work/alloc_raw.jsonl
  logs=$work/logs
  mkdir -p "$logs"
fi
warnings=$work/warnings.txt
: >"$warnings"
warn() {
  echo "  WARNING: $*"
  echo "$*" >>"$warnings"
}

preload_drk=$shim${LD_PRELOAD:+:$LD_PRELOAD}

echo "drk allocation benchmarks  $(date -u +%Y-%m-%dT%H:%M:%SZ)  host $(hostname)"
if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader 2>&1 | head -n 1)
else
  gpu="unknown (no nvidia-smi)"
fi
echo "gpu: $gpu"
echo "build: $build"
echo "shim:  $shim"
[[ -n $unset_vars ]] && echo "unset for default options: ${unset_vars//$'\n'/ }"
echo "rounds: $rounds x (native, drk); torch $torch_rounds x (native, drk), $torch_steps steps; budget ${budget}s"
echo

status=0

# Field KEY of the last JSON line of FILE (empty when absent).
json_field() {
  python3 - "$here" "$1" "$2" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from bench_stats import last_json
v = (last_json(sys.argv[2]) or {}).get(sys.argv[3])
print("" if v is None else v)
PY
}

# --- preflight: the bench works natively, and under drk the pools serve its
# allocations (a speedup measured without the pool would mean nothing).
# Untimed; it also pays the first CUDA initialization on a cold machine.
echo "preflight"
if ! timeout -k 10 60 "$bench" anchor --api async --pairs 1000 --max 1000000 >"$logs/preflight.native.out" 2>"$logs/preflight.native.err"; then
  tail -n 5 "$logs/preflight.native.err"
  die "alloc_bench fails natively; nothing to compare"
fi
echo "  native: anchor/async 1000 pairs, check $(json_field "$logs/preflight.native.out" check)"
# preflight_drk NAME POOL EXPECTED ARGS...: one short run under drk with a report.
preflight_drk() {
  local name=$1 pool=$2 expected=$3
  shift 3
  local rep=$work/report-$name out=$logs/preflight.$name.out err=$logs/preflight.$name.err msg
  mkdir -p "$rep"
  if ! DRK_REPORT=$rep/ LD_PRELOAD=$preload_drk timeout -k 10 90 "$@" >"$out" 2>"$err"; then
    warn "$name fails under drk: $(tail -n 2 "$err" | tr '\n' ' ')"
    return
  fi
  local bound
  bound=$(json_field "$out" bound_to)
  if [[ -n $bound && $bound != libdrk_shim.so ]]; then
    warn "$name: under LD_PRELOAD the allocation entry point is bound to $bound, not drk"
  fi
  if [[ -n $(json_field "$out" check) && $(json_field "$out" check) != ok ]]; then
    warn "$name: drk's memory read back wrong (check bad)"
  fi
  if msg=$(python3 "$stats" check-pool "$rep" "$pool" "$expected"); then
    echo "  $name: $msg"
  else
    warn "$name: $msg; its numbers measure the driver, not drk's pool"
  fi
}
preflight_drk anchor_alloc device $((64 + 2000)) "$bench" anchor --api alloc --pairs 2000 --max "$amax"
preflight_drk anchor_async device $((64 + 2000)) "$bench" anchor --api async --pairs 2000 --max "$amax"
preflight_drk host_4k host $((8 + 100)) "$bench" host --size 4096 --pairs 100
have_torch=0
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)' >"$logs/preflight.torch.out" 2>&1; then
  if LD_PRELOAD=$preload_drk python3 -c 'import sys; sys.exit(0 if "libdrk_shim" in open("/proc/self/maps").read() else 3)'; then
    have_torch=1
    # One short step each way: PyTorch reaches the pool through cudart.
    t0=$SECONDS
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 preflight_drk torch_nocache device 0 \
      python3 "$torch_step" --steps 1 --warmup 0 --layers 1
    torch_proc_s=$((SECONDS - t0 + 3))
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync preflight_drk torch_async device 0 \
      python3 "$torch_step" --steps 1 --warmup 0 --layers 1
  else
    warn "drk does not preload into python3; PyTorch cases skipped"
    status=1
  fi
else
  warn "PyTorch with CUDA not available ($(tail -n 1 "$logs/preflight.torch.out")); PyTorch cases skipped"
  status=1
fi
echo

# run_case CASE METRIC BETTER UNIT ROUNDS TIMEOUT DEADLINE MODES ENV -- CMD...
# MODES: space-separated, of native, drk (default options), drk_grow (the
# page grower on, DRK_ALLOC_GROW=1) and drk_noalloc (DRK_ALLOC=0). ENV: VAR=VALUE words set for every mode (may be empty).
# With also=CASE2=METRIC2 set, each run is recorded a second time, as CASE2
# by METRIC2 (a second number the same runs print). drk's runs write their
# report, whose pool counts the summary shows.
# The order of the modes reverses every round, so slow drift (clocks,
# temperature) weighs on all alike. Once it has two rounds, adds none that
# would end past DEADLINE (seconds since start), judged by the last round's
# length.
run_case() {
  local case=$1 metric=$2 better=$3 unit=$4 n=$5 to=$6 deadline=$7 modes=$8 envs=$9
  shift 10
  local slug=${case//\//_} r mode t0 rc failed=0 nmodes round_start last=0
  local -a fwd rev cenv order menv
  read -r -a fwd <<<"$modes"
  read -r -a cenv <<<"$envs"
  nmodes=${#fwd[@]}
  rev=()
  for ((r = nmodes - 1; r >= 0; r--)); do rev+=("${fwd[r]}"); done
  echo "$case: ${envs:+$envs }$*"
  for ((r = 0; r < n; r++)); do
    if ((r >= 2 && SECONDS + last > deadline)); then
      echo "  (time budget: stopped after $r rounds)"
      break
    fi
    round_start=$SECONDS
    if ((r % 2 == 0)); then order=("${fwd[@]}"); else order=("${rev[@]}"); fi
    for mode in "${order[@]}"; do
      menv=()
      case $mode in
        drk) menv=("LD_PRELOAD=$preload_drk") ;;
        drk_grow) menv=("LD_PRELOAD=$preload_drk" DRK_ALLOC_GROW=1) ;;
        drk_noalloc) menv=("LD_PRELOAD=$preload_drk" DRK_ALLOC=0) ;;
      esac
      [[ $mode == native ]] || menv+=("DRK_REPORT=$logs/$slug.$mode.$r.report.json")
      t0=$EPOCHREALTIME
      env "${cenv[@]}" "${menv[@]}" timeout -k 10 "$to" "$@" >"$logs/$slug.$mode.$r.out" 2>"$logs/$slug.$mode.$r.err"
      rc=$?
      t1=$EPOCHREALTIME
      python3 "$stats" record "$raw" --case "$case" --mode "$mode" --round $r --metric "$metric" \
        --better "$better" --unit "$unit" --rc $rc --t0 "$t0" --t1 "$t1" \
        --stdout "$logs/$slug.$mode.$r.out" --stderr "$logs/$slug.$mode.$r.err" \
        --report "$logs/$slug.$mode.$r.report.json" || ((failed++))
      [[ -n ${also:-} ]] && python3 "$stats" record "$raw" --case "${also%%=*}" --mode "$mode" --round $r \
        --metric "${also#*=}" --better "$better" --unit "$unit" --rc $rc --t0 "$t0" --t1 "$t1" \
        --stdout "$logs/$slug.$mode.$r.out" --stderr "$logs/$slug.$mode.$r.err" \
        --report "$logs/$slug.$mode.$r.report.json"
    done
    last=$((SECONDS - round_start))
    # Every run of the first round failed: the rest would too; save the time.
    if ((r == 0 && failed == nmodes)); then
      echo "  (all first runs failed: case abandoned)"
      break
    fi
  done
  python3 "$stats" case "$raw" "$case" || status=1
  [[ -n ${also:-} ]] && { python3 "$stats" case "$raw" "${also%%=*}" || status=1; }
  echo
}

torch_case_s=$((6 * torch_proc_s))
c_deadline=$budget
((have_torch)) && c_deadline=$((budget - 2 * torch_case_s))
# Each of the 10 C cases gets an equal slice of the time left, so the last
# ones get rounds too when the machine is slow.
c_start=$SECONDS
c_cases=10
c_done=0
c_slice() {
  c_done=$((c_done + 1))
  slice_end=$((c_start + c_done * (c_deadline - c_start) / c_cases))
}

# The anchor: one thread, 64 live, 256 B - 260 MB; DRK_ALLOC=0 is the sanity
# line (drk forwarding to the driver must run at the driver's speed).
for api in alloc async; do
  c_slice
  run_case "anchor/$api" us_per_pair_mean lower us "$rounds" 60 "$slice_end" "native drk drk_grow drk_noalloc" "" -- \
    "$bench" anchor --api $api --pairs "$pairs" --max "$amax"
done
# Threads: 1 and 8, each on its own stream; scaling is computed in the summary.
# The same runs time their pairs again after $tsteady more each
# (threads-steady/...): threads released together first meet there, and
# under drk each that keeps meeting another gets a shard of its own, whose
# pages are made then (2026-12-05, on the stand-in with an H200's VMM costs:
# 8 threads' cuMemAlloc 0.37-0.73M pairs/s in the first timed pairs, 4.9M
# in the second).
for api in async alloc; do
  n=$tpairs
  [[ $api == alloc ]] && n=$tpairs_sync
  for t in 1 8; do
    c_slice
    also="threads-steady/$api/$t=steady_pairs_per_s_aggregate" \
      run_case "threads/$api/$t" pairs_per_s_aggregate higher pairs/s "$rounds" 60 "$slice_end" "native drk drk_grow" "" -- \
      "$bench" threads --api $api --threads $t --pairs "$n" --steady "$tsteady" --max "$tmax"
  done
done
# Pinned host memory: pairs per size as alloc_bench's defaults (~0.5 s
# natively at 64 MiB). The driver reuses a freed pinned block of the same size
# (a few us a pair up to 1 MiB on an H200), so mixed sizes are a case too.
# 64 MiB: 40 pairs (~1.7 s natively), not alloc_bench's 10, whose mean under
# drk one slow pair of ten decides (H200, 2026-12-02: mean 1.1 us, median 0.26);
# alloc_bench times the first pair apart (the process's first wait for the
# device, ~20 us once on an H100).
for size in 4096:4K:400 1048576:1M:400 67108864:64M:40; do
  IFS=: read -r bytes label npairs <<<"$size"
  c_slice
  run_case "host/$label" us_per_pair_mean lower us "$rounds" 60 "$slice_end" "native drk" "" -- \
    "$bench" host --size "$bytes" --pairs "$npairs"
done
c_slice
run_case "host/4K-1M" us_per_pair_mean lower us "$rounds" 60 "$slice_end" "native drk" "" -- \
  "$bench" host --min 4096 --max 1048576
if ((have_torch)); then
  run_case "torch/nocache" step_ms_median lower ms "$torch_rounds" 150 $((budget - torch_case_s)) "native drk drk_grow" \
    "PYTORCH_NO_CUDA_MEMORY_CACHING=1" -- python3 "$torch_step" --steps "$torch_steps"
  run_case "torch/async" step_ms_median lower ms "$torch_rounds" 150 "$budget" "native drk drk_grow" \
    "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" -- python3 "$torch_step" --steps "$torch_steps"
fi

summary_out=-
[[ -n ${OUT:-} ]] && summary_out=$OUT/alloc_bench.json
python3 "$stats" summary "$raw" "$summary_out" --warnings "$warnings" "gpu=$gpu" "host=$(hostname)" \
  "build=$build" "rounds=$rounds" "anchor_pairs=$pairs" "anchor_max=$amax" "thread_max=$tmax" \
  "thread_pairs_async=$tpairs" \
  "thread_pairs_alloc=$tpairs_sync" "thread_steady=$tsteady" "torch_rounds=$torch_rounds" "torch_steps=$torch_steps" \
  "budget_s=$budget" "elapsed_s=$SECONDS" || status=1
# One archive of the logs: fewer files to carry back from a GPU machine.
if [[ -n ${OUT:-} ]] && tar -czf "$OUT/alloc_logs.tar.gz" -C "$OUT" alloc_logs 2>/dev/null; then
  rm -rf "$OUT/alloc_logs"
  echo "logs: $OUT/alloc_logs.tar.gz"
fi
echo "elapsed: ${SECONDS}s"
exit $status
