#!/usr/bin/env python3
"""drk's device pool against the driver's allocator under PyTorch, inside one
process per allocator config, so that the ratio can resolve 1%: whole-process
runs of the same step scatter by 3-10% on an H200 (alloc.sh's PyTorch cases
measured 0.97x and 1.11x on two days), phases of one process do not.

    python3 tests/bench/torch_ab.py --build build [--configs caching,nocache,async]
                                    [--phases 16] [--steps 20] [--warmup 3] [--out DIR]
                                    [--drk-env DRK_X=V ...]

For each config (PyTorch's caching allocator, PYTORCH_NO_CUDA_MEMORY_CACHING=1,
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) one child process runs the
GPT trainer of torch_alloc_step.py under drk with its default options. It
finds drk's drk_alloc_switch with dlsym (docs/memory.md, "A/B inside one
process") and runs --phases phases in the order drk, driver, driver, drk, ...
(ABBA, so a drift in time falls on both alike). A phase switches the pool,
synchronizes, empties PyTorch's cache (so that its blocks are asked for again,
of whichever allocator now serves them), runs --warmup untimed steps and then
--steps steps, each timed between torch.cuda.synchronize() calls; its number
is the median step. Both phases of a pair draw the same sequence lengths
(the token generator restarted at the pair's stream), so their steps pair
up: each pair of phases (1-2, 3-4, ...) gives a ratio, the median over its
steps of driver's step / drk's step (above 1: drk is faster). On the H200
(2026-12-02) phases that drew different lengths gave intervals of +-6%. The line per config:
both medians, the pairs' median ratio and its 95% interval (2000 bootstrap
resamples of the pairs, seeded), and whether that interval resolves 1% (its
half-width at most 1%).

What it cannot show: the model's weights and the optimizer's state are
allocated once, before the first phase, under drk's pool; a phase moves only
what PyTorch allocates again (activations, gradients, temporaries; with its
cache on, the blocks it had cached). The last line is one JSON object (every
phase's steps too); with --out also DIR/torch_ab.json. Exit status 0 when
every config gave at least one pair; 1 otherwise (PyTorch, a GPU or drk
missing included).
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {
    "caching": {},
    "nocache": {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    "async": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
}
CLEARED = ("PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_INJECTION64_PATH",
           "NVTX_INJECTION64_PATH")


def child(a):
    """One config's phases, in this process (under drk): prints one JSON line."""
    import torch
    sys.path.insert(0, os.path.join(here, "..", "gpu", "workloads"))
    from gpt_model import bench_trainer
    try:
        sw = ctypes.CDLL(None).drk_alloc_switch
    except AttributeError:
        sys.exit("torch_ab.py: drk_alloc_switch not found: not running under drk")
    sw.argtypes, sw.restype = [ctypes.c_int], ctypes.c_int
    if sw(-1) != 1:
        sys.exit("torch_ab.py: drk's device pool is off (DRK_ALLOC=0?)")
    if not torch.cuda.is_available():
        sys.exit("torch_ab.py: no CUDA device")
    step = bench_trainer(a.dim, a.layers, a.batch, a.seed, a.warmup)
    phases = []
    for i in range(a.phases):
        drk = i % 4 in (0, 3)
        sw(1 if drk else 0)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        # Both phases of a pair draw the same sequence lengths (a step's
        # time follows its length: 32-512 tokens), so their steps pair up.
        step.reseed(i // 2)
        for _ in range(a.warmup):
            step()
        torch.cuda.synchronize()
        times = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        phases.append({"drk": drk, "step_ms_median": statistics.median(times), "step_ms": times})
    sw(1)
    print(json.dumps({"config": a.child, "phases": phases, "paired_steps": True, "torch": torch.__version__,
                      "device": torch.cuda.get_device_name(0)}), flush=True)


def interval(ratios, seed=7, n=2000):
    """The pairs' median ratio and a 95% bootstrap interval of it."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(n))
    return statistics.median(ratios), meds[int(0.025 * n)], meds[min(n - 1, int(0.975 * n))]


def summary(name, got):
    phases = got["phases"]
    pairs = []
    for k in range(0, len(phases) - 1, 2):
        a, b = phases[k], phases[k + 1]
        drk, drv = (a, b) if a["drk"] else (b, a)
        if not drk["drk"] or drv["drk"]:
            continue
        a_ms, b_ms = drk.get("step_ms"), drv.get("step_ms")
        if a_ms and b_ms and len(a_ms) == len(b_ms) and got.get("paired_steps"):
            # The same lengths step by step: the median of the steps' ratios.
            pairs.append(statistics.median(d / k for d, k in zip(b_ms, a_ms)))
        else:
            pairs.append(drv["step_ms_median"] / drk["step_ms_median"])
    if not pairs:
        return None
    med, lo, hi = interval(pairs)
    drk_ms = statistics.median(p["step_ms_median"] for p in phases if p["drk"])
    drv_ms = statistics.median(p["step_ms_median"] for p in phases if not p["drk"])
    return {"config": name, "pairs": len(pairs), "drk_ms": drk_ms, "driver_ms": drv_ms, "ratio": med,
            "low": lo, "high": hi, "resolves_1pct": (hi - lo) / 2 <= 0.01, "ratios": pairs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    ap.add_argument("--configs", default="caching,nocache,async")
    ap.add_argument("--phases", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=240, help="seconds a config's process may take")
    ap.add_argument("--drk-env", action="append", default=[], metavar="DRK_X=V",
                    help="a drk option for every config's process (repeatable), e.g. DRK_ALLOC_GROW=1")
    ap.add_argument("--out")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.phases < 2 or a.steps < 1 or a.warmup < 0:
        sys.exit("torch_ab.py: --phases must be >= 2, --steps >= 1 and --warmup >= 0")
    if a.child:
        child(a)
        return
    shim = os.path.join(os.path.abspath(a.build), "lib", "libdrk_shim.so")
    if not os.path.exists(shim):
        sys.exit(f"torch_ab.py: {shim} not found (build the project first)")
    extra = dict(kv.split("=", 1) for kv in a.drk_env if "=" in kv)
    if len(extra) != len(a.drk_env) or any(not k.startswith("DRK_") for k in extra):
        sys.exit("torch_ab.py: --drk-env takes DRK_NAME=VALUE")
    names = [c for c in a.configs.split(",") if c]
    bad = [c for c in names if c not in CONFIGS]
    if bad:
        sys.exit(f"torch_ab.py: unknown config(s) {bad}: choose from {sorted(CONFIGS)}")
    results, rows, failed = {}, [], 0
    for name in names:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k not in CLEARED}
        env.update(CONFIGS[name], LD_PRELOAD=shim, **extra)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name] + [
            f"--{k}={getattr(a, k)}" for k in ("phases", "steps", "warmup", "layers", "dim", "batch", "seed")]
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
            out, err, rc = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired:
            out, err, rc = "", f"timed out after {a.timeout} s", "timeout"
        got = None
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                got = json.loads(line)
                break
        row = summary(name, got) if rc == 0 and got else None
        if not row:
            failed += 1
            print(f"{name}: no result (exit {rc}): {err.strip()[-600:]}", flush=True)
            continue
        results[name], rows = got, rows + [row]
        print(f"{name:8s} drk {row['drk_ms']:.3f} ms  driver {row['driver_ms']:.3f} ms  "
              f"ratio {row['ratio']:.4f}x [{row['low']:.4f}, {row['high']:.4f}] over {row['pairs']} pairs  "
              f"{'resolves 1%' if row['resolves_1pct'] else 'does NOT resolve 1%'}", flush=True)
    doc = {"settings": {k: getattr(a, k) for k in ("configs", "phases", "steps", "warmup", "layers", "dim", "batch",
                                                    "seed", "drk_env")},
           "summary": rows, "runs": results}
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "torch_ab.json"), "w") as f:
            json.dump(doc, f, indent=1)
    print(json.dumps({"summary": [{k: v for k, v in r.items() if k != "ratios"} for r in rows]}), flush=True)
    sys.exit(1 if failed or not rows else 0)


if __name__ == "__main__":
    main()
