#!/usr/bin/env bash
# What GPU timing costs a trainer: the PPO trainer's and the GPT trainer's
# step time natively, under drk with DRK_PROFILE=0 (the default), with
# DRK_PROFILE=1 and with DRK_PROFILE=counters (rounds every 0.5 s, so the
# short run closes rounds and samples; the default budget of 5%), the four
# interleaved round by round so drift hits all alike. Prints per workload
# and mode the median step time over the rounds, and drk's ratio to native
# (the median of the rounds' own ratios, with their range); for counters
# also the ratio of the mean step time, since a sampled launch makes one
# step long and the median would hide it. A benchmark: it reports, it does
# not pass or fail.
#
#   tests/bench/profile.sh [BUILD_DIR]     (from the repository root, on a GPU machine)
#
# Knobs: BENCH_PROFILE_ROUNDS (3), BENCH_PPO_STEPS (60), BENCH_GPT_STEPS (30),
# BENCH_PROFILE_MODES (all four: "native profile0 profile1 counters"; native
# is always run).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || { echo "profile.sh: no build directory" >&2; exit 1; }
shim=$build/lib/libdrk_shim.so
rounds=${BENCH_PROFILE_ROUNDS:-3}
PY=${PYTHON:-python3}
out=$(mktemp -d "${TMPDIR:-/tmp}/drk-bench-profile.XXXXXX")
raw=$out/raw.jsonl
cd "$root" || exit 1

run() { # workload mode round
    local w=$1 mode=$2 r=$3 line
    local -a env_args=(env -u DRK_PROFILE -u DRK_REPORT -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH)
    case $mode in
    native) env_args+=(-u LD_PRELOAD) ;;
    profile0) env_args+=(LD_PRELOAD="$shim" DRK_PROFILE=0) ;;
    profile1) env_args+=(LD_PRELOAD="$shim" DRK_PROFILE=1 NVTX_INJECTION64_PATH="$shim") ;;
    counters) env_args+=(LD_PRELOAD="$shim" DRK_PROFILE=counters DRK_ROUND_SECONDS=0.5 DRK_LOG_LEVEL=info
        NVTX_INJECTION64_PATH="$shim") ;;
    esac
    case $w in
    ppo) line=$("${env_args[@]}" "$PY" "$root/tests/gpu/workloads/ppo.py" --bench --steps "${BENCH_PPO_STEPS:-60}" \
        --warmup 10 2>"$out/$w.$mode.$r.err" | tail -n 1) ;;
    gpt) line=$("${env_args[@]}" "$PY" "$here/torch_alloc_step.py" --steps "${BENCH_GPT_STEPS:-30}" --warmup 5 \
        2>"$out/$w.$mode.$r.err" | tail -n 1) ;;
    esac
    echo "{\"workload\": \"$w\", \"mode\": \"$mode\", \"round\": $r, \"result\": ${line:-null}}" >>"$raw"
}

for r in $(seq 1 "$rounds"); do
    for w in ppo gpt; do
        # The order of the modes turns with the round.
        case $((r % 4)) in
        0) modes="native profile0 profile1 counters" ;;
        1) modes="profile0 profile1 counters native" ;;
        2) modes="profile1 counters native profile0" ;;
        3) modes="counters native profile0 profile1" ;;
        esac
        for m in $modes; do
            case " native ${BENCH_PROFILE_MODES:-profile0 profile1 counters} " in *" $m "*) run "$w" "$m" "$r" ;; esac
        done
    done
done

"$PY" - "$raw" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("step time (ms, median over rounds); ratio = drk / native, median of the rounds' ratios [range]")
cols = [("profile0", "step_ms_median", "DRK_PROFILE=0"), ("profile1", "step_ms_median", "DRK_PROFILE=1"),
        ("counters", "step_ms_median", "counters"), ("counters", "step_ms_mean", "counters,mean")]
print(f"{'workload':<8} {'native':>9} " + " ".join(f"{c[2]:>14} {'ratio':>24}" for c in cols))
for w in ("ppo", "gpt"):
    def by_mode(mode, key):
        return {r["round"]: r["result"][key] for r in rows
                if r["workload"] == w and r["mode"] == mode and r["result"]}
    nat_med = by_mode("native", "step_ms_median")
    cells = [f"{w:<8}", f"{statistics.median(nat_med.values()):9.3f}" if nat_med else f"{'-':>9}"]
    for mode, key, _ in cols:
        d, nat = by_mode(mode, key), by_mode("native", key)
        ratios = sorted(d[k] / nat[k] for k in d if k in nat)
        cells.append(f"{statistics.median(d.values()):14.3f}" if d else f"{'-':>14}")
        cells.append(f"{statistics.median(ratios):9.4f} [{ratios[0]:.4f}..{ratios[-1]:.4f}]" if ratios else f"{'-':>24}")
    print(" ".join(cells))
# What the counters sampled, from their runs' logs.
import glob, os, re
for w in ("ppo", "gpt"):
    lines = []
    for f in sorted(glob.glob(os.path.join(os.path.dirname(sys.argv[1]), f"{w}.counters.*.err"))):
        lines += [l.strip() for l in open(f, errors="replace") if "counters" in l and "drk[" in l][:2]
    for l in lines[:2]:
        print(f"{w} counters log: {l[:200]}")
PY
echo "raw: $raw"
