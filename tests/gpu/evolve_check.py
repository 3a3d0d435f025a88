#!/usr/bin/env python3
"""Evolution on the real GPU (DRK_EVOLVE=1), held against what must happen:
never a wrong result, the hazards of research/evolve.md §6 handled, the kernels
drk cannot see refused, a real win served. Runs, each saved under --out:

  native    programs/evolve_hazards.cu without drk: its own checks, and the
            checksums every other run must equal;
  drk       under drk with DRK_EVOLVE=1, DRK_EVOLVE_BUDGET=100% (every round's
            kernel time may go to trials: fast convergence) and
            DRK_LOG_LEVEL=info;
  turns     the same with the n-body skipped (DRK_EVOLVE_SKIP): drk searches
            one kernel at a time, and the others get their turns sooner;
  plant     the same with DRK_EVOLVE_PLANT=regs=32 (every build of the variant
            "regs=32" has its PTX's float math rounding toward zero: wrong
            code, which the proof must reject before the program sees it;
            drk tries it first on every kernel);
  ppo       workloads/timed_ppo.py natively and under drk with DRK_EVOLVE=1
            (a round per step, cudaProfilerStop): losses bit for bit, and what
            drk made of PyTorch's kernels (mostly SASS without PTX).

Checks (one PASS/FAIL line each): the program exits 0 with 0 wrong rounds
(native, drk, plant); every deterministic kernel's checksum equal to native,
bit for bit; in the report's "evolve" section, ev_global (a module global)
and ev_table (a pointer table) refused saying so, ev_fsum (a float atomic
reduction) refused as differing from itself or never served, the n-body served
at more than 1.2x and the program's own n-body launches faster by the end,
each deterministic hazard kernel (in place, integer atomics, the two halves,
the struct) evolved in the drk or the turns run and refused or failed in
neither, no kernel failed; under the plant, a
rejection naming regs=32 and regs=32 never served for a kernel with float math;
PPO's final losses bit for bit, no kernel failed. Prints every evolve row, the
trial share, and PPO's refusal reasons with their share of its GPU time. Last
line "ok" when every check passed.

Usage: evolve_check.py --shim LIB --program PATH/evolve_hazards [--rounds R]
                       [--steps S] [--ppo-steps K] [--out DIR]

(--ppo-steps 0 leaves PPO out; evolve_selftest.py runs the checks so on a
fabricated program.)
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import evolve_share

here = os.path.dirname(os.path.abspath(__file__))
failures = 0

# The program's kernels: the deterministic ones, whose bytes a variant must keep.
HAZARDS = ["ev_inplace", "ev_count", "ev_half_lo", "ev_half_hi", "ev_struct"]
NO_FLOAT_MATH = {"ev_count"}  # a rounding plant changes nothing in it: regs=32 may be served there


def check(cond, what, detail=""):
    global failures
    print(("PASS " if cond else "FAIL ") + "evolve: " + what + ("" if cond else f" ({str(detail)[:600]})"),
          flush=True)
    failures += not cond


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k not in
           ("CUDA_INJECTION64_PATH", "PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_CUDA_ALLOC_CONF")}
    env.update(extra)
    return env


def drk_env(args, rep_dir, extra=None):
    e = {"LD_PRELOAD": args.shim, "DRK_EVOLVE": "1", "DRK_EVOLVE_BUDGET": "100%", "DRK_LOG_LEVEL": "info",
         "DRK_ROUND_SECONDS": "0", "DRK_REPORT": rep_dir + "/",
         # A cache of its own: an earlier run's winners would spare the plant its builds.
         "DRK_CACHE_DIR": os.path.join(rep_dir, "cache")}
    e.update(extra or {})
    return e


def run(cmd, env_extra, out, tag, timeout):
    try:
        p = subprocess.run(cmd, env=clean_env(env_extra), capture_output=True, text=True, timeout=timeout)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = "timeout", e.stdout or "", e.stderr or ""
        so = so.decode() if isinstance(so, bytes) else so
        se = se.decode() if isinstance(se, bytes) else se
    except OSError as e:
        rc, so, se = f"cannot run: {e}", "", ""
    for ext, text in (("stdout", so), ("stderr", se)):
        with open(os.path.join(out, f"{tag}.{ext}"), "w") as f:
            f.write(text)
    return rc, so, se


def report_of(d):
    files = glob.glob(os.path.join(d, "*.json"))
    return json.load(open(files[0])) if len(files) == 1 else None


def checksums(stdout):
    return dict(re.findall(r"^checksum (\S+) (0x[0-9a-f]+)$", stdout, re.M))


def wrong_line(stdout):
    m = re.search(r"^evolve_hazards: (\d+) rounds, (\d+) wrong$", stdout, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else None


def row_text(r):
    return (f"{r['name'][:40]} grid {r['grid']} block {r['block']}: {r['state']}, captures {r['captures']}, "
            f"rounds {r['rounds']}, tried {r['tried']}, proven {r['proven']}, rejected {r['rejected']}, "
            f"trusted {r['trusted']}, serving {r['serving']} ({r['speedup']:.3f}x), builds {r['builds']} "
            f"({r['build_ms']:.1f} ms, max {r['build_ms_max']:.1f}), trial {r['trial_ns'] / 1e6:.1f} ms; "
            f"why: {r['why'][:120]}")


def print_evolve(tag, ev):
    print(f"  {tag}: {ev['kernels']} kernel-shapes targeted, {ev['evolved']} evolved, {ev['refused']} refused, "
          f"{ev['failed']} failed over {ev['rounds']} rounds; trials {ev['trial_ns'] / 1e6:.1f} ms = "
          f"{100 * ev['trial_share']:.1f}% of the program's kernel time; captures {ev['captures']}")
    for r in ev["by_kernel"]:
        print(f"  {tag}: {row_text(r)}")


def hazard_run(args, out, tag, extra, native_sums):
    """One run of evolve_hazards under drk; its own and its checksums' checks. The report, stdout, stderr."""
    rep_dir = os.path.join(out, tag)
    rc, so, se = run(hazard_cmd(args), drk_env(args, rep_dir, extra), out, tag, 300)
    got = wrong_line(so)
    check(rc == 0 and got == (args.rounds, 0), f"{tag}: runs, {args.rounds} rounds, 0 wrong (exit {rc})",
          (got, se[-400:]))
    sums = checksums(so)
    diff = {k: (native_sums.get(k), v) for k, v in sums.items() if native_sums.get(k) != v}
    check(sums and not diff and set(sums) == set(native_sums),
          f"{tag}: every deterministic kernel's checksum equal to native, bit for bit ({len(sums)} kernels)",
          diff or (sorted(sums), sorted(native_sums)))
    rep = report_of(rep_dir)
    check(rep is not None and "evolve" in rep, f"{tag}: one report with an evolve section")
    if rep is None or "evolve" not in rep:
        return None, so, se
    ev = rep["evolve"]
    check(ev["enabled"], f"{tag}: evolution on", ev.get("off_reason"))
    failed = [r for r in ev["by_kernel"] if r["state"] == "failed"]
    check(not failed, f"{tag}: no kernel failed", [row_text(r) for r in failed])
    print_evolve(tag, ev)
    # Each kernel's share of the GPU time: a kernel-shape under 1% of a round is never a target.
    gt = rep.get("gpu_time", {})
    total = gt.get("kernel_ns") or 1
    for r in gt.get("by_kernel", []):
        print(f"  {tag}: {100 * r['total_ns'] / total:5.1f}% of kernel time: {str(r['name'])[:24]:24} "
              f"{r['launches']:6d} launches, median {r['median_ns'] / 1e3:8.1f} us")
    return ev, so, se


def rows_named(ev, name):
    return [r for r in ev["by_kernel"] if r["name"] == name]


def hazard_cmd(args):
    return [args.program, str(args.rounds), str(args.steps)]


def case_hazards(args, out):
    rc, so, se = run(hazard_cmd(args), {}, out, "native", 300)
    got = wrong_line(so)
    check(rc == 0 and got == (args.rounds, 0), f"native: runs, {args.rounds} rounds, 0 wrong (exit {rc})",
          (got, se[-400:]))
    native_sums = checksums(so)
    check(len(native_sums) >= 7, f"native: a checksum a kernel ({len(native_sums)})", so[-400:])

    ev, so, se = hazard_run(args, out, "drk", {}, native_sums)
    if ev is not None:
        g = rows_named(ev, "ev_global")
        check(len(g) == 1 and g[0]["state"] == "refused" and "module global" in g[0]["why"] and
              g[0]["trusted"] == 0, "ev_global (a module-scope __device__ counter) refused: " +
              (g[0]["why"][:100] if g else "no row"), g)
        t = rows_named(ev, "ev_table")
        check(len(t) == 1 and t[0]["state"] == "refused" and "loads pointers" in t[0]["why"] and
              t[0]["trusted"] == 0, "ev_table (a pointer table) refused: " + (t[0]["why"][:100] if t else "no row"),
              t)
        f = rows_named(ev, "ev_fsum")
        nondet = [r for r in f if r["state"] == "refused" and "differs from itself" in r["why"]]
        never = all(r["serving"] == "default" and r["trusted"] == 0 for r in f)
        check(never, "ev_fsum (float atomics into one cell: order-dependent) " +
              ("refused as nondeterministic: " + nondet[0]["why"][:80] if nondet else
               "never served" + ("" if f else " (never a target)")), f)
        h = rows_named(ev, "ev_nbody")
        served = [r for r in h if r["serving"] != "default" and r["speedup"] > 1.2 and r["trusted"] >= 1]
        check(served, "ev_nbody served faster than 1.2x: " + (row_text(served[0]) if served else
                                                              "; ".join(row_text(r) for r in h) or "no row"), h)
        m = re.search(r"^ev_nbody ms a launch by round:(.*)$", so, re.M)
        ms = [float(x) for x in m.group(1).split()] if m else []
        # The best of the last 3 rounds: trials of other kernels share the GPU meanwhile.
        late = min(ms[-3:]) if len(ms) >= 4 else 0
        check(late > 0 and ms[0] / late > 1.2, "the program's own n-body launches got faster: " +
              (f"{ms[0]:.4f} ms a launch in round 0, {late:.4f} ms in the last rounds ({ms[0] / late:.2f}x)"
               if late > 0 else "no times"), ms)
    drk_ev = ev
    # drk searches one kernel at a time: without the n-body the others get
    # their turns sooner.
    turns_ev, _, _ = hazard_run(args, out, "turns", {"DRK_EVOLVE_SKIP": "*ev_nbody*"}, native_sums)
    both = [e for e in (drk_ev, turns_ev) if e is not None]
    if both:
        bad, seen = [], []
        for name in HAZARDS:
            rs = [r for e in both for r in rows_named(e, name)]
            if not any(r["captures"] >= 1 and r["tried"] >= 1 for r in rs):
                seen.append(f"{name}: no variant tried in either run")
            for r in rs:
                if r["state"] in ("refused", "failed"):
                    bad.append(f"{name}: {r['state']}: {r['why'][:80]}")
        check(not bad and not seen, "every deterministic hazard (in place, integer atomics, disjoint halves, pointers "
              f"in a struct) evolved: variants tried on captured launches in the drk or turns run, none refused or "
              f"failed ({', '.join(HAZARDS)})", bad + seen)
    ev, so, se = hazard_run(args, out, "plant", {"DRK_EVOLVE_PLANT": "regs=32"}, native_sums)
    if ev is not None:
        named = [r for r in ev["by_kernel"] if "regs=32" in r["why"] and "rejected" in r["why"]]
        logged = [ln for ln in se.splitlines() if "regs=32 rejected" in ln]
        rejected = sum(r["rejected"] for r in ev["by_kernel"])
        check(rejected >= 1 and (named or logged),
              f"plant: the planted regs=32 rejected ({rejected} rejections; " +
              (logged[0].strip()[:160] if logged else named[0]["why"][:160] if named else "none named") + ")",
              [row_text(r) for r in ev["by_kernel"]])
        served = [r for r in ev["by_kernel"] if r["serving"] == "regs=32" and r["name"] not in NO_FLOAT_MATH]
        check(not served, "plant: regs=32 never served for a kernel with float math", [row_text(r) for r in served])


def ppo_losses(stdout):
    return stdout.split("\n")[:2]


def case_ppo(args, out):
    cmd = [sys.executable, os.path.join(here, "workloads", "timed_ppo.py"), "--steps", str(args.ppo_steps)]
    rc, nso, se = run(cmd, {}, out, "ppo-native", 300)
    check(rc == 0, f"ppo native: runs (exit {rc})", se[-400:])
    rep_dir = os.path.join(out, "ppo-drk")
    # DRK_PROFILE=1: every round timed, for the shares below (evolution
    # alone starts no timing where no kernel could be evolved, PPO's case).
    rc, dso, se = run(cmd, drk_env(args, rep_dir, {"DRK_PROFILE": "1"}), out, "ppo-drk", 300)
    check(rc == 0, f"ppo under DRK_EVOLVE=1: runs (exit {rc})", se[-400:])
    check(ppo_losses(nso) == ppo_losses(dso) and ppo_losses(nso)[0].startswith("final"),
          "ppo: final losses bit for bit with native under DRK_EVOLVE=1", (ppo_losses(nso), ppo_losses(dso)))
    rep = report_of(rep_dir)
    check(rep is not None and "evolve" in rep, "ppo: one report with an evolve section")
    if rep is None or "evolve" not in rep:
        return
    ev = rep["evolve"]
    check(ev["enabled"], "ppo: evolution on", ev.get("off_reason"))
    failed = [r for r in ev["by_kernel"] if r["state"] == "failed"]
    check(not failed, "ppo: no kernel failed", [row_text(r) for r in failed])
    print_evolve("ppo", ev)
    # Where PPO's GPU time is, by what drk made of each kernel-shape.
    sh = evolve_share.shares(rep)
    for share, n, what in sh["rows"]:
        print(f"  ppo: {100 * share:5.1f}% of GPU time in {n:3d} kernel-shapes {what}")
    print(f"  ppo: {100 * sh['could']:.1f}% of GPU time in kernels drk evolved or is evolving; "
          f"{100 * sh['ptx']:.1f}% in kernels with PTX for the device")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--program", required=True, help="build/tests/gpu/evolve_hazards")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--ppo-steps", type=int, default=30, help="0: no PPO run")
    ap.add_argument("--out")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="drk-evolve-")
    os.makedirs(out, exist_ok=True)
    if not os.access(args.program, os.X_OK):
        check(False, "evolve_hazards built", args.program)
    else:
        case_hazards(args, out)
    if args.ppo_steps > 0:
        case_ppo(args, out)
    print("ok" if failures == 0 else f"{failures} evolve checks failed")


if __name__ == "__main__":
    main()
