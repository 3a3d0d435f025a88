#!/usr/bin/env python3
"""Runs profile_route under drk with DRK_PROFILE=1 and holds its report's GPU
times and rounds against what the program queued on the stand-in CUPTI.

Usage: check_profile.py --program PATH --preload LIBS --mode rounds|failing|profiler|lookup|nvtx|occupancy
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from scratch import keep_if, scratch  # noqa: E402

failures = 0
keep_if(lambda: failures)


def check(cond, what, detail=""):
    global failures
    print(("PASS " if cond else "FAIL ") + what + ("" if cond else "\n  " + str(detail)))
    failures += not cond


def near(got, want, rel):
    return abs(got - want) <= rel * want


def run(args, mode, extra=None):
    out = scratch("drk-profile-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRK_")}
    env.update(LD_PRELOAD=args.preload, DRK_PROFILE="1", DRK_ROUND_SECONDS="0", DRK_REPORT=out + "/",
               DRK_LOG_LEVEL="info")
    env.update(extra or {})
    p = subprocess.run([args.program, mode], env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"{mode}: the program runs to its end under drk", p.stderr)
    reports = glob.glob(os.path.join(out, "*.json"))
    check(len(reports) == 1, f"{mode}: one report", reports)
    if len(reports) != 1:
        sys.exit(1)
    return json.load(open(reports[0])), p


def rows_by_shape(gt):
    return {(r["name"], tuple(r["grid"]), tuple(r["block"]), r["shared_bytes"]): r for r in gt["by_kernel"]}


def case_rounds(args, mode="rounds", by="cuProfilerStop"):
    extra = {"NVTX_INJECTION64_PATH": args.preload.split()[-1]} if mode == "nvtx" else {}
    rep, p = run(args, mode, extra)
    check("records on when the first call returned: 1" in p.stdout,
          "CUPTI started in the program's first call to drk, a context current (no launch held later)", p.stdout)
    gt = rep["gpu_time"]
    check(gt["enabled"] and gt["off_reason"] is None, "times taken", gt)
    check(gt["source"] and "fakecupti" in gt["source"], "from the CUPTI the program loaded", gt["source"])
    check(gt["kernels"] == 84 and gt["copies"] == 8, "every kernel and copy record counted",
          (gt["kernels"], gt["copies"]))
    check(gt["dropped"] == 0 and gt["untracked"] == 0 and gt["late"] == 0, "none dropped, untracked or late", gt)
    rows = rows_by_shape(gt)
    small, big, hidden = ("empty", (1, 1, 1), (32, 1, 1), 0), ("empty", (4, 1, 1), (64, 1, 1), 0), \
        ("hidden", (2, 1, 1), (128, 1, 1), 256)
    check(set(rows) == {small, big, hidden}, "one row per kernel-shape", list(rows))
    if set(rows) == {small, big, hidden}:
        check(rows[small]["launches"] == 40 and rows[small]["total_ns"] == 80000 and
              rows[small]["min_ns"] == 2000 and rows[small]["max_ns"] == 2000, "small shape: exact counts", rows[small])
        check(rows[big]["launches"] == 40 and rows[big]["total_ns"] == 240000 and
              rows[big]["min_ns"] == 4000 and rows[big]["max_ns"] == 8000, "big shape: exact counts", rows[big])
        check(near(rows[big]["median_ns"], 6000, 0.34) and near(rows[big]["p95_ns"], 8000, 0.04),
              "big shape: median and p95 within a bucket", rows[big])
        check(gt["by_kernel"][0]["name"] == "empty" and tuple(gt["by_kernel"][0]["grid"]) == (4, 1, 1),
              "rows by time, most first", gt["by_kernel"][0])
    kern = {k["name"]: k for k in rep["kernels"]["list"]}
    check("empty" in kern and kern["empty"]["gpu_ns"] == 320000 and kern["empty"]["gpu_launches"] == 80
          and kern["empty"]["launches"] == 80, "the kernel's record carries its GPU time", kern.get("empty"))
    check("hidden" not in kern, "a kernel drk saw no launch of has times but no record", list(kern))

    rd = rep["rounds"]
    check(rd["closed"] == 5 and rd["kept"] == 5 and rd["marked"] == 4, f"four rounds marked by {by}, and the exit's", rd)
    lst = rd["list"]
    if len(lst) == 5:
        check([r["ended_by"] for r in lst] == [by] * 4 + ["exit"], "ended by", [r["ended_by"] for r in lst])
        check([r["index"] for r in lst] == [0, 1, 2, 3, 4], "indexes", [r["index"] for r in lst])
        check(lst[0]["wall_ns"] == 1001000 and all(r["wall_ns"] == 1000000 for r in lst[1:4]) and
              lst[4]["wall_ns"] == 5000, "wall time per round", [r["wall_ns"] for r in lst])
        check(all(r["kernels"] == 21 and r["copies"] == 2 for r in lst[:4]) and lst[4]["kernels"] == 0,
              "records per round", [(r["kernels"], r["copies"]) for r in lst])
        want = [70000, 70000, 110000, 110000]
        check([r["kernel_ns"] for r in lst[:4]] == want, "kernel time per round", [r["kernel_ns"] for r in lst])
        check([r["busy_ns"] for r in lst[:4]] == [w + 21000 for w in want], "busy time: the union of intervals",
              [r["busy_ns"] for r in lst])
        g = lst[1]["gaps"]
        # After the last `empty` (ends at +188000): `hidden` at +300000, the
        # copy at +400000, the set ends at +431000, the round at +1000000.
        check(len(g) == 4 and g[0] == {"ns": 569000, "after": "memset", "before": None, "drk_ns": 0} and
              g[1] == {"ns": 112000, "after": "empty", "before": "hidden", "drk_ns": 0} and
              g[2] == {"ns": 90000, "after": "hidden", "before": "memcpy", "drk_ns": 0},
              "largest idle gaps, largest first, and what bounds them", g)
        top = lst[2]["top"][0]
        check(top["name"] == "empty" and tuple(top["grid"]) == (4, 1, 1) and top["total_ns"] == 80000 and
              near(top["median_ns"], 8000, 0.04), "round 2's top kernel-shape: the slower one", top)
        check(all("reserved_bytes" in r["memory"] for r in lst), "memory figures per round", lst[0]["memory"])
    check("GPU times from" in p.stderr, "an info line says where the times come from", p.stderr)
    fs = {f["name"]: f for f in rep["findings"]}
    check(set(fs) == {"gpu_idle", "kernel_slower", "jit_compiles"},
          "findings: the GPU idles, a kernel got slower, the driver compiled PTX; nothing else", list(fs))
    if "jit_compiles" in fs:
        f = fs["jit_compiles"]
        check(f["first_round"] == 1 and f["rounds"] == 1 and f["reference"] == 1 and
              "had 1 kernels compiled from PTX" in f["evidence"] and "cuModuleLoadData" in f["evidence"],
              "jit_compiles: the PTX load, in its round", f)
    if "kernel_slower" in fs:
        f = fs["kernel_slower"]
        check(f["first_round"] == 2 and f["kernel"]["name"] == "empty" and f["kernel"]["grid"] == [4, 1, 1] and
              near(f["value"], 8000, 0.04) and near(f["reference"], 4000, 0.04),
              "kernel_slower: the slower shape, from the round it started", f)
    if "gpu_idle" in fs:
        f = fs["gpu_idle"]
        check(f["first_round"] == 0 and f["rounds"] == 4 and "largest gaps" in f["evidence"] and
              "after memset before (round end)" in f["evidence"], "gpu_idle: every marked round, with its gaps", f)
    check(p.stderr.count("finding ") == 3, "one info line a finding", p.stderr)


def case_failing(args):
    rep, p = run(args, "failing")
    gt = rep["gpu_time"]
    check(not gt["enabled"] and gt["off_reason"] and "CUPTI" in gt["off_reason"] or "unknown" in str(gt["off_reason"]),
          "a CUPTI that fails every call: no times, and why", gt)
    check(gt["kernels"] == 0 and rep["rounds"]["closed"] == 0, "nothing timed", (gt["kernels"], rep["rounds"]))
    check(rep["kernels"]["launches"] == 10, "launches still counted", rep["kernels"]["launches"])
    check("no GPU times" in p.stderr and p.stderr.count("no GPU times") == 1, "one info line", p.stderr)
    check("] warn:" not in p.stderr and "] error:" not in p.stderr, "no warning or error", p.stderr)


def case_aside(args, mode, how):
    rep, p = run(args, mode)
    gt = rep["gpu_time"]
    check(p.returncode == 0 and f"{mode}:" in p.stdout, f"{mode}: the program's own CUPTI client got its records and "
          "never a buffer of drk's", p.stdout + p.stderr)
    check(gt["enabled"] and gt["stopped"] and how in gt["stopped"], f"{mode}: drk's timing stepped aside, and says why",
          gt)
    check(gt["kernels"] == 21 and gt["copies"] == 2, f"{mode}: what ran before it stepped aside is timed",
          (gt["kernels"], gt["copies"]))
    rd = rep["rounds"]
    check(rd["closed"] == 1 and rd["list"][0]["ended_by"] == "cuProfilerStop" and rd["list"][0]["kernels"] == 21,
          f"{mode}: the round marked before is kept", rd)
    check(p.stderr.count("GPU times stop:") == 1, f"{mode}: one info line", p.stderr)


def case_counters(args):
    big, small = ("empty", (4, 1, 1), (64, 1, 1), 0), ("empty", (1, 1, 1), (32, 1, 1), 0)
    rep, p = run(args, "counters", {"DRK_PROFILE": "counters", "DRK_COUNTERS_BUDGET": "100%"})
    gt, ct = rep["gpu_time"], rep["gpu_time"]["counters"]
    check(ct["enabled"] and ct["off_reason"] is None, "counters: on", ct)
    check("counters: 2 windows 2 released" in p.stdout, "counters: two launches sampled, the profiler released after each (one a kernel-shape, each once in "
          "20 rounds)", p.stdout)
    check(ct["samples"] == 2 and ct["discarded"] == 0 and ct["passes"] == 6, "counters: two samples, 6 passes", ct)
    rows = {(r["name"], tuple(r["grid"]), tuple(r["block"]), r["shared_bytes"]): r for r in ct["by_kernel"]}
    check(set(rows) == {big, small}, "counters: both kernel-shapes", list(rows))
    if big in rows:
        b = rows[big]
        check(b["round"] == 0 and b["samples"] == 1, "counters: the hottest kernel-shape first, armed as round 0 "
              "closed", b)
        check(b["dram_pct"] == 42.5 and b["occupancy_pct"] == 61.25 and b["ld_sectors_per_request"] == 4 and
              b["st_sectors_per_request"] == 4, "counters: the values CUPTI evaluated", b)
    if small in rows:
        check(rows[small]["round"] == 1, "counters: the next kernel-shape as round 1 closed", rows[small])
    check(gt["excluded"] == 2 and gt["kernels"] == 118, "counters: the sampled launches are not timed", gt)
    timed = rows_by_shape(gt)
    check(timed.get(big, {}).get("launches") == 59, "counters: 59 of 60 launches of the sampled shape timed",
          timed.get(big))
    check(rep["kernels"]["launches"] == 120, "counters: every launch counted", rep["kernels"]["launches"])
    # Times only: the range profiler is never touched.
    rep1, p1 = run(args, "counters")
    c1 = rep1["gpu_time"]["counters"]
    check("counters: 0 windows" in p1.stdout and not c1["enabled"] and c1["samples"] == 0 and
          rep1["gpu_time"]["excluded"] == 0, "DRK_PROFILE=1: no range profiler", (p1.stdout, c1))
    # A profiler refused (as without the rights to counters): times go on.
    rep2, p2 = run(args, "counters", {"DRK_PROFILE": "counters", "FAKECUPTI_FAIL": "cuptiRangeProfilerEnable"})
    c2, g2 = rep2["gpu_time"]["counters"], rep2["gpu_time"]
    check(not c2["enabled"] and "cuptiRangeProfilerEnable failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" in
          str(c2["off_reason"]), "refused: counters off, and why", c2)
    check(g2["enabled"] and g2["kernels"] == 120 and g2["excluded"] == 0, "refused: every launch still timed", g2)
    check(p2.stderr.count("counters off:") == 1, "refused: one info line", p2.stderr)
    # Another launch in the window (two ranges): the sample is given up, never misattributed.
    rep3, p3 = run(args, "counters", {"DRK_PROFILE": "counters", "DRK_COUNTERS_BUDGET": "100%",
                                      "FAKECUPTI_RANGES": "2"})
    c3 = rep3["gpu_time"]["counters"]
    check(c3["enabled"] and c3["samples"] == 0 and c3["discarded"] >= 1 and c3["by_kernel"] == [] and
          f"counters: {c3['discarded']} windows" in p3.stdout, "two ranges in a window: given up", (c3, p3.stdout))
    # The budget spaces samples and banks none: after a 1.5 s start, a 300 ms
    # sample at 20% keeps the next 1.2 s free of samples, longer than the
    # rounds left (credit counted from the start would allow the second).
    rep4, p4 = run(args, "counters", {"DRK_PROFILE": "counters", "DRK_COUNTERS_BUDGET": "20%",
                                      "FAKECUPTI_STOP_MS": "300", "PROFILE_ROUTE_START_MS": "1500"})
    c4 = rep4["gpu_time"]["counters"]
    check(c4["enabled"] and c4["samples"] == 1 and c4["cost_ns"] >= 300e6 and near(c4["budget"], 0.2, 1e-9),
          "20% of 300 ms samples: one sample, its cost counted, no burst after a long start", c4)
    rep5, _ = run(args, "counters", {"DRK_PROFILE": "counters", "DRK_COUNTERS_BUDGET": "0%"})
    c5 = rep5["gpu_time"]["counters"]
    check(c5["enabled"] and c5["samples"] == 0 and rep5["gpu_time"]["excluded"] == 0, "a budget of 0%: no samples",
          c5)


def case_occupancy(args):
    rep, p = run(args, "occupancy")
    check(rep["rounds"]["closed"] == 9 and rep["rounds"]["marked"] == 8, "eight rounds marked, and the exit's",
          rep["rounds"])
    fs = rep["findings"]
    drops = {f["kernel"]["name"]: f for f in fs if f["name"] == "occupancy_drop"}
    check(set(drops) == {"gemm", "attn"}, "occupancy_drop: the reloaded kernel and the one with more shared "
          "memory, one entry each; not the steady one", [(f["name"], f["kernel"]) for f in fs])
    f = drops.get("gemm")
    if f:
        check(f["first_round"] == 5 and f["last_round"] == 7 and f["rounds"] == 3 and
              f["kernel"]["block"] == [256, 1, 1] and f["kernel"]["shared_bytes"] == 0 and
              near(f["value"], 0.25, 1e-6) and near(f["reference"], 1.0, 1e-6),
              "gemm: 25% from 100%, from the round its 128-register function ran in", f)
        check("round 5: gemm at block (256,1,1), dyn smem 0: theoretical occupancy 25% (16 of 64 warps an SM, "
              "limited by registers: 128 a thread), was 100% at block (256,1,1), dyn smem 0 in round 4 "
              "(32 registers a thread" in f["evidence"], "gemm: the evidence in words", f["evidence"])
    f = drops.get("attn")
    if f:
        check(f["first_round"] == 6 and f["rounds"] == 2 and f["kernel"]["shared_bytes"] == 40960 and
              near(f["value"], 0.625, 1e-6) and near(f["reference"], 1.0, 1e-6) and
              "theoretical occupancy 62.5% (40 of 64 warps an SM, limited by shared memory: 40960 bytes a block" in f["evidence"] and "in round 5" in f["evidence"],
              "attn: 62.5% at 40 KiB of dynamic shared memory, from round 6", f)
    check(not any(f["name"] == "kernel_slower" for f in fs), "no kernel got slower", [f["name"] for f in fs])
    rows = rows_by_shape(rep["gpu_time"])
    gemm = rows.get(("gemm", (64, 1, 1), (256, 1, 1), 0), {}).get("occupancy")
    check(gemm and near(gemm["theoretical"], 0.25, 1e-6) and gemm["limited_by"] == "registers" and
          gemm["registers"] == 128 and gemm["blocks_per_sm"] == 2 and gemm["max_warps_per_sm"] == 64,
          "by_kernel: gemm's latest occupancy", gemm)
    empty = rows.get(("empty", (4, 1, 1), (64, 1, 1), 0), {}).get("occupancy")
    check(empty and empty["theoretical"] == 1 and empty["limited_by"] == "none", "by_kernel: empty's", empty)
    brief = rows.get(("brief", (2, 1, 1), (128, 1, 1), 0), {}).get("occupancy")
    by_unload = re.search(r"occupancy: brief: (\d+) calculator calls by its unload", p.stdout)
    check(by_unload and int(by_unload.group(1)) >= 1 and brief and
          brief["theoretical"] == 1, "a kernel unloaded within a tick of its launch: worked out before the unload",
          (p.stdout, brief))
    check("occupancy:" not in p.stderr, "every occupancy worked out (no failure line)", p.stderr)
    check(p.stderr.count("finding occupancy_drop") == 2, "one info line each", p.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", required=True)
    ap.add_argument("--preload", required=True)
    ap.add_argument("--mode", required=True, choices=["rounds", "failing", "profiler", "lookup", "nvtx", "counters",
                                                      "occupancy"])
    args = ap.parse_args()
    {"rounds": case_rounds, "failing": case_failing, "nvtx": lambda a: case_rounds(a, "nvtx", "nvtx"),
     "profiler": lambda a: case_aside(a, "profiler", "cuptiActivityRegisterCallbacks"),
     "lookup": lambda a: case_aside(a, "lookup", "dlsym"), "counters": case_counters,
     "occupancy": case_occupancy}[args.mode](args)
    print(f"{'FAILED' if failures else 'passed'}: {failures} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
