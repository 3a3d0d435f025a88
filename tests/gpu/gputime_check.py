#!/usr/bin/env python3
"""GPU times on the real GPU (DRK_PROFILE=1), held against an independent
measurement: PyTorch's own profiler (Kineto, CUPTI underneath) in a run of its
own. The PPO trainer (workloads/timed_ppo.py) runs three times:

  native    no drk, under torch.profiler: per-kernel counts and device times;
  drk       under drk with DRK_PROFILE=1, no other profiler: drk's report;
  together  under drk with DRK_PROFILE=1 *and* torch.profiler: the profiler
            must still get every kernel event (drk steps aside), and the
            losses stay bit for bit.

Checks (one PASS/FAIL line each), per kernel named by both (names demangled
with c++filt, as PyTorch shows them): launches equal to the profiler's (drk's
times start when its CUPTI does, a few milliseconds after drk starts: kernels
before that are allowed to be missing, at most 2% of any kernel's launches);
total time within 15% of the profiler's for every kernel of at least 1% of the
GPU time, and all kernels together within 10% (two runs of the same work on
one GPU: clocks and caches differ from run to run by a few percent; both
measurements are CUPTI's concurrent-kernel records). Rounds: one per step,
ended by cudaProfilerStop. Prints GPU busy over the steps and the largest
idle gaps. Last line "ok" when every check passed.

Usage: gputime_check.py --shim LIB [--steps K] [--out DIR]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
failures = 0


def check(cond, what, detail=""):
    global failures
    print(("PASS " if cond else "FAIL ") + "gputime: " + what + ("" if cond else f" ({detail})"), flush=True)
    failures += not cond


def run(env_extra, args, out, tag, profile, nvtx=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k not in
           ("CUDA_INJECTION64_PATH", "PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_CUDA_ALLOC_CONF")}
    env.update(env_extra)
    cmd = [sys.executable, os.path.join(here, "workloads", "timed_ppo.py"), "--steps", str(args.steps)]
    if profile:
        cmd += ["--profile", os.path.join(out, tag + ".profile.json")]
    if nvtx:
        cmd += ["--nvtx"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    with open(os.path.join(out, tag + ".stderr"), "w") as f:
        f.write(p.stderr)
    check(p.returncode == 0, f"{tag}: runs (exit {p.returncode})", p.stderr[-400:])
    return p


def demangle(names):
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        return {n: n for n in names}
    p = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True)
    out = p.stdout.split("\n")
    return {n: (out[i] if i < len(out) else n) for i, n in enumerate(names)}


def report_of(d):
    files = glob.glob(os.path.join(d, "*.json"))
    return json.load(open(files[0])) if len(files) == 1 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="drk-gputime-")
    os.makedirs(out, exist_ok=True)

    native = run({}, args, out, "native", True)
    rep_dir = os.path.join(out, "drk")
    drk = run({"LD_PRELOAD": args.shim, "DRK_PROFILE": "1", "DRK_REPORT": rep_dir + "/", "DRK_LOG_LEVEL": "info",
               "NVTX_INJECTION64_PATH": args.shim}, args, out, "drk", False, nvtx=True)
    both_dir = os.path.join(out, "together")
    both = run({"LD_PRELOAD": args.shim, "DRK_PROFILE": "1", "DRK_REPORT": both_dir + "/", "DRK_LOG_LEVEL": "info"},
               args, out, "together", True)

    losses = [p.stdout.split("\n")[:2] for p in (native, drk, both)]
    check(losses[0] == losses[1] == losses[2] and losses[0][0].startswith("final"),
          "final losses bit for bit: native, drk, drk with torch.profiler", losses)

    ref = json.load(open(os.path.join(out, "native.profile.json")))["kernels"]
    rep = report_of(rep_dir)
    check(rep is not None, "drk: one report")
    if rep is None:
        return
    gt = rep["gpu_time"]
    check(gt["enabled"] and gt["stopped"] is None, "drk: GPU times taken, to the end",
          (gt["off_reason"], gt["stopped"]))
    check(gt["dropped"] == 0, "drk: no record dropped", gt["dropped"])
    by_name = {}
    for r in gt["by_kernel"]:
        k = by_name.setdefault(r["name"], {"count": 0, "total_ns": 0})
        k["count"] += r["launches"]
        k["total_ns"] += r["total_ns"]
    names = demangle(list(by_name))
    mine = {}
    for raw, k in by_name.items():
        m = mine.setdefault(names[raw], {"count": 0, "total_ns": 0})
        m["count"] += k["count"]
        m["total_ns"] += k["total_ns"]
    common = set(mine) & set(ref)
    only_ref = {n: ref[n]["count"] for n in set(ref) - set(mine)}
    only_mine = {n: mine[n]["count"] for n in set(mine) - set(ref)}
    check(len(common) >= 10 and not only_ref and not only_mine,
          f"the same kernels: {len(common)} named by both", f"profiler only {only_ref}; drk only {only_mine}")
    bad_counts = {n: (mine[n]["count"], ref[n]["count"]) for n in common
                  if not (ref[n]["count"] * 0.98 <= mine[n]["count"] <= ref[n]["count"])}
    check(not bad_counts, "launches per kernel == the profiler's (up to 2% missing before drk's CUPTI started)",
          bad_counts)
    total_ref = sum(ref[n]["total_ns"] for n in common)
    total_mine = sum(mine[n]["total_ns"] for n in common)
    ratio = total_mine / total_ref if total_ref else 0
    check(0.9 <= ratio <= 1.1, f"all kernels' GPU time: drk {total_mine / 1e6:.2f} ms, profiler "
          f"{total_ref / 1e6:.2f} ms (ratio {ratio:.3f}, within 10%)", ratio)
    worst = []
    for n in sorted(common, key=lambda n: -ref[n]["total_ns"]):
        if ref[n]["total_ns"] < 0.01 * total_ref:
            continue
        r = mine[n]["total_ns"] / ref[n]["total_ns"]
        worst.append((abs(r - 1), r, n))
    worst.sort(reverse=True)
    check(worst and worst[0][0] <= 0.15, f"each kernel of >= 1% of GPU time within 15% ({len(worst)} kernels; "
          f"worst ratio {worst[0][1]:.3f} for {worst[0][2][:60]})" if worst else "no kernel of >= 1%",
          worst[:3])
    for d, r, n in worst[:5]:
        print(f"  {r:.3f}  {mine[n]['total_ns'] / 1e3:10.1f} us drk  {ref[n]['total_ns'] / 1e3:10.1f} us profiler  {n[:90]}")

    rd = rep["rounds"]
    steps = [r for r in rd["list"] if r["ended_by"] == "nvtx"]
    check(rd["marked"] == args.steps and len(steps) == args.steps,
          f"a round per step, from torch.cuda.nvtx ranges: {rd['marked']} marked, {len(steps)} kept",
          (rd["closed"], rd["kept"], [r["ended_by"] for r in rd["list"]]))
    wall = sum(r["wall_ns"] for r in steps[1:])
    busy = sum(r["busy_ns"] for r in steps[1:])
    check(wall > 0 and 0 < busy < wall, f"GPU busy over steps 2..{args.steps}: {100 * busy / max(wall, 1):.1f}% "
          f"({busy / 1e6:.1f} of {wall / 1e6:.1f} ms)", (busy, wall))
    if steps:
        g = steps[-1]["gaps"][:3]
        print("  last step's largest idle gaps: " +
              "; ".join(f"{x['ns'] / 1e3:.0f} us after {str(x['after'])[:40]} before {str(x['before'])[:40]}" for x in g))

    fs = {f["name"]: f for f in rep["findings"]}
    idle = fs.get("gpu_idle")
    check(idle is not None and "largest gaps" in idle["evidence"] and idle["rounds"] >= args.steps - 2,
          "the GPU-busy finding fires on PPO and names its gaps", fs)
    for f in rep["findings"]:
        print(f"  finding {f['name']} (rounds {f['first_round']}-{f['last_round']}, {f['rounds']} of them): "
              f"{f['evidence'][:300]}")
    check(set(fs) <= {"gpu_idle"}, "no other finding on a steady trainer", list(fs))

    # The GPT trainer, rounds from torch.cuda.nvtx: its findings.
    gpt_dir = os.path.join(out, "gpt")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k != "CUDA_INJECTION64_PATH"}
    env.update(LD_PRELOAD=args.shim, DRK_PROFILE="1", DRK_REPORT=gpt_dir + "/", NVTX_INJECTION64_PATH=args.shim)
    p = subprocess.run([sys.executable, os.path.join(here, "workloads", "gpt_train.py"), "--steps", str(args.steps),
                        "--nvtx"], env=env, capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "gpt: runs under drk with DRK_PROFILE=1", p.stderr[-400:])
    grep = report_of(gpt_dir)
    grd = (grep or {}).get("rounds", {})
    check(grd.get("marked") == args.steps, f"gpt: a round per step from torch.cuda.nvtx: {grd.get('marked')} marked",
          grd.get("closed"))
    if grep:
        gsteps = [r for r in grd["list"] if r["ended_by"] == "nvtx"][1:]
        gw = sum(r["wall_ns"] for r in gsteps)
        gb = sum(r["busy_ns"] for r in gsteps)
        print(f"  gpt: GPU busy over steps 2..{args.steps}: {100 * gb / max(gw, 1):.1f}% ({gb / 1e6:.1f} of "
              f"{gw / 1e6:.1f} ms); kernel time {grep['gpu_time']['kernel_ns'] / 1e6:.1f} ms in "
              f"{grep['gpu_time']['kernels']} kernels")
        for f in grep["findings"]:
            print(f"  gpt finding {f['name']} (rounds {f['first_round']}-{f['last_round']}, {f['rounds']} of them): "
                  f"{f['evidence'][:300]}")

    # A planted degradation: drk_spin twice as slow from round 5 on.
    deg_dir = os.path.join(out, "degrade")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k != "CUDA_INJECTION64_PATH"}
    env.update(LD_PRELOAD=args.shim, DRK_PROFILE="1", DRK_REPORT=deg_dir + "/", DRK_ROUND_SECONDS="0")
    p = subprocess.run([sys.executable, os.path.join(here, "workloads", "degrade.py")], env=env,
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "degrade: runs", p.stderr[-400:])
    drep = report_of(deg_dir)
    slow = [f for f in (drep or {}).get("findings", []) if f["name"] == "kernel_slower"]
    check(len(slow) == 1 and slow[0]["first_round"] == 5 and slow[0]["kernel"]["name"] == "drk_spin" and
          slow[0]["value"] >= 1.5 * slow[0]["reference"],
          "the planted degradation is found in the round it starts (5): " +
          (slow[0]["evidence"][:200] if slow else "none"), drep and drep["findings"])

    # Counters: DRK_PROFILE=counters on PPO, a budget that lets every round
    # sample one kernel-shape: the losses stay bit for bit (the range
    # profiler replays each sampled launch, restoring its memory), and the
    # values are what the counters can be.
    cnt_dir = os.path.join(out, "counters")
    cnt = run({"LD_PRELOAD": args.shim, "DRK_PROFILE": "counters", "DRK_COUNTERS_BUDGET": "100%",
               "DRK_REPORT": cnt_dir + "/", "DRK_LOG_LEVEL": "debug", "NVTX_INJECTION64_PATH": args.shim},
              args, out, "counters", False, nvtx=True)
    check(cnt.stdout.split("\n")[:2] == losses[0], "counters: final losses bit for bit with native",
          (cnt.stdout.split("\n")[:2], losses[0]))
    crep = report_of(cnt_dir)
    ct = (crep or {}).get("gpu_time", {}).get("counters", {})
    rows = ct.get("by_kernel", [])
    cg = (crep or {}).get("gpu_time", {})
    check(cg.get("dropped") == 0 and cg.get("late") == 0 and
          cg.get("kernels", 0) + cg.get("excluded", 0) == sum(k["count"] for k in ref.values()),
          "counters: every kernel record still comes, in its round (none late, none dropped)",
          {k: cg.get(k) for k in ("kernels", "excluded", "late", "dropped")})
    check(ct.get("enabled") and ct.get("samples", 0) >= 5 and len(rows) >= 5,
          f"counters: {ct.get('samples')} samples of {len(rows)} kernel-shapes, {ct.get('passes')} passes each, "
          f"{ct.get('cost_ns', 0) / 1e6:.1f} ms in sampled launches", ct.get("off_reason"))
    sane = all(0 <= r["dram_pct"] <= 100.5 and 0 < r["occupancy_pct"] <= 100.5 and
               (r["ld_sectors_per_request"] == -1 or 1 <= r["ld_sectors_per_request"] <= 32.5) for r in rows)
    check(rows and sane, "counters: DRAM % and occupancy % within 0..100, sectors per request within 1..32",
          rows[:3])
    check(crep and crep["gpu_time"]["excluded"] == ct.get("samples", -1) + ct.get("discarded", 0),
          "counters: each sampled launch's record left out of the times",
          crep and (crep["gpu_time"]["excluded"], ct.get("samples"), ct.get("discarded")))
    for r in rows[:8]:
        print(f"  counters {r['name'][:60]} grid {r['grid']} block {r['block']}: DRAM {r['dram_pct']:.1f}%, "
              f"occupancy {r['occupancy_pct']:.1f}%, sectors/request ld {r['ld_sectors_per_request']:.2f} "
              f"st {r['st_sectors_per_request']:.2f} (round {r['round']})")

    # A planted occupancy drop: the same kernel with 40 KiB of dynamic shared
    # memory from round 5 (theoretical occupancy 100% -> 62.5% on an H200).
    occ_dir = os.path.join(out, "occupancy")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k != "CUDA_INJECTION64_PATH"}
    env.update(LD_PRELOAD=args.shim, DRK_PROFILE="1", DRK_REPORT=occ_dir + "/", DRK_ROUND_SECONDS="0",
               DRK_LOG_LEVEL="info")
    p = subprocess.run([sys.executable, os.path.join(here, "workloads", "degrade.py"), "--occupancy"], env=env,
                       capture_output=True, text=True, timeout=300)
    with open(os.path.join(out, "occupancy.stderr"), "w") as f:
        f.write(p.stderr)
    check(p.returncode == 0, "occupancy: runs", p.stderr[-400:])
    orep = report_of(occ_dir)
    drops = [f for f in (orep or {}).get("findings", []) if f["name"] == "occupancy_drop"]
    check(len(drops) == 1 and drops[0]["first_round"] == 5 and drops[0]["kernel"]["name"] == "drk_spin" and
          abs(drops[0]["value"] - 0.625) < 1e-6 and abs(drops[0]["reference"] - 1.0) < 1e-6,
          "the planted occupancy drop is found in the round it starts (5): " +
          (drops[0]["evidence"][:220] if drops else "none"), orep and orep["findings"])
    # PPO's kernels (cudart's CUkernels, cuBLAS's functions): theoretical occupancy known for each.
    rows = rep["gpu_time"]["by_kernel"]
    known = [r for r in rows if r.get("occupancy")]
    check(len(known) >= 0.9 * len(rows), f"PPO: theoretical occupancy of {len(known)} of {len(rows)} kernel-shapes "
          "from the driver's calculator", [r["name"][:40] for r in rows if not r.get("occupancy")][:5])
    for r in sorted(known, key=lambda r: -r["total_ns"])[:3]:
        o = r["occupancy"]
        print(f"  occupancy {r['name'][:50]} block {r['block']}: {100 * o['theoretical']:.1f}% "
              f"(limited by {o['limited_by']}, {o.get('registers')} registers)")

    both_ref = os.path.join(out, "together.profile.json")
    got = json.load(open(both_ref))["kernels"] if os.path.exists(both_ref) else {}
    cnt_ref = sum(k["count"] for k in ref.values())
    cnt_got = sum(k["count"] for k in got.values())
    check(cnt_got == cnt_ref and set(got) == set(ref),
          f"torch.profiler under drk still gets every kernel event: {cnt_got} of {cnt_ref}", (cnt_got, cnt_ref))
    rep2 = report_of(both_dir)
    stopped = rep2 and rep2["gpu_time"]["stopped"]
    check(bool(stopped), f"drk's timing stepped aside for the profiler: {stopped}", rep2 and rep2["gpu_time"])
    print("ok" if failures == 0 else f"{failures} gputime checks failed")


if __name__ == "__main__":
    main()
