#!/usr/bin/env python3
"""tests/bench/alloc.sh end to end on the stand-in driver (no GPU): its C
cases natively (alloc_bench against the stand-in's libcuda) and under drk,
few and small, then the summary. PyTorch is not needed: its cases are
skipped with a warning (alloc.sh then exits 1, which is not checked here).

Checked: every C case measured a native/drk pair; the threads cases were
timed twice (threads-steady/..., the same runs after more pairs) and both
give 8-thread scaling; drk's runs wrote reports whose pool counts the
summary shows, and alloc_bench.json keeps them per run.

Usage: check_alloc_sh.py ALLOC_SH BUILD_DIR FAKECUDA_DIR"""
import json
import os
import re
import subprocess
import sys
import tempfile

failures = 0


def check(cond, what, detail=""):
    global failures
    print(("PASS " if cond else "FAIL ") + what + ("" if cond else "\n  " + str(detail)[-3000:]))
    failures += not cond


def main():
    alloc_sh, build, fakecuda = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="drk-alloc-sh-") as out:
        env = dict(os.environ, OUT=out, LD_LIBRARY_PATH=fakecuda, BENCH_ALLOC_ROUNDS="2",
                   BENCH_ALLOC_PAIRS="2000", BENCH_ALLOC_MAX="4000000", BENCH_ALLOC_THREAD_MAX="1000000",
                   BENCH_ALLOC_THREAD_PAIRS="2000", BENCH_ALLOC_THREAD_PAIRS_SYNC="1000",
                   BENCH_ALLOC_THREAD_STEADY="3000", BENCH_ALLOC_BUDGET_S="60")
        p = subprocess.run(["bash", alloc_sh, build], env=env, capture_output=True, text=True, timeout=600)
        o = p.stdout
        summary = o[o.find("\nsummary"):]
        cases = ["anchor/alloc", "anchor/async", "host/4K", "host/1M", "host/64M", "host/4K-1M"] + [
            f"{k}/{api}/{t}" for k in ("threads", "threads-steady") for api in ("async", "alloc") for t in (1, 8)]
        for c in cases:
            m = re.search(r"^" + re.escape(c) + r"\s+\S.*?\s([\d.]+)x\s", summary, re.M)
            check(m is not None and float(m.group(1)) > 0, f"{c}: a native/drk pair measured, a speedup given",
                  summary or o + p.stderr)
        for k in ("threads", "threads-steady"):
            for api in ("async", "alloc"):
                check(re.search(rf"^  {k}/{api} drk 8-thread scaling\s+[\d.]+ \([\d.]+x of 8\)", summary, re.M)
                      is not None, f"{k}/{api}: drk's 8-thread scaling among the targets", summary)
        m = re.search(r"^  threads/alloc/8\s+drk's pool: ([\d.]+) events per 100 allocations, (\d+) pages made",
                      summary, re.M)
        check(m is not None and int(m.group(2)) > 0, "threads/alloc/8: drk's pool counts from its reports", summary)
        check("threads-steady/alloc/8 " not in summary.split("drk's device pool")[-1].split("targets")[0],
              "the steady cases' runs are the threads cases': their pool counts shown once", summary)
        with open(os.path.join(out, "alloc_bench.json")) as f:
            doc = json.load(f)
        runs = [r for r in doc["runs"] if r["case"] == "threads-steady/alloc/8" and r["mode"] == "drk" and r["ok"]]
        check(runs and all(r["drk_pool"]["allocs"] > 0 and r["value"] == r["result"]["steady_pairs_per_s_aggregate"]
                           for r in runs),
              "alloc_bench.json: the steady case's drk runs, each with its number and its pool's counts", runs[:1])
        check(all("_runs" not in c for c in doc["cases"]), "alloc_bench.json: no run listed twice", "")
        check(doc["meta"].get("thread_steady") == "3000", "alloc_bench.json: the steady pairs in its settings",
              doc["meta"])
    print("all checks passed" if not failures else f"{failures} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
