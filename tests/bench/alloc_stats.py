#!/usr/bin/env python3
"""Bookkeeping for tests/bench/alloc.sh: turns each run's output into a JSON
record, and records into per-case lines, the targets and alloc_bench.json.

  alloc_stats.py record RAW --case C --mode native|drk|drk_grow|drk_noalloc --round R
                 --metric KEY --better higher|lower --unit U --stdout F --stderr F
                 --rc RC --t0 START --t1 END [--report DRK_REPORT_JSON]
  alloc_stats.py case RAW CASE          one line for CASE
  alloc_stats.py summary RAW OUT_JSON|- [--warnings FILE] [KEY=VALUE ...]
  alloc_stats.py check-pool DIR device|host EXPECTED
                                        did drk's pool serve the run's allocations?

RAW is a JSON-lines file, one record per run, appended as the runs finish so
that a run cut short still leaves what it measured. A case's ratio is a
speedup: native time / drk time (>= 1: drk faster).
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_stats import last_json, load, tail  # noqa: E402

# Targets from the pool's design (see tests/bench/README.md, "Allocation").
ANCHOR_US_MAX = 0.5       # drk's mean alloc/free pair, one thread (issue: growth off the path)
ANCHOR_MEDIAN_US_MAX = 0.25  # drk's median pair
DRIVER_POOL_X = 16.0      # drk vs native cuMemAllocAsync on the anchor
HOST_US_MAX = 1.0         # drk per pinned host pair
SCALING_MIN = 0.8         # our reading of "near-linear" 8-thread scaling


def cmd_record(argv):
    import argparse

    p = argparse.ArgumentParser(prog="alloc_stats.py record")
    p.add_argument("raw")
    for k in ("case", "mode", "metric", "better", "unit", "stdout", "stderr"):
        p.add_argument("--" + k, required=True)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--rc", type=int, required=True)
    p.add_argument("--t0", type=float, required=True)
    p.add_argument("--t1", type=float, required=True)
    p.add_argument("--report", default=None)
    a = p.parse_args(argv)
    result = last_json(a.stdout)
    value = result.get(a.metric) if result else None
    check = result.get("check") if result else None
    ok = a.rc == 0 and isinstance(value, (int, float)) and value > 0 and check != "bad"
    rec = {
        "case": a.case, "mode": a.mode, "round": a.round, "metric": a.metric, "better": a.better,
        "unit": a.unit, "ok": ok, "value": value if ok else None, "rc": a.rc,
        "seconds": round(a.t1 - a.t0, 3), "result": result,
    }
    pool = pool_counts(a.report)
    if pool:
        rec["drk_pool"] = pool
    if not ok:
        if a.rc in (124, 137):
            why = "timed out"
        elif check == "bad":
            why = "check bad: an allocation read back wrong"
        elif result and result.get("failures"):
            why = f"{result['failures']} allocation(s) failed (first: {result.get('first_error')})"
        elif a.rc:
            why = f"exit status {a.rc}"
        else:
            why = f"no '{a.metric}' in its last JSON line"
        rec["error"] = why
        rec["stderr_tail"] = tail(a.stderr)
        sys.stderr.write(f"  !! {a.case} {a.mode} round {a.round + 1}: {why}\n")
        for line in tail(a.stdout, 3) + tail(a.stderr, 8):
            sys.stderr.write(f"  !!   {line}\n")
    with open(a.raw, "a") as f:
        f.write(json.dumps(rec) + "\n")
    if ok:
        extra = ""
        if result.get("bound_to") and a.mode != "native" and result["bound_to"] != "libdrk_shim.so":
            extra = f"  (bound to {result['bound_to']}, not drk!)"
        print(f"  round {a.round + 1} {a.mode:<11} {fmt(value, a.unit)}{extra}", flush=True)
    return 0 if ok else 1


# What drk's device pool did in a run (its report): the counts that say where
# threads' time may go (events its frees' seals recorded, pages made, shards).
POOL_COUNTS = ("allocs", "events_recorded", "pages_created", "pages_created_in_calls", "handles_created",
               "pages_moved", "thread_shards", "peak_live_bytes", "peak_reserved_bytes")


def pool_counts(path):
    if not path:
        return None
    try:
        with open(path) as f:
            pool = json.load(f).get("device_pool")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(pool, dict):
        return None
    return {k: pool[k] for k in POOL_COUNTS if isinstance(pool.get(k), (int, float))}


def pool_line(a):
    """drk's pool in a case's drk runs (the median over them), or None."""
    runs = [r["drk_pool"] for r in a.get("_runs", []) if r["mode"] == "drk" and r.get("drk_pool", {}).get("allocs")]
    if not runs:
        return None
    def m(k):
        return med([p[k] for p in runs if k in p])
    ev = med([p["events_recorded"] / p["allocs"] for p in runs if "events_recorded" in p])
    parts = [f"{ev * 100:.1f} events per 100 allocations" if ev is not None else None,
             f"{m('pages_created'):.0f} pages made ({m('pages_created_in_calls'):.0f} in allocation calls, "
             f"{m('handles_created'):.0f} handles)" if m("pages_created") is not None else None,
             f"{m('thread_shards'):.0f} thread shards" if m("thread_shards") is not None else None]
    return f"{a['case']:<20} drk's pool: " + ", ".join(p for p in parts if p) + f" (median of {len(runs)} runs)"


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "us":
        return f"{v / 1e3:.3f} ms/pair" if v >= 1e3 else f"{v:.4f} us/pair"
    if unit == "pairs/s":
        return f"{v:,.0f} pairs/s ({1e6 / v:.4f} us)"
    if unit == "ms":
        return f"{v:.3f} ms"
    return f"{v:g} {unit}"


def med(xs):
    return statistics.median(xs) if xs else None


def analyse(recs, case):
    rs = [r for r in recs if r["case"] == case]
    if not rs:
        return None
    first = rs[0]
    higher = first["better"] == "higher"
    by_round, modes = {}, []
    for r in rs:
        if r["mode"] not in modes:
            modes.append(r["mode"])
        if r["ok"]:
            by_round.setdefault(r["round"], {})[r["mode"]] = r["value"]
    values = {m: [v[m] for _, v in sorted(by_round.items()) if m in v] for m in modes}
    # Each round's runs ran back to back, so its ratio sees the least drift;
    # the case's ratio is the median over rounds. Speedup: >= 1, drk faster.
    def ratios(mode):
        return [(v[mode] / v["native"] if higher else v["native"] / v[mode])
                for _, v in sorted(by_round.items()) if "native" in v and mode in v]

    sp = ratios("drk")
    out = {
        "case": case, "metric": first["metric"], "unit": first["unit"], "better": first["better"],
        "runs": len(rs), "failed_runs": sum(1 for r in rs if not r["ok"]), "rounds": len(sp),
        "values": values, "medians": {m: med(values[m]) for m in modes},
        # The anchor's median pair within each run, the median over rounds.
        "pair_medians": {m: med([r["result"]["us_per_pair_median"] for r in rs if r["ok"] and r["mode"] == m
                                 and isinstance((r.get("result") or {}).get("us_per_pair_median"), (int, float))])
                         for m in modes},
        "speedups": sp, "speedup": med(sp),
        "speedup_min": min(sp) if sp else None, "speedup_max": max(sp) if sp else None,
    }
    if "drk_noalloc" in modes:
        # DRK_ALLOC=0: drk forwards to the driver; ~1.0 is the sanity line.
        na = ratios("drk_noalloc")
        out["noalloc_speedup"] = med(na)
        out["noalloc_speedups"] = na
    if "drk_grow" in modes:
        # DRK_ALLOC_GROW=1: the page grower on, against the same native runs.
        g = ratios("drk_grow")
        out["grow_speedup"] = med(g)
        out["grow_speedups"] = g
    out["_runs"] = rs
    errors = sorted({r.get("error", "") for r in rs if not r["ok"]})
    if errors:
        out["errors"] = errors
    # What the runs' own JSON said, from the first good drk run: a digest
    # that must match native's, and the warm-up split for the anchor.
    for mode in ("native", "drk", "drk_grow"):
        for r in rs:
            if r["ok"] and r["mode"] == mode:
                res = r["result"]
                for k in ("sequence", "first_us_per_pair", "rest_us_per_pair", "us_per_pair_median",
                          "us_per_pair_mean", "bound_to"):
                    if k in res:
                        out.setdefault("detail", {}).setdefault(mode, {})[k] = res[k]
                break
    return out


def case_line(a):
    if a["speedup"] is None:
        err = "; ".join(a.get("errors", [])) or "no runs"
        return (f"{a['case']:<16} no complete native/drk pair ({a['failed_runs']} of {a['runs']} runs failed: "
                f"{err})  ERROR")
    m = a["medians"]
    s = (f"{a['case']:<16} native {fmt(m.get('native'), a['unit'])}  drk {fmt(m.get('drk'), a['unit'])}  "
         f"speedup {a['speedup']:.2f}x [{a['speedup_min']:.2f}..{a['speedup_max']:.2f} over {a['rounds']} rounds]")
    if a.get("grow_speedup") is not None:
        s += f"  DRK_ALLOC_GROW=1 {fmt(m.get('drk_grow'), a['unit'])} ({a['grow_speedup']:.2f}x)"
    if a.get("noalloc_speedup") is not None:
        s += f"  DRK_ALLOC=0 {fmt(m.get('drk_noalloc'), a['unit'])} ({a['noalloc_speedup']:.3f}x native)"
    if a["failed_runs"]:
        s += f"  ({a['failed_runs']} failed runs)"
    return s


def cmd_case(argv):
    raw, case = argv
    a = analyse(load(raw), case)
    if a is None:
        print(f"{case:<16} no runs")
        return 1
    print(case_line(a), flush=True)
    return 0 if a["speedup"] is not None else 1


def targets(by):
    """The design's targets, from the cases' medians. Each: (name, value
    text, target text, verdict)."""
    out = []

    def m(case, mode, key="medians"):
        a = by.get(case)
        return a[key].get(mode) if a else None

    def verdict(ok):
        return "-" if ok is None else ("ok" if ok else "MISSED")

    na_async, na_alloc = m("anchor/async", "native"), m("anchor/alloc", "native")
    for api in ("alloc", "async"):
        d = m(f"anchor/{api}", "drk")
        if d is None:
            continue
        name = f"cuMem{'Alloc' if api == 'alloc' else 'AllocAsync'}"
        out.append((f"anchor drk mean pair ({name})", f"{d:.4f} us", f"<= {ANCHOR_US_MAX} us",
                    verdict(d <= ANCHOR_US_MAX)))
        dm = m(f"anchor/{api}", "drk", "pair_medians")
        if dm is not None:
            out.append((f"anchor drk median pair ({name})", f"{dm:.4f} us", f"<= {ANCHOR_MEDIAN_US_MAX} us",
                        verdict(dm <= ANCHOR_MEDIAN_US_MAX)))
        g = m(f"anchor/{api}", "drk_grow")
        if g is not None:
            out.append((f"anchor drk+grower mean pair ({api})", f"{g:.4f} us", f"<= {ANCHOR_US_MAX} us",
                        verdict(g <= ANCHOR_US_MAX)))
        if na_async:
            x = na_async / d
            out.append((f"anchor drk ({api}) vs native cuMemAllocAsync", f"{x:.1f}x ({na_async:.3f} us)",
                        f">= {DRIVER_POOL_X:g}x", verdict(x >= DRIVER_POOL_X)))
        if na_alloc:
            out.append((f"anchor drk ({api}) vs native cuMemAlloc", f"{na_alloc / d:.1f}x ({na_alloc:.3f} us)",
                        "(reference)", "-"))
    for kind in ("threads", "threads-steady"):
        for api in ("async", "alloc"):
            for mode in ("native", "drk", "drk_grow"):
                one, eight = m(f"{kind}/{api}/1", mode), m(f"{kind}/{api}/8", mode)
                if one and eight:
                    s = eight / one / 8
                    tgt = "(reference)" if mode == "native" else f">= {SCALING_MIN} (near-linear)"
                    out.append((f"{kind}/{api} {mode} 8-thread scaling", f"{s:.3f} ({eight / one:.2f}x of 8)",
                                tgt, "-" if mode == "native" else verdict(s >= SCALING_MIN)))
    for case in sorted(c for c in by if c.startswith("host/")):
        d = m(case, "drk")
        if d is not None:
            out.append((f"{case} drk per pair", fmt(d, "us"), f"<= {HOST_US_MAX} us", verdict(d <= HOST_US_MAX)))
    return out


def cmd_summary(argv):
    raw, out = argv[0], (argv[1] if argv[1] != "-" else None)
    rest, warnings = argv[2:], []
    if rest[:1] == ["--warnings"]:
        try:
            with open(rest[1]) as f:
                warnings = [line.rstrip("\n") for line in f if line.strip()]
        except OSError:
            pass
        rest = rest[2:]
    meta = dict(kv.split("=", 1) for kv in rest if "=" in kv)
    recs = load(raw)
    order = []
    for r in recs:
        if r["case"] not in order:
            order.append(r["case"])
    cases = [analyse(recs, c) for c in order]
    by = {a["case"]: a for a in cases}
    print()
    print("summary (speedup = native time / drk time, median over rounds; > 1: drk faster)")
    hdr = f"{'case':<16} {'native':>30} {'drk':>30} {'speedup':>8} {'range':>15}  DRK_ALLOC_GROW=1 / DRK_ALLOC=0"
    print(hdr)
    print("-" * len(hdr))
    bad = 0
    for a in cases:
        if a["speedup"] is None:
            bad += 1
            print(f"{a['case']:<16} {'-':>30} {'-':>30} {'-':>8} {'-':>15}  ERROR")
            continue
        md = a["medians"]
        rng = f"{a['speedup_min']:.2f}..{a['speedup_max']:.2f}"
        na = "" if a.get("grow_speedup") is None else f"grow {a['grow_speedup']:.2f}x  "
        na += "" if a.get("noalloc_speedup") is None else f"noalloc {a['noalloc_speedup']:.3f}x native"
        print(f"{a['case']:<16} {fmt(md.get('native'), a['unit']):>30} {fmt(md.get('drk'), a['unit']):>30} "
              f"{a['speedup']:>7.2f}x {rng:>15}  {na}")
    # threads-steady/... are the threads cases' runs again: one line for both;
    # the host cases' device allocations are their check's only.
    pools = [line for line in (pool_line(a) for a in cases if not a["case"].startswith(("threads-steady/", "host/")))
             if line]
    if pools:
        print()
        print("drk's device pool in the drk runs (from their reports)")
        for line in pools:
            print(f"  {line}")
    for a in cases:
        a.pop("_runs", None)
    tg = targets(by)
    if tg:
        print()
        print("targets")
        for name, val, tgt, v in tg:
            print(f"  {name:<48} {val:>22}  target {tgt:<22} {v}")
    for a in cases:
        d = a.get("detail", {})
        if "native" in d and "drk" in d and d["native"].get("sequence") != d["drk"].get("sequence"):
            w = f"{a['case']}: native and drk ran different sequences ({d['native'].get('sequence')} vs {d['drk'].get('sequence')})"
            warnings.append(w)
    if warnings:
        print()
        for w in warnings:
            print(f"WARNING: {w}")
    if out:
        doc = {"schema": "drk-alloc-bench", "version": 1, "meta": meta, "cases": cases,
               "targets": [dict(zip(("name", "value", "target", "verdict"), t)) for t in tg],
               "warnings": warnings, "runs": recs}
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, out)
        print(f"raw results: {out}")
    return 1 if bad else 0


def cmd_check_pool(argv):
    """Exit 0 when the drk report(s) in DIR show the pool's allocs > 0."""
    d, kind, expected = argv[0], argv[1], int(argv[2])
    key = f"{kind}_pool"
    try:
        files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".json"))
    except OSError:
        files = []
    if not files:
        print(f"no drk report in {d}")
        return 1
    allocs = frees = 0
    found = False
    for path in files:
        try:
            with open(path) as f:
                rep = json.load(f)
        except (OSError, ValueError) as e:
            print(f"unreadable drk report {path}: {e}")
            return 1
        pool = rep.get(key) if isinstance(rep, dict) else None
        if isinstance(pool, dict) and isinstance(pool.get("allocs"), int):
            found = True
            allocs += pool["allocs"]
            frees += pool["frees"] if isinstance(pool.get("frees"), int) else 0
    if not found:
        print(f"the drk report has no '{key}' section with 'allocs': the {kind} pool did not run")
        return 1
    made = f" (the program made {expected})" if expected > 0 else ""
    print(f"drk's {kind} pool served {allocs} allocations and {frees} frees{made}")
    return 0 if allocs > 0 else 1


def main():
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    cmd, argv = sys.argv[1], sys.argv[2:]
    fn = {"record": cmd_record, "case": cmd_case, "summary": cmd_summary,
          "check-pool": cmd_check_pool}.get(cmd)
    if not fn:
        sys.stderr.write(__doc__)
        return 2
    return fn(argv)


if __name__ == "__main__":
    sys.exit(main())
