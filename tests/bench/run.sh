#!/usr/bin/env bash
# drk overhead benchmarks: the same programs natively and under drk (observe
# mode, default options), interleaved in one run, so the ratios compare like
# with like. See tests/bench/README.md for what the numbers mean.
#
#   tests/bench/run.sh [BUILD_DIR]        (from the repository root; default build/)
#
# Knobs (environment): BENCH_ROUNDS (5), BENCH_REPS (3), BENCH_AB_REPS (9), BENCH_LAUNCHES_1T
# (200000), BENCH_LAUNCHES_8T (50000 per thread), BENCH_PPO_ROUNDS (4),
# BENCH_PPO_STEPS (300), BENCH_BUDGET_S (285: rounds stop being added past it),
# BENCH_PPO_SCRIPT (tests/gpu/workloads/ppo.py).
# With $OUT set: $OUT/bench.json (everything), $OUT/bench_raw.jsonl (one line a
# run, written as it goes) and $OUT/bench_logs/ (each run's stdout/stderr).
# Exit status: 0 when the preflight found drk on the launch path and every case
# measured at least one native/drk pair, whatever the ratios (a benchmark
# reports, it does not fail); else 1.
set -uo pipefail
# $EPOCHREALTIME below must use '.' for decimals.
export LC_NUMERIC=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_arg=${1:-$root/build}
if ! build=$(cd "$build_arg" 2>/dev/null && pwd); then
  echo "run.sh: build directory '$build_arg' not found (build it, then: tests/bench/run.sh BUILD_DIR)" >&2
  exit 1
fi
# The workloads may expect the repository root as their working directory.
cd "$root" || exit 1
shim=$build/lib/libdrk_shim.so
bench=$build/tests/bench/launch_bench
ppo=${BENCH_PPO_SCRIPT:-$root/tests/gpu/workloads/ppo.py}
stats=$here/bench_stats.py

rounds=${BENCH_ROUNDS:-5}
reps=${BENCH_REPS:-3}
n1=${BENCH_LAUNCHES_1T:-200000}
n8=${BENCH_LAUNCHES_8T:-50000}
ppo_rounds=${BENCH_PPO_ROUNDS:-4}
ppo_steps=${BENCH_PPO_STEPS:-300}
budget=${BENCH_BUDGET_S:-285}
# Seconds kept for the PPO case when the launch cases run long.
ppo_reserve=100

die() { echo "run.sh: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 not found"
command -v timeout >/dev/null || die "timeout (coreutils) not found"
[[ -f $shim ]] || die "$shim not found (build the project first)"
[[ -x $bench ]] || die "$bench not found (it is built only where nvcc is: cmake --build BUILD --target launch_bench)"

# Default options for drk means no DRK_* from the caller's environment, in
# the drk runs and the native ones alike.
unset_vars=$(compgen -e | grep '^DRK_' || true)
for v in $unset_vars; do unset "$v"; done

work=$(mktemp -d "${TMPDIR:-/tmp}/drk-bench.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$work"' EXIT
if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT/bench_logs" || die "cannot write to \$OUT=$OUT"
  raw=$OUT/bench_raw.jsonl
  logs=$OUT/bench_logs
  : >"$raw"
else
  raw=$work/bench_raw.jsonl
  logs=$work/logs
  mkdir -p "$logs"
fi

preload_drk=$shim${LD_PRELOAD:+:$LD_PRELOAD}

echo "drk overhead benchmarks  $(date -u +%Y-%m-%dT%H:%M:%SZ)  host $(hostname)"
if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1)
  echo "gpu: $gpu"
  echo "persistence mode: $(nvidia-smi --query-gpu=persistence_mode --format=csv,noheader 2>&1 | head -n 1)"
else
  gpu="unknown (no nvidia-smi)"
  echo "gpu: $gpu"
fi
echo "build: $build"
echo "shim:  $shim"
[[ -n $unset_vars ]] && echo "unset for default options: $(echo $unset_vars)"
echo "rounds: launches $rounds x (native, drk), $reps reps each; ppo $ppo_rounds x (native, drk), $ppo_steps steps"
echo

status=0

# --- preflight: drk loads, binds the launch entry points and counts launches.
# Untimed; it also pays the first CUDA initialization on a cold machine.
echo "preflight"
if ! out=$(timeout 60 "$bench" --launches 1000 --reps 1 --warmup 0 2>&1); then
  echo "$out" | tail -n 5
  die "launch_bench fails natively; nothing to compare"
fi
echo "  native: $(echo "$out" | grep -m 1 '^launch_bench:')"
for api in launch launchex; do
  rep=$work/report-$api
  mkdir -p "$rep"
  # 8 threads: the count must also be exact when threads launch at once.
  if ! out=$(DRK_REPORT=$rep/ LD_PRELOAD=$preload_drk timeout 60 "$bench" --api $api --threads 8 --launches 1000 --reps 1 --warmup 0 2>&1); then
    echo "$out" | tail -n 5
    die "launch_bench fails under drk (--api $api)"
  fi
  echo "  drk:    $(echo "$out" | grep -m 1 '^launch_bench:')"
  if ! echo "$out" | grep -q '"bound_to":"libdrk_shim.so"'; then
    echo "  WARNING: under LD_PRELOAD the $api entry point is not drk's; drk numbers would be native ones"
    status=1
  fi
  if ! msg=$(python3 "$stats" check-report "$rep" 8000); then
    echo "  WARNING ($api): $msg"
    status=1
  else
    echo "  $api: $msg"
  fi
done
have_ppo=0
if [[ -f $ppo ]]; then
  if LD_PRELOAD=$preload_drk python3 -c 'import sys; sys.exit(0 if "libdrk_shim" in open("/proc/self/maps").read() else 3)'; then
    have_ppo=1
    echo "  python: drk preloads"
  else
    echo "  WARNING: drk does not preload into python3; PPO case skipped"
    status=1
  fi
else
  echo "  WARNING: $ppo not found; PPO case skipped"
  status=1
fi
echo

# run_case CASE METRIC BETTER TARGET UNIT ROUNDS TIMEOUT DEADLINE -- CMD...
# Native and drk alternate, the order flipping every round (AB BA AB ...), so
# slow drift (clocks, temperature) weighs on both alike. Stops adding rounds
# past DEADLINE (seconds since start) once it has two.
run_case() {
  local case=$1 metric=$2 better=$3 target=$4 unit=$5 n=$6 to=$7 deadline=$8
  shift 9
  local slug=${case//\//_} r mode order t0 rc failed=0
  echo "$case: $*"
  for ((r = 0; r < n; r++)); do
    if ((r >= 2 && SECONDS > deadline)); then
      echo "  (time budget: stopped after $r rounds)"
      break
    fi
    if ((r % 2 == 0)); then order="native drk"; else order="drk native"; fi
    for mode in $order; do
      t0=$EPOCHREALTIME
      if [[ $mode == drk ]]; then
        LD_PRELOAD=$preload_drk timeout "$to" "$@" >"$logs/$slug.$mode.$r.out" 2>"$logs/$slug.$mode.$r.err"
      else
        timeout "$to" "$@" >"$logs/$slug.$mode.$r.out" 2>"$logs/$slug.$mode.$r.err"
      fi
      rc=$?
      python3 "$stats" record "$raw" --case "$case" --mode $mode --round $r --metric "$metric" \
        --better $better --target "$target" --unit "$unit" --rc $rc \
        --t0 "$t0" --t1 "$EPOCHREALTIME" \
        --stdout "$logs/$slug.$mode.$r.out" --stderr "$logs/$slug.$mode.$r.err" || ((failed++))
    done
    # Both runs of the first round failed: the rest would too; save the time.
    if ((r == 0 && failed == 2)); then
      echo "  (both first runs failed: case abandoned)"
      break
    fi
  done
  python3 "$stats" case "$raw" "$case" || status=1
  echo
}

# In-process A/B: one process under drk times the driver's own launch entry
# point and drk's hook in alternation (launch_bench --ab), so process-to-
# process noise (clocks, placement) drops out of the ratio.
ab_reps=${BENCH_AB_REPS:-9}
echo "in-process A/B ($ab_reps reps; batches alternate between the driver's entry point and drk's hook;"
echo "  time in launch calls per launch and thread; ratio = driver cost / drk cost)"
ab_lines=()
for api in launch launchex; do
  for t in 1 8; do
    n=$n1
    ((t > 1)) && n=$n8
    slug=ab_${api}_$t
    if LD_PRELOAD=$preload_drk timeout 120 "$bench" --api $api --threads $t --launches "$n" --reps "$ab_reps" --ab \
      >"$logs/$slug.out" 2>"$logs/$slug.err"; then
      line=$(python3 - "$logs/$slug.out" "$api/$t" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
r = sorted(d["ratios"])
verdict = "ok" if d["ratio_median"] >= 0.99 else "BELOW"
print(f"{sys.argv[2]:<12} driver {1e6 / d['driver_launches_per_s_median']:.4f} us/launch  drk {1e6 / d['launches_per_s_median']:.4f} us/launch  "
      f"ratio {d['ratio_median']:.4f} [{r[0]:.4f}..{r[-1]:.4f} over {len(r)} reps]  target >= 0.99  {verdict}")
PY
      )
      echo "  $line"
      ab_lines+=("$line")
      cat "$logs/$slug.out" >>"$raw.ab"
    else
      echo "  $api/$t: launch_bench --ab failed: $(tail -n 2 "$logs/$slug.err")"
      status=1
    fi
  done
done
echo

launch_deadline=$budget
((have_ppo)) && launch_deadline=$((budget - ppo_reserve))
for api in launch launchex; do
  run_case "$api/1" launches_per_s_median higher 0.99 launches/s "$rounds" 60 $launch_deadline -- \
    "$bench" --api $api --threads 1 --launches "$n1" --reps "$reps"
  run_case "$api/8" launches_per_s_median higher 0.99 launches/s "$rounds" 60 $launch_deadline -- \
    "$bench" --api $api --threads 8 --launches "$n8" --reps "$reps"
done
if ((have_ppo)); then
  run_case "ppo_step" step_ms_median lower 0.995 ms "$ppo_rounds" 150 "$budget" -- \
    python3 "$ppo" --steps "$ppo_steps" --bench
fi

summary_out=-
[[ -n ${OUT:-} ]] && summary_out=$OUT/bench.json
python3 "$stats" summary "$raw" "$summary_out" "gpu=$gpu" "host=$(hostname)" "build=$build" \
  "rounds=$rounds" "reps=$reps" "launches_1t=$n1" "launches_8t_per_thread=$n8" \
  "ppo_rounds=$ppo_rounds" "ppo_steps=$ppo_steps" "elapsed_s=$SECONDS" || status=1
if ((${#ab_lines[@]})); then
  echo
  echo "in-process A/B (ratio = drk / driver in one process)"
  printf '%s\n' "${ab_lines[@]}"
fi
echo "elapsed: ${SECONDS}s"
exit $status
