#!/usr/bin/env python3
"""What drk costs a program's start-up and memory: wall time and peak RSS of
whole processes, natively and under drk (default options, so images are
read), interleaved round by round so both see the same machine.

    tests/bench/startup.py [--build BUILD] [--rounds N] [--ppo-steps K] [--json OUT]
                           [--with-report] [--evolve-off]

Cases: `import torch; torch.zeros(1, device='cuda')` (PyTorch start-up, the
first CUDA context and the first kernel), and the PPO trainer of the GPU
suite for K steps. Prints per case the medians and the ratios drk/native
(time: <= 1.05 is the target; RSS: drk - native in MB, <= 50 the target).
Peak RSS is the kernel's ru_maxrss of the child (wait4), in KiB.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TORCH_ZEROS = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"


def one_run(argv, env, timeout):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.002)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_maxrss, err


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ppo-steps", type=int, default=50)
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--json")
    ap.add_argument("--cases", default="torch_zeros,ppo", help="comma-separated: torch_zeros, ppo")
    ap.add_argument("--with-report", action="store_true",
                    help="also time drk with DRK_REPORT set (images left unread at load are read at exit)")
    ap.add_argument("--evolve-off", action="store_true",
                    help="also time drk with DRK_EVOLVE=0 (what evolution, on by default, adds)")
    a = ap.parse_args()
    shim = os.path.join(a.build, "lib", "libdrk_shim.so")
    if not os.path.exists(shim):
        sys.exit(f"startup.py: {shim} not found")
    base = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k != "LD_PRELOAD"}
    envs = {"native": base, "drk": dict(base, LD_PRELOAD=shim)}
    if a.with_report:
        envs["drk_report"] = dict(base, LD_PRELOAD=shim, DRK_REPORT=tempfile.mkdtemp(prefix="drk-startup-") + "/")
    if a.evolve_off:
        envs["drk_evolve_off"] = dict(base, LD_PRELOAD=shim, DRK_EVOLVE="0")
    cases = {
        "torch_zeros": [sys.executable, "-c", TORCH_ZEROS],
        "ppo": [sys.executable, os.path.join(ROOT, "tests", "gpu", "workloads", "ppo.py"), "--steps", str(a.ppo_steps)],
    }
    results = {}
    ok = True
    cases = {c: cases[c] for c in a.cases.split(",")}
    for case, argv in cases.items():
        # One untimed run each warms the page cache and the driver's caches.
        for mode in envs:
            one_run(argv, envs[mode], a.timeout)
        runs = {m: [] for m in envs}
        for r in range(a.rounds):
            order = list(envs) if r % 2 == 0 else list(reversed(list(envs)))  # interleaved
            for mode in order:
                rc, wall, rss, err = one_run(argv, envs[mode], a.timeout)
                if rc != 0:
                    ok = False
                    print(f"{case} {mode}: exit {rc}: {err[-400:]}", file=sys.stderr)
                    continue
                runs[mode].append((wall, rss))
        if not runs["native"] or not runs["drk"]:
            results[case] = {"error": "runs failed"}
            continue
        med = {m: (statistics.median(w for w, _ in v), statistics.median(r for _, r in v)) for m, v in runs.items()}
        res = {
            "rounds": a.rounds,
            "wall_s": {m: [round(w, 4) for w, _ in v] for m, v in runs.items()},
            "rss_kib": {m: [r for _, r in v] for m, v in runs.items()},
            "native_wall_median_s": med["native"][0],
            "drk_wall_median_s": med["drk"][0],
            "time_ratio_drk_over_native": med["drk"][0] / med["native"][0],
            "native_rss_median_mb": med["native"][1] / 1024,
            "drk_rss_median_mb": med["drk"][1] / 1024,
            "rss_delta_mb": (med["drk"][1] - med["native"][1]) / 1024,
        }
        for m in envs:
            if m not in ("native", "drk") and runs[m]:
                res[f"{m}_time_ratio_over_native"] = med[m][0] / med["native"][0]
                res[f"{m}_rss_delta_mb"] = (med[m][1] - med["native"][1]) / 1024
                print(f"{case}: time {m}/native {res[f'{m}_time_ratio_over_native']:.4f}, "
                      f"peak RSS {res[f'{m}_rss_delta_mb']:+.1f} MB")
        results[case] = res
        nw = [w for w, _ in runs["native"]]
        print(f"{case}: time drk/native {res['time_ratio_drk_over_native']:.4f} "
              f"(medians {med['drk'][0]:.3f} s / {med['native'][0]:.3f} s; native range "
              f"{min(nw):.3f}-{max(nw):.3f} s); peak RSS {res['drk_rss_median_mb']:.1f} MB vs "
              f"{res['native_rss_median_mb']:.1f} MB: {res['rss_delta_mb']:+.1f} MB")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
