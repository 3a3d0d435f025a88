#!/usr/bin/env python3
"""evolve_bench.py's arithmetic, checked in CI against a stand-in evolve_run
(no GPU): a build tree whose tests/bench/evolve_run is a script printing the
JSON evolve_run prints, from rounds made up here, and writing the report
drk would (DRK_REPORT) for the runs evolve_bench preloads drk into.

The made-up kernels (times in ms a launch; what they check):
  nbody         native 0.65, 0.65/2.04 under drk from round 7 on, the best
                run 0.65/2.05: x 2.04 from round 7, within 2% of the best
                run from round 7, the warm run steady from round 0
  stencil5      native 0.0642; under drk its odd rounds 5% slower until round
                12 (a search's timed rounds), then native: x 1.000 from round
                12, searching in the second of two drk processes (the state
                over all of them)
  softmax_rows  each process its own time (0.0194-0.0198 in turn), drk or
                not: with --processes 2, drk's steady time is the median of
                its two processes', native's the median of the three native
                runs' (not of their rounds: the first run has the most);
                with --log debug its drk processes say when CUPTI attached:
                the first one's longest launch call falls inside the attach,
                the second's does not (the stall probe)

Usage: check_evolve_bench.py EVOLVE_BENCH_PY"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

STANDIN = r'''#!/usr/bin/env python3
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
kernel, rounds = sys.argv[2], int(sys.argv[3])
variant = sys.argv[6] if len(sys.argv) > 6 else None
count = os.path.join(here, "count")
n = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(n + 1))
drk = "LD_PRELOAD" in os.environ and os.environ.get("DRK_EVOLVE") == "1"
cache = os.environ.get("DRK_CACHE_DIR", "")
warm = drk and os.path.exists(os.path.join(cache, "done"))
state = "settled"
if kernel == "nbody":
    base = 0.65
    ms = [base / 2.05] * rounds if variant else [base / 2.04 if drk and (warm or r >= 7) else base for r in range(rounds)]
elif kernel == "stencil5":
    base = 0.0642
    ms = [base * 1.05 if drk and not warm and r < 12 and r % 2 else base for r in range(rounds)]
    if drk and not warm and os.environ["DRK_REPORT"].rstrip("/").endswith("drk1"):
        state = "searching"
else:
    ms = [(0.0194, 0.0196, 0.0198, 0.0195, 0.0197)[n % 5]] * rounds
if drk:
    os.makedirs(cache, exist_ok=True)
    open(os.path.join(cache, "done"), "w").close()
    rep = os.environ["DRK_REPORT"]
    os.makedirs(rep, exist_ok=True)
    row = {"name": kernel, "state": state, "serving": "regs=56" if kernel == "nbody" else "default", "builds": 4,
           "captures": 3, "build_ms": 100.0, "build_ms_max": 40.0, "speedup": 2.04 if kernel == "nbody" else 1.0,
           "trial_bytes": (3 if os.environ.get("DRK_EVOLVE_SPANS") == "1" else 6) << 30}
    json.dump({"evolve": {"trial_share": 0.005, "by_kernel": [row]}, "gpu_time": {"unsampled_rounds": 3},
               "rounds": {"closed": rounds - 3}}, open(os.path.join(rep, "drk-standin.json"), "w"))
longest, at = [0.01] * rounds, [1.0 + r for r in range(rounds)]
if drk and kernel == "stencil5" and os.environ.get("DRK_LOG_LEVEL") == "debug":
    # drk's debug lines on CUPTI's attach: held the first process's round 2, not the second's.
    first = not os.environ["DRK_REPORT"].rstrip("/").endswith("drk1")
    t0 = 2.0 if first else 5.5
    if first:
        print("drk[1:1] debug: [%.6f] GPU times: CUPTI attaches after 3.0 ms, the program having launched nothing "
              "for 2.1 ms (at %.6f s on the monotonic clock)" % (t0, t0), file=sys.stderr)
    else:
        print("drk[1:1] debug: [%.6f] GPU times: CUPTI attaches while the program launches: no pause of 2.0 ms in "
              "2000 ms" % t0, file=sys.stderr)
    print("drk[1:1] debug: [%.6f] GPU times: CUPTI attached in 85.0 ms (from %.6f s on the monotonic clock)"
          % (t0 + 0.085, t0), file=sys.stderr)
    longest[1] = 66.6 if first else 1.5
    at[1] = t0 + (0.0085 if first else 1.0)
print(json.dumps({"kernel": kernel, "rounds": rounds, "launches": 1500, "load_ms": 1.0, "hash": "0x%016x" % rounds,
                  "gpu_ms": ms, "wall_ms": ms, "longest_launch_ms": longest, "longest_launch_at_s": at}))
'''

failed = 0


def check(ok, what, got):
    global failed
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {got}"))
    failed += not ok


def near(a, b, tol=1e-6):
    return a is not None and abs(a - b) <= tol * max(1.0, abs(b))


def main():
    bench = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="drk-evolve-bench-check-") as tmp:
        os.makedirs(os.path.join(tmp, "tests", "bench"))
        os.makedirs(os.path.join(tmp, "lib"))
        prog = os.path.join(tmp, "tests", "bench", "evolve_run")
        with open(prog, "w") as f:
            f.write(STANDIN)
        os.chmod(prog, 0o755)
        open(os.path.join(tmp, "tests", "bench", "evolve_kernels.ptx"), "w").close()
        # Preloaded into the stand-in (a Python process): the C library,
        # which it has loaded anyway.
        libc = next(line.split()[-1] for line in open("/proc/self/maps") if re.search(r"/libc(-[\d.]+)?\.so", line))
        os.symlink(libc, os.path.join(tmp, "lib", "libdrk_shim.so"))
        out = os.path.join(tmp, "out")
        p = subprocess.run([sys.executable, bench, "--build", tmp, "--kernels", "nbody,stencil5,softmax_rows",
                            "--rounds", "20", "--short-rounds", "6", "--processes", "2", "--out", out,
                            "--drk-env", "DRK_EVOLVE_SPANS=1", "--log", "debug"],
                           capture_output=True, text=True, timeout=300)
        print(p.stdout)
        check(p.returncode == 0, "evolve_bench ran", p.stderr[-2000:])
        if p.returncode:
            return 1
        rows = {r["kernel"]: r for r in json.load(open(os.path.join(out, "evolve_bench.json")))["kernels"]}
        check(set(rows) == {"nbody", "stencil5", "softmax_rows"} and not any("error" in r for r in rows.values()),
              "a row for each kernel", rows.keys())

        nb = rows["nbody"]
        check(near(nb["speedup"], 2.04) and nb["rounds_to_steady"] == 7,
              "nbody: 2.04x from round 7", (nb["speedup"], nb["rounds_to_steady"]))
        check(near(nb["best_x"], 2.05) and near(nb["vs_best_run"], 2.05 / 2.04) and nb["rounds_to_best"] == 7,
              "nbody: the best run 2.05x, drk within 2% of it from round 7",
              (nb["best_x"], nb["vs_best_run"], nb["rounds_to_best"]))
        check(len(nb["best_runs"]) == 2 and all(len(b["rounds_ms"]) == 6 for b in nb["best_runs"]),
              "nbody: its best two runs, short", [len(b["rounds_ms"]) for b in nb["best_runs"]])
        check(near(nb["warm"]["speedup"], 2.04) and nb["warm"]["rounds_to_steady"] == 0,
              "nbody: the warm run steady from round 0", nb["warm"])
        check(nb["serving"] == "regs=56" and nb["state"] == "settled" and nb["same"],
              "nbody: serving and state from the report, outputs the same", (nb["serving"], nb["state"]))

        st = rows["stencil5"]
        check(near(st["speedup"], 1.0) and st["rounds_to_steady"] == 12,
              "stencil5: native's time at the steady state, from round 12", (st["speedup"], st["rounds_to_steady"]))
        check(st["state"] == "searching" and st["processes"]["drk_states"] == ["settled", "searching"],
              "stencil5: searching in one of its two drk processes, so searching", st["processes"])
        check(len(st["drk_rounds_ms"]) == 20 and len(st["native2_rounds_ms"]) == 6,
              "the drk runs get --rounds, the second native run --short-rounds",
              (len(st["drk_rounds_ms"]), len(st["native2_rounds_ms"])))
        check(near(st["gpu_ratio_all"], 1.0) and near(st["wall_ratio_steady"], 1.0),
              "stencil5: the median round and the steady state as native", (st["gpu_ratio_all"], st["wall_ratio_steady"]))

        sm = rows["softmax_rows"]
        pr = sm["processes"]
        pooled = statistics.median(sm["native_rounds_ms"][1:] + sm["native2_rounds_ms"][1:])
        check(len(pr["drk_ms"]) == 2 and len(pr["native_ms"]) == 3 and len(set(pr["drk_ms"] + pr["native_ms"])) > 1,
              "softmax_rows: two drk processes and three native ones, their times apart", pr)
        all_native = statistics.median(pr["native_ms"])
        check(near(sm["drk_ms"], statistics.median(pr["drk_ms"])) and near(sm["native_ms"], all_native)
              and not near(pooled, all_native) and near(sm["speedup"], 1.0),
              "softmax_rows: drk's steady time the median over its processes, native's over the native runs' medians",
              (sm["drk_ms"], sm["native_ms"], pr))

        check(re.search(r"steady state: 2 of 3 kernels' searches ended by round 20; the lowest x among them [\d.]+ "
                        r"\((softmax_rows|nbody)\); stencil5 still searching \(1\.000x after 3 captures\)",
                        p.stdout) is not None,
              "the summary names the search still running", p.stdout[-1500:])
        check(re.search(r"^stencil5 .* searching ", p.stdout, re.M) is not None, "the table's end column", p.stdout)
        # Each drk process's rounds, not the first one's alone.
        check(nb["processes"]["to_best"] == [7, 7] and st["processes"]["to_steady"] == [12, 12] and
              st["processes"]["to_best"] == [12, 12],
              "each drk process's rounds to the best run and to its own steady time", (nb["processes"], st["processes"]))
        check("rounds, each drk process: nbody within 2% of the best run from 7, 7; of its own steady time from 7, 7"
              in p.stdout and "rounds, each drk process: stencil5 within 2% of the best run from 12, 12" in p.stdout,
              "the rounds of each drk process printed", p.stdout[-3000:])
        check("kernel records rested in 18 of 120 rounds of 6 drk processes (9 of 60 in the warm runs)" in p.stdout,
              "kernel records' rests summed over every drk process", p.stdout[-3000:])
        check("copied and compared a capture: nbody 1024 MiB, stencil5 1024 MiB, softmax_rows 1024 MiB" in p.stdout,
              "the trials' bytes a capture, from the report, in drk runs given --drk-env", p.stdout[-1500:])
        probe = st["stall_probe"]
        check(len(probe) == 2 and probe[0]["held"] and probe[0]["quiet"] and probe[0]["round"] == 2
              and near(probe[0]["attach_s"][0], 2.0) and near(probe[0]["attach_s"][1], 2.085)
              and not probe[1]["held"] and not probe[1]["quiet"] and not nb["stall_probe"],
              "stencil5: each drk process's longest launch call set against CUPTI's attach (none without the lines)",
              (probe, nb["stall_probe"]))
        check("stall probe: stencil5 process 1: longest launch call 66.600 ms (round 2, at 2.0085 s); CUPTI attached "
              "2.0000-2.0850 s (85.0 ms, at a quiet moment): the attach held it" in p.stdout
              and "stall probe: the longest launch call overlapped CUPTI's attach in 1 of 2 drk processes" in p.stdout,
              "the stall probe's lines", p.stdout[-2500:])
        check(os.path.exists(os.path.join(out, "evolve_bench_logs.tar.gz")), "the runs' logs packed", os.listdir(out))
        # A kernel's line as it finishes holds its rounds (a call cut off
        # before the table keeps them).
        check(re.search(r"^  nbody: .*\(settled\); steady from round 7, 1\.005 of its best run, within 2% of it from "
                        r"round 7; warm 2\.040x from round 0;", p.stdout, re.M) is not None,
              "each kernel's line gives its rounds as it finishes", p.stdout[:1500])
    print("check_evolve_bench:", "FAILED" if failed else "all passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
