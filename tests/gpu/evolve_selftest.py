#!/usr/bin/env python3
"""CPU-side test of evolve_check.py (CI has no GPU): the checks run against a
fabricated evolve_hazards, a Python script that prints what the real program
prints and, under "drk" (DRK_REPORT set), writes a report with an evolve
section. A good run must give only PASS lines and "ok"; each planted fault
(a checksum that differs, a module-global kernel served, the planted variant
not rejected, a wrong round) must give a FAIL line naming it.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

FAKE = r'''#!PYTHON
import json, os, sys
rounds = int(sys.argv[1])
fault = os.environ.get("FAKE_FAULT", "")
under = bool(os.environ.get("DRK_REPORT"))
plant = os.environ.get("DRK_EVOLVE_PLANT", "")
wrong = 1 if under and fault == "wrong" else 0
print(f"evolve_hazards: {rounds} rounds, {wrong} wrong")
sums = {"ev_inplace": 1, "ev_count": 2, "ev_half": 3, "ev_struct": 4, "ev_global": 5, "ev_table": 6, "ev_nbody": 7}
if under and fault == "checksum":
    sums["ev_struct"] = 99
for k, v in sums.items():
    print(f"checksum {k} 0x{v:016x}")
print("sum ev_fsum 123.5 (not comparable: its order of additions differs run to run)")
fast = under
print("ev_nbody ms a launch by round: " + " ".join("0.6500" if r < 3 or not fast else "0.3200" for r in range(rounds)))
if not under:
    sys.exit(2 if wrong else 0)

def row(name, state, why, **kw):
    r = {"name": name, "grid": [1024, 1, 1], "block": [256, 1, 1], "shared_bytes": 0, "state": state, "why": why,
         "captures": 4, "rounds": 6, "tried": 12, "proven": 10, "rejected": 0, "trusted": 0, "serving": "default",
         "speedup": 1.0, "builds": 12, "build_ms": 40.0, "build_ms_max": 9.0, "trial_ns": 5000000,
         "snapshot_bytes": 1 << 24}
    r.update(kw)
    return r

rows = [row("ev_global", "refused", "uses module global `ev_counter`: `atom.global.add.u32 ...`", captures=0, tried=0),
        row("ev_table", "refused", "loads pointers from memory: `ld.global.u64 %rd8, [%rd7]`", captures=0, tried=0),
        row("ev_nbody", "settled", "settled after 12 rounds", trusted=1, serving="regs=56 cache=1", speedup=2.03),
        row("ev_fsum", "refused", "the original differs from itself: 4 bytes in allocation 0", captures=1, tried=0)]
rows += [row(n, "settled", "settled after 5 rounds") for n in ("ev_inplace", "ev_count", "ev_half_lo", "ev_half_hi",
                                                             "ev_struct")]
if fault == "global_served":
    rows[0] = row("ev_global", "settled", "settled after 3 rounds", trusted=1, serving="regs=40", speedup=1.1)
if plant:
    rows[2]["rejected"] = 1 if fault != "plant_kept" else 0
    if fault != "plant_kept":
        rows[2]["why"] = "regs=32 rejected: 1048576 bytes differ in allocation 0"
        print("drk[1] info: evolve: ev_nbody: regs=32 rejected: 1048576 bytes differ", file=sys.stderr)
    else:
        rows[2]["serving"] = "regs=32"
ev = {"enabled": True, "off_reason": None, "budget": 1.0, "rounds": rounds, "trial_ns": 90000000,
      "program_kernel_ns": 900000000, "trial_share": 0.1, "researched_share": 0.0, "kernels": len(rows),
      "evolved": 6, "refused": 3, "failed": 0,
      "captures": {"captured": 40, "snapped": 20, "moved": 0, "busy": 0, "mismatched": 0}, "by_kernel": rows}
gt = {"kernel_ns": 900000000, "by_kernel": [{"name": r["name"], "grid": r["grid"], "block": r["block"],
      "launches": 100, "total_ns": 100000000, "median_ns": 1000000} for r in rows]}
d = os.environ["DRK_REPORT"]
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "report-1.json"), "w") as f:
    json.dump({"schema": "drk-report", "evolve": ev, "gpu_time": gt}, f)
sys.exit(2 if wrong else 0)
'''


def run_check(fake, out, fault):
    env = dict(os.environ, FAKE_FAULT=fault)
    p = subprocess.run([sys.executable, os.path.join(HERE, "evolve_check.py"), "--shim", "", "--program", fake,
                        "--rounds", "8", "--ppo-steps", "0", "--out", out], env=env, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout.splitlines(), p.stderr


def main():
    tmp = tempfile.mkdtemp(prefix="drk-evolve-selftest.")
    fake = os.path.join(tmp, "evolve_hazards")
    with open(fake, "w") as f:
        f.write(FAKE.replace("PYTHON", sys.executable, 1))
    os.chmod(fake, 0o755)
    failures = []
    cases = {"": None, "checksum": "checksum equal to native", "global_served": "ev_global",
             "plant_kept": "plant:", "wrong": "0 wrong"}
    for fault, needle in cases.items():
        rc, lines, err = run_check(fake, os.path.join(tmp, fault or "good"), fault)
        fails = [ln for ln in lines if ln.startswith("FAIL")]
        bad = None
        if rc != 0:
            bad = f"evolve_check.py exit {rc}: {err[-400:]}"
        elif needle is None and (fails or not lines or lines[-1] != "ok"):
            bad = f"FAIL lines or no ok: {fails or lines[-3:]}"
        elif needle is not None and not any(needle in ln for ln in fails):
            bad = f"no FAIL line naming {needle!r}: {fails}"
        print(f"{'FAIL' if bad else 'ok  '} {fault or 'good run'}: {len(fails)} FAIL lines" +
              (f"\n  {bad}" if bad else ""))
        if bad:
            failures.append(fault)
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} evolve selftest failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
