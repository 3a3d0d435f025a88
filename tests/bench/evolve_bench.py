#!/usr/bin/env python3
"""What evolution wins and costs, on the twelve kernels of evolve_kernels.cu
(tests/bench/evolve_space.c measured every variant of each on an H200:
tests/evolve/spaces/h200-2026-12-01.json). Each kernel is run as a program
(evolve_run: its PTX loaded with cuModuleLoadData, rounds of launches at its
recorded shape, each round ended by cuProfilerStop), one run after the
other: natively (the driver's default JIT), under drk with DRK_EVOLVE=1
(and warm, below), natively again, all with CUDA_CACHE_DISABLE=1 (the driver's JIT cache would answer drk's
builds from an earlier run). A benchmark: it prints what it measured in this
run and passes or fails nothing.

The drk runs get --rounds (40): on its 2% budget a kernel with nothing to
win is searched for 3 to 8 captures, one every 3-5 of these ~0.2 s rounds
(on the H200 a flat stencil's search ended at round 12 in one run and had
not by round 16 in two others: 8 captures take to round 25-38), and its
steady state comes after. The second native run and the best runs give a
steady time only, and get --short-rounds (12). --processes N runs N cold
drk processes a kernel (each further one followed by a short native run):
a short kernel's time is fixed per process and differs by ~2% between
processes, drk's or not, which one drk run cannot tell from a 1% cost;
drk's steady time is then the median of theirs, native's the median of
every native run's, and each drk process's rounds are printed below the
table (within 2% of the best run, and of its own steady time, from which
round: the table's columns give the first process's).

Per kernel:
  native      GPU time a launch natively (the median of the native runs'
              medians of their rounds after the first: the one before drk's
              and the one after, and with --processes more, so that the
              GPU's drift between processes does not count for or against
              drk, and each process counts alike, long or short)
  drk         GPU time a launch under drk at its steady state (median of the last 4 rounds)
  end         the search's state at the end (the report's): settled, or
              searching (no steady state yet: its last rounds still pay for
              captures and timed rounds)
  x           native / drk
  possible    the recorded space's default / its exhaustive best (what the
              search could win; 2.05x for n-body, at most 1.10x for the rest)
  vs best     drk / (native / possible): 1.000 = the exhaustive best reached
              (the recorded ratio: another day, another harness, 10-launch
              bursts, and the best of 792 noisy timings)
  best x      the exhaustive best run as a program in this run: the recorded
              best variant (and, where the kernel has something to win, the
              runner-up: --best-of) JIT'd and launched natively by evolve_run
              as that program, its steady time (median of the rounds after
              the first) against native; the faster of them
  vs run      drk / that best: 1.000 = as fast as the exhaustive best run the
              same way; the issue's "within 2% of the exhaustive best"
  to best     the first round from which every round of drk's is within 2% of
              that best ("-": its last round is not)
  rounds      the first round from which every round is within 2% of drk's
              steady state (0: from the start)
  serving     the variant drk served at the end (the report's evolve row)
  builds      JIT builds drk made, and their mean and longest time (ms)
  trial       the trials' GPU time over the program's kernel time (trial_share)
  wall        drk's wall time a launch over native's (launch path and trials)
  stall       the longest launch call under drk and natively (ms, over all
              rounds): a build that held the driver would show here
  warm        a second drk run on the first's cache: its steady x and the
              first round from which it is steady (the cached winner served
              from the first launch, its cubin loaded rather than compiled:
              the cache-hit time is printed below the table)
  drift       the second native run over the first: what separate
              processes differ by with nothing changed (a short kernel's
              time is fixed per process: 19.4-19.8 us for softmax_rows in
              three native runs, the same spread under drk without evolution)
  same        the outputs' hash equal natively and under drk (both drk runs)

Then: compile time median and p95 over all builds (each kernel's builds taken
at their mean: the report gives a total and a maximum), the launch-path
overhead on the kernels with nothing to win (recorded best within 2% of the
default: their wall and GPU ratios, geometric means, over all rounds after
the first, searches included, and at the steady state), the rounds kernel
records rested in (gpu_time.unsampled_rounds, over every drk process), the
mean trial share. With --log debug, the stall probe: each drk process's longest launch call set
against CUPTI's attach, as drk's debug lines date it (the attach held a
launch call 66 ms on the H200 before drk waited for a quiet moment), e.g.
--kernels matmul_naive --rounds 6 --processes 6 --warm 0 --best-of 0 --log debug.
Writes everything to --out/evolve_bench.json; with --out the runs' output and
reports are then packed into --out/evolve_bench_logs.tar.gz (their caches
removed).

Usage: evolve_bench.py [--build DIR] [--kernels a,b] [--rounds R] [--short-rounds R]
                       [--processes N] [--launches L] [--budget PCT] [--pause MS]
                       [--best-of N] [--log LEVEL] [--out DIR]
Takes about 10 minutes on an H200 with the defaults (rounds of 1500
launches and a 100 ms pause each, five or six runs a kernel; n-body's rounds
take a second): more than a device call may run, so split the twelve with
--kernels, e.g. nbody,matmul_tiled / transpose_naive,saxpy,matmul_naive,
conv1d_15,stencil5 / the other five (about 4.5, 3.5 and 2.5 minutes).
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
SPACE = os.path.join(root, "tests", "evolve", "spaces", "h200-2026-12-01.json")
FLAT = 1.02  # a kernel whose recorded best is within this of its default has nothing to win


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k != "CUDA_INJECTION64_PATH"}
    env["CUDA_CACHE_DISABLE"] = "1"
    env.update(extra)
    return env


def run(cmd, env, out, tag):
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, so, se = "timeout", "", ""
    with open(os.path.join(out, tag + ".stdout"), "w") as f:
        f.write(so)
    with open(os.path.join(out, tag + ".stderr"), "w") as f:
        f.write(se)
    res = None
    for line in so.splitlines():
        if line.startswith("{"):
            try:
                res = json.loads(line)
            except ValueError:
                pass
    if rc != 0 or res is None:
        print(f"  {tag}: exit {rc}: {se.strip().splitlines()[-1:] or ['no output']}", file=sys.stderr)
        return None
    return res


def report_of(d):
    files = glob.glob(os.path.join(d, "*.json"))
    return json.load(open(files[0])) if len(files) == 1 else None


def within(rounds_ms, ref):
    """The first round from which every round is within 2% of `ref` ms (past the last when the last is not)."""
    return max((r + 1 for r, ms in enumerate(rounds_ms) if ms > ref * 1.02), default=0)


def reached(rounds_ms, ref):
    """within(), or None when the last round is not within 2% of `ref`."""
    return None if rounds_ms[-1] > ref * 1.02 else within(rounds_ms, ref)


def untimed(rep):
    """(rounds closed untimed: kernel records resting, rounds in all) of a report."""
    g, r = (rep or {}).get("gpu_time", {}), (rep or {}).get("rounds", {})
    u = g.get("unsampled_rounds", 0)
    return u, u + r.get("closed", 0)


# drk's debug lines carry the monotonic clock, as evolve_run's longest_launch_at_s does.
ATTACH = re.compile(r"debug: \[(\d+\.\d+)\] GPU times: CUPTI (attaches after|attaches while|attached in ([\d.]+) ms)")


def stall_probe(run_out, stderr_path):
    """One drk run's longest launch call set against CUPTI's attach, from its
    debug log (None without one): on the H200 the attach held a launch call
    made meanwhile for 66 ms, so drk attaches where the program launches
    nothing (DRK_LOG_LEVEL=debug says when it began and ended)."""
    try:
        text = open(stderr_path).read()
    except OSError:
        return None
    began = ended = None
    quiet = False
    for m in ATTACH.finditer(text):
        if m.group(3) is not None:
            ended = float(m.group(1))
            began = ended - float(m.group(3)) / 1e3 if began is None else began
        else:
            began, quiet = float(m.group(1)), m.group(2) == "attaches after"
    longest, at = run_out.get("longest_launch_ms", []), run_out.get("longest_launch_at_s", [])
    if began is None or ended is None or not longest or len(at) != len(longest):
        return None
    i = max(range(len(longest)), key=lambda k: longest[k])
    start, end = at[i], at[i] + longest[i] / 1e3
    return {"longest_ms": longest[i], "round": i + 1, "at_s": start, "attach_s": [began, ended], "quiet": quiet,
            "held": start < ended and end > began}


def space_variant(dims, i):
    """The i-th variant of the recorded space (carveout fastest, regs slowest,
    as evolve_space.c measured them): [regs, minctas, opt, cache, carveout]."""
    v = []
    for name in ("carveout", "cache", "opt", "minctas", "regs"):
        vals = dims[name]
        v.append(vals[i % len(vals)])
        i //= len(vals)
    return v[::-1]


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, max(0, int(math.ceil(q * len(xs))) - 1))]


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--kernels", default="", help="comma-separated (default: all twelve)")
    ap.add_argument("--rounds", type=int, default=40, help="rounds of the first native run and the drk runs")
    ap.add_argument("--short-rounds", type=int, default=12,
                    help="rounds of the second native run and the best runs (a steady time only)")
    ap.add_argument("--processes", type=int, default=1,
                    help="cold drk runs a kernel (each followed by a short native run beyond the first): drk's steady "
                         "time is their median, native's the median of every native run's")
    ap.add_argument("--launches", type=int, default=1500, help="launches a round (the simulator's 1500)")
    ap.add_argument("--budget", default="", help="DRK_EVOLVE_BUDGET (default: drk's, 2%%)")
    ap.add_argument("--pause", type=int, default=100,
                    help="ms the program idles after each round (0: its GPU busy but for each round's synchronize, "
                         "as a trainer's: what drk's loads and waits cost it shows in its rounds)")
    ap.add_argument("--warm", type=int, default=1, help="1: a second drk run on the first's cache (0: none)")
    ap.add_argument("--best-of", type=int, default=2,
                    help="recorded best variants run as the program natively, for a kernel with something to win "
                         "(1 for the others; 0: none)")
    ap.add_argument("--log", default="info", help="DRK_LOG_LEVEL of the drk runs (debug: every build and trial)")
    ap.add_argument("--drk-env", action="append", default=[], metavar="NAME=VALUE",
                    help="a further DRK_* option for the drk runs, e.g. DRK_EVOLVE_SPANS=0 (repeatable)")
    ap.add_argument("--out")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="drk-evolve-bench-")
    os.makedirs(out, exist_ok=True)
    build = os.path.abspath(args.build)
    prog = os.path.join(build, "tests", "bench", "evolve_run")
    ptx = os.path.join(build, "tests", "bench", "evolve_kernels.ptx")
    shim = os.path.join(build, "lib", "libdrk_shim.so")
    for f in (prog, ptx, shim):
        if not os.path.exists(f):
            sys.exit(f"evolve_bench: {f} not found (build first: cmake --build {args.build})")
    recorded = json.load(open(SPACE))
    space = {k["kernel"]: k for k in recorded["kernels"]}
    dims = recorded["dims"]
    names = [n for n in args.kernels.split(",") if n] or list(space)
    print(f"evolve_bench: {len(names)} kernels, {args.rounds} rounds of {args.launches} launches and "
          f"{args.pause} ms of pause, budget "
          f"{args.budget or 'default'}; logs and reports in {out}", flush=True)

    rows = []
    for name in names:
        rec = space.get(name)
        if rec is None:
            print(f"  {name}: not in {SPACE}", file=sys.stderr)
            continue
        cmd = [prog, ptx, name, str(args.rounds), str(args.launches), str(args.pause)]
        short = [prog, ptx, name, str(min(args.short_rounds, args.rounds)), str(args.launches), str(args.pause)]
        nat = run(cmd, clean_env({}), out, f"{name}.native")
        rep_dir = os.path.join(out, f"{name}.drk")
        cache = os.path.join(out, f"{name}.cache")
        extra = {"LD_PRELOAD": shim, "DRK_EVOLVE": "1", "DRK_ROUND_SECONDS": "0", "DRK_REPORT": rep_dir + "/",
                 "DRK_LOG_LEVEL": args.log, "DRK_CACHE_DIR": cache}
        if args.budget:
            extra["DRK_EVOLVE_BUDGET"] = args.budget
        for kv in args.drk_env:
            k, _, v = kv.partition("=")
            extra[k] = v
        drk = run(cmd, clean_env(extra), out, f"{name}.drk")
        rep = report_of(rep_dir)
        warm = None
        if args.warm and drk is not None:
            extra["DRK_REPORT"] = os.path.join(out, f"{name}.warm") + "/"
            warm = run(cmd, clean_env(extra), out, f"{name}.warm")
        # Native again after drk's runs: the GPU drifts between processes
        # (clocks, heat) by about as much as a flat kernel's margin, and a
        # drk run always second would carry the drift as its own. Native is
        # both runs' rounds together; `drift` says how far they were apart.
        nat2 = run(short, clean_env({}), out, f"{name}.native2") if nat is not None else None
        # The exhaustive best as a program, in this run: the recorded best
        # variants JIT'd and launched as evolve_run launches the default.
        bests = []
        possible = rec["ms"][0] / min(rec["ms"])
        top = sorted(range(len(rec["ms"])), key=lambda i: rec["ms"][i])
        for i in top[:args.best_of if possible >= FLAT else min(args.best_of, 1)]:
            v = space_variant(dims, i)
            b = run(short + [",".join(str(x) for x in v), "fn"], clean_env({}), out, f"{name}.best{len(bests)}")
            if b is not None:
                bests.append({"variant": v, "recorded_x": rec["ms"][0] / rec["ms"][i],
                              "ms": statistics.median(b["gpu_ms"][1:] or b["gpu_ms"]), "rounds_ms": b["gpu_ms"],
                              })
        # More processes of each (--processes): a short kernel's time is
        # fixed per process and differs by ~2% between them, drk's or not;
        # one drk process cannot tell a 1% cost from that. Each further drk
        # run is cold (a cache of its own), each native one short.
        more_drk, more_nat, states = [], [], []
        for p in range(1, args.processes if drk is not None and nat2 is not None else 1):
            x = dict(extra, DRK_REPORT=os.path.join(out, f"{name}.drk{p}") + "/",
                     DRK_CACHE_DIR=os.path.join(out, f"{name}.cache{p}"))
            d = run(cmd, clean_env(x), out, f"{name}.drk{p}")
            n = run(short, clean_env({}), out, f"{name}.native{p + 2}")
            if d is None or n is None:
                drk = None
                break
            more_drk.append(d)
            more_nat.append(n)
            st = [r["state"] for r in (report_of(os.path.join(out, f"{name}.drk{p}")) or {}).get("evolve", {})
                  .get("by_kernel", []) if r["name"] == name]
            states.append(st[0] if st else "not a target")
        if nat is None or drk is None or nat2 is None:
            rows.append({"kernel": name, "error": "a run failed (see its .stderr)"})
            continue
        nat_ms = [r["gpu_ms"][1:] or r["gpu_ms"] for r in [nat, nat2] + more_nat]
        native_ms = statistics.median([statistics.median(m) for m in nat_ms])  # each process alike, long or short
        steadies = [statistics.median(r["gpu_ms"][-4:]) for r in [drk] + more_drk]
        native_wall = statistics.median([statistics.median(r["wall_ms"][1:] or r["wall_ms"]) for r in [nat, nat2] + more_nat])
        steady = statistics.median(steadies)
        reach = within(drk["gpu_ms"], steady)
        best = min(bests, key=lambda b: b["ms"]) if bests else None
        to_best = reached(drk["gpu_ms"], best["ms"]) if best is not None else None
        ev = (rep or {}).get("evolve", {})
        erows = [r for r in ev.get("by_kernel", []) if r["name"] == name]
        er = erows[0] if erows else {}
        row_state = er.get("state", "not a target")
        builds = sum(r["builds"] for r in erows)
        build_ms = sum(r["build_ms"] for r in erows)
        row = {
            "kernel": name, "native_ms": native_ms, "drk_ms": steady, "speedup": native_ms / steady,
            "possible": possible, "vs_best": steady / (native_ms / possible), "rounds_to_steady": reach,
            "best_runs": bests, "best_ms": best["ms"] if best else None,
            "best_x": native_ms / best["ms"] if best else None, "vs_best_run": steady / best["ms"] if best else None,
            "rounds_to_best": to_best,
            "serving": er.get("serving", "-"),
            "state": next((x for x in [row_state] + states if x in ("searching", "capturing")), row_state),
            "why": er.get("why", ""), "captures": er.get("captures", 0), "drk_speedup": er.get("speedup"),
            "drk_run_speedup": er.get("run_speedup"),
            "drk_replay_speedup": er.get("replay_speedup"),
            "builds": builds, "build_ms_mean": build_ms / builds if builds else 0.0,
            "build_ms_max": max((r["build_ms_max"] for r in erows), default=0.0),
            "trial_share": ev.get("trial_share", float("nan")),
            "trial_mib_per_capture": sum(r.get("trial_bytes", 0) for r in erows) / 2**20 /
            max(1, sum(r.get("captures", 0) for r in erows)),
            "drift": statistics.median(nat_ms[1]) / statistics.median(nat_ms[0]),
            "wall_ratio": statistics.median(drk["wall_ms"][1:] or drk["wall_ms"]) / native_wall,
            "wall_ratio_steady": statistics.median([statistics.median(r["wall_ms"][-4:]) for r in [drk] + more_drk]) /
            native_wall,
            "gpu_ratio_all": statistics.median(drk["gpu_ms"][1:] or drk["gpu_ms"]) / native_ms,
            "load_ms": {"native": nat["load_ms"], "drk": drk["load_ms"]},
            "same": nat["hash"] == drk["hash"] and (warm is None or warm["hash"] == nat["hash"]),
            "native_rounds_ms": nat["gpu_ms"], "native2_rounds_ms": nat2["gpu_ms"], "drk_rounds_ms": drk["gpu_ms"],
            "stall_ms": {"native": max(nat.get("longest_launch_ms", [0]) + nat2.get("longest_launch_ms", [0])),
                         "drk": max(drk.get("longest_launch_ms", [0]))},
            "untimed": untimed(rep),
            "untimed_all": [sum(x) for x in zip(untimed(rep), *(untimed(report_of(os.path.join(out, f"{name}.drk{p}")))
                                                                for p in range(1, len(more_drk) + 1)))],
            "stall_probe": [x for x in (stall_probe(r, os.path.join(out, f"{name}.drk{'' if k == 0 else k}.stderr"))
                                        for k, r in enumerate([drk] + more_drk)) if x is not None],
            "processes": {"native_ms": [statistics.median(m) for m in nat_ms], "drk_ms": steadies,
                          "drk_states": [row_state] + states,
                          # each drk process's rounds: to within 2% of the best run, and of its own steady time
                          "to_best": [reached(r["gpu_ms"], best["ms"]) if best else None for r in [drk] + more_drk],
                          "to_steady": [within(r["gpu_ms"], m) for r, m in zip([drk] + more_drk, steadies)]},
        }
        if warm is not None:
            wsteady = statistics.median(warm["gpu_ms"][-4:])
            wreach = within(warm["gpu_ms"], wsteady)
            wrep = report_of(os.path.join(out, f"{name}.warm"))
            wev = (wrep or {}).get("evolve", {})
            row["warm"] = {"speedup": native_ms / wsteady, "rounds_to_steady": wreach, "rounds_ms": warm["gpu_ms"],
                           "stall_ms": max(warm.get("longest_launch_ms", [0])),
                           "cubin_hits": wev.get("cubin_hits", 0), "cubin_hit_ms_mean": wev.get("cubin_hit_ms_mean", 0),
                           "cubin_hit_ms_max": wev.get("cubin_hit_ms_max", 0),
                           "cubin_read_ms_mean": wev.get("cubin_read_ms_mean", 0), "untimed": untimed(wrep),
                           "cache_serves": wev.get("cache_serves", 0),
                           "cache_serve_ms_mean": wev.get("cache_serve_ms_mean", 0),
                           "cache_serve_ms_max": wev.get("cache_serve_ms_max", 0),
                           "quiet_loads": wev.get("quiet_loads", 0),
                           "run_speedup": [k.get("run_speedup", 0) for k in wev.get("by_kernel", [])]}
        rows.append(row)
        # The rounds too, so that a call cut off by its time limit keeps them
        # for the kernels it finished (the table comes only at the end).
        print(f"  {name}: native {native_ms:.4f} ms, drk {steady:.4f} ms ({row['speedup']:.3f}x of a possible "
              f"{possible:.3f}x), serving {row['serving']} ({row['state']}); steady from round "
              f"{row['rounds_to_steady']}"
              + (f", {row['vs_best_run']:.3f} of its best run, within 2% of it from round "
                 f"{'-' if to_best is None else to_best}" if best else "")
              + (f"; warm {row['warm']['speedup']:.3f}x from round {row['warm']['rounds_to_steady']}"
                 if warm is not None else "")
              + (f"; processes: native {' '.join(f'{x:.4f}' for x in row['processes']['native_ms'])}, drk "
                 f"{' '.join(f'{x:.4f}' for x in steadies)}" if more_drk else ""), flush=True)

    print()
    print(f"{'kernel':16} {'native ms':>10} {'drk ms':>10} {'x':>7} {'possible':>8} {'vs best':>8} {'best x':>7} "
          f"{'vs run':>7} {'to best':>7} {'rounds':>6} {'end':>9}  "
          f"{'serving':28} {'builds':>6} {'mean ms':>8} {'max ms':>8} {'trial':>6} {'wall':>6} {'stall drk/nat ms':>16} "
          f"{'warm x':>7} {'w.rnd':>5} {'drift':>6} same")
    for r in rows:
        if "error" in r:
            print(f"{r['kernel']:16} {r['error']}")
            continue
        print(f"{r['kernel']:16} {r['native_ms']:10.4f} {r['drk_ms']:10.4f} {r['speedup']:6.3f}x {r['possible']:7.3f}x "
              f"{r['vs_best']:8.3f} {r['best_x'] or float('nan'):6.3f}x {r['vs_best_run'] or float('nan'):7.3f} "
              f"{'-' if r['rounds_to_best'] is None else r['rounds_to_best']:>7} "
              f"{r['rounds_to_steady']:6d} {r['state'][:9]:>9}  {r['serving'][:28]:28} {r['builds']:6d} "
              f"{r['build_ms_mean']:8.2f} {r['build_ms_max']:8.1f} {100 * r['trial_share']:5.2f}% "
              f"{r['wall_ratio']:6.3f} {r['stall_ms']['drk']:7.3f}/{r['stall_ms']['native']:<8.3f} "
              f"{r['warm']['speedup'] if 'warm' in r else float('nan'):6.3f}x "
              f"{r['warm']['rounds_to_steady'] if 'warm' in r else -1:5d} {r['drift']:6.3f} {'yes' if r['same'] else 'NO'}")
    ok = [r for r in rows if "error" not in r]
    per_build = [r["build_ms_mean"] for r in ok for _ in range(r["builds"])]
    if per_build:
        print(f"compile: {len(per_build)} builds, median {pct(per_build, 0.5):.2f} ms, p95 {pct(per_build, 0.95):.2f} "
              f"ms (each kernel's builds at their mean), longest {max(r['build_ms_max'] for r in ok):.1f} ms")
    flat = [r for r in ok if r["possible"] < FLAT]
    if flat:
        print(f"nothing to win ({len(flat)} kernels, recorded best within {100 * (FLAT - 1):.0f}%): wall time a launch "
              f"drk/native {geomean([r['wall_ratio'] for r in flat]):.4f}, GPU time {geomean([r['gpu_ratio_all'] for r in flat]):.4f} "
              f"(geometric means of the median round after the first: searches included); at the steady state (the last "
              f"4 rounds) {geomean([r['wall_ratio_steady'] for r in flat]):.4f} and "
              f"{geomean([r['drk_ms'] / r['native_ms'] for r in flat]):.4f}")
    def warm_sum(key):
        """The warm runs that counted `key`: how many in all, and a mean (of `key`_ms_mean) weighted by them."""
        ws = [r["warm"] for r in ok if "warm" in r and r["warm"][key]]
        n = sum(w[key] for w in ws)
        return ws, n, lambda field: sum(w[field] * w[key] for w in ws) / n
    served, n, mean = warm_sum("cache_serves")
    if served:
        print(f"cache: the warm runs served {n} earlier results from the cache, mean {mean('cache_serve_ms_mean'):.3f} "
              f"ms, longest {max(h['cache_serve_ms_max'] for h in served):.3f} ms (the cubin's read and its load into "
              f"the program's context; {sum(h['quiet_loads'] for h in served)} loaded at the program's synchronize)")
    hits, n, mean = warm_sum("cubin_hits")
    if hits:
        print(f"cache: the warm runs loaded {n} cubins from the cache, mean {mean('cubin_hit_ms_mean'):.3f} ms, longest "
              f"{max(h['cubin_hit_ms_max'] for h in hits):.3f} ms (the read and the module's load); of it the cache's "
              f"read {mean('cubin_read_ms_mean'):.3f} ms, the rest the driver's load (it waits for the GPU to switch to "
              f"drk's context), for trials and proofs")
    if ok:
        d = [r["drift"] for r in ok]
        print(f"native drift: the second native run over the first {min(d):.3f}-{max(d):.3f} (median "
              f"{statistics.median(d):.3f}): what separate processes differ by with nothing changed")
        ended = [r for r in ok if r["state"] not in ("searching", "capturing")]
        low = min(ended, key=lambda r: r["speedup"]) if ended else None
        print(f"steady state: {len(ended)} of {len(ok)} kernels' searches ended by round {args.rounds}"
              + (f"; the lowest x among them {low['speedup']:.3f} ({low['kernel']})" if low else "")
              + "".join(f"; {r['kernel']} still searching ({r['speedup']:.3f}x after {r['captures']} captures)"
                        for r in ok if r not in ended))
        u = [r["untimed_all"] for r in ok]
        w = [r["warm"]["untimed"] for r in ok if "warm" in r]
        print(f"kernel records rested in {sum(a for a, _ in u)} of {sum(b for _, b in u)} rounds"
              + (f" of {sum(len(r['processes']['drk_ms']) for r in ok)} drk processes" if args.processes > 1 else "")
              + (f" ({sum(a for a, _ in w)} of {sum(b for _, b in w)} in the warm runs)" if w else "")
              + ": where evolution had nothing left to search")
        if args.processes > 1:
            said = lambda xs: ", ".join("-" if x is None else str(x) for x in xs)
            for r in ok:
                print(f"rounds, each drk process: {r['kernel']} within 2% of the best run from "
                      f"{said(r['processes']['to_best'])}; of its own steady time from "
                      f"{said(r['processes']['to_steady'])}")
        print(f"stalls: longest launch call under drk {max(r['stall_ms']['drk'] for r in ok):.3f} ms, natively "
              f"{max(r['stall_ms']['native'] for r in ok):.3f} ms")
        probes = [(r["kernel"], k + 1, x) for r in ok for k, x in enumerate(r["stall_probe"])]
        for kernel, k, x in probes:
            print(f"stall probe: {kernel} process {k}: longest launch call {x['longest_ms']:.3f} ms (round "
                  f"{x['round']}, at {x['at_s']:.4f} s); CUPTI attached {x['attach_s'][0]:.4f}-{x['attach_s'][1]:.4f} s "
                  f"({1e3 * (x['attach_s'][1] - x['attach_s'][0]):.1f} ms, "
                  f"{'at a quiet moment' if x['quiet'] else 'while the program launched'}): "
                  f"{'the attach held it' if x['held'] else 'apart'}")
        if probes:
            print(f"stall probe: the longest launch call overlapped CUPTI's attach in "
                  f"{sum(x['held'] for _, _, x in probes)} of {len(probes)} drk processes")
        moved = [r for r in ok if r["trial_mib_per_capture"] > 0]
        print(f"trials: mean share {100 * statistics.mean(r['trial_share'] for r in ok):.2f}% of kernel time, "
              f"most {100 * max(r['trial_share'] for r in ok):.2f}%; outputs equal natively and under drk: "
              f"{sum(r['same'] for r in ok)} of {len(ok)}"
              + (f"; copied and compared a capture: " + ", ".join(f"{r['kernel']} {r['trial_mib_per_capture']:.0f} MiB"
                                                                  for r in moved) if moved else ""))
        wins = [r for r in ok if r["possible"] >= FLAT]
        for r in wins:
            said = [f"{x:.3f}x" if x else "-" for x in [r.get("drk_run_speedup")] + r.get("warm", {}).get("run_speedup", [])]
            print(f"win: {r['kernel']} {r['speedup']:.3f}x of a possible {r['possible']:.3f}x, steady from round "
                  f"{r['rounds_to_steady']}, serving {r['serving']}; drk's report says {' / '.join(said)} "
                  f"(timed on the program's launches; warm run after the slash), {r.get('drk_replay_speedup') or 0:.3f}x "
                  f"by its replays")
    with open(os.path.join(out, "evolve_bench.json"), "w") as f:
        json.dump({"rounds": args.rounds, "launches": args.launches, "pause_ms": args.pause,
                   "budget": args.budget or None, "kernels": rows},
                  f, indent=1)
    if args.out:
        pack(out)


def pack(out):
    """The runs' output and reports into one archive, their caches gone: a
    GPU machine hands back a limited count of files (an H200 run of all
    twelve kernels lost most of its ~290)."""
    import shutil
    import tarfile

    names = sorted(n for n in os.listdir(out) if n not in ("evolve_bench.json", "evolve_bench_logs.tar.gz"))
    with tarfile.open(os.path.join(out, "evolve_bench_logs.tar.gz"), "w:gz") as tar:
        for n in names:
            if not n.endswith(".cache"):
                tar.add(os.path.join(out, n), arcname=n)
    for n in names:
        p = os.path.join(out, n)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)


if __name__ == "__main__":
    main()
