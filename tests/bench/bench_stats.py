#!/usr/bin/env python3
"""Bookkeeping for tests/bench/run.sh: turns each run's output into a JSON
record, and records into per-case lines, a summary table and bench.json.

  bench_stats.py record RAW --case C --mode native|drk --round R --metric KEY
                 --better higher|lower --target T --unit U --stdout F --stderr F
                 --rc RC --t0 START --t1 END
  bench_stats.py case RAW CASE          one line for CASE
  bench_stats.py summary RAW OUT_JSON|- [KEY=VALUE ...]
  bench_stats.py check-report DIR N     a drk report in DIR counts N launches?

RAW is a JSON-lines file, one record per run, appended as the runs finish so
that a run cut short still leaves what it measured.
"""
import json
import os
import statistics
import sys


def last_json(path):
    """The last line of the file that is a JSON object (the programs print
    their result last; anything after it, e.g. a log line, is skipped)."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError:
        return []


def cmd_record(argv):
    import argparse

    p = argparse.ArgumentParser(prog="bench_stats.py record")
    p.add_argument("raw")
    for k in ("case", "mode", "metric", "better", "unit", "stdout", "stderr"):
        p.add_argument("--" + k, required=True)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--target", type=float, required=True)
    p.add_argument("--rc", type=int, required=True)
    p.add_argument("--t0", type=float, required=True)  # run start, Unix seconds
    p.add_argument("--t1", type=float, required=True)  # run end
    a = p.parse_args(argv)
    result = last_json(a.stdout)
    value = result.get(a.metric) if result else None
    ok = a.rc == 0 and isinstance(value, (int, float)) and value > 0
    rec = {
        "case": a.case, "mode": a.mode, "round": a.round, "metric": a.metric,
        "better": a.better, "target": a.target, "unit": a.unit,
        "ok": ok, "value": value if ok else None, "rc": a.rc,
        "seconds": round(a.t1 - a.t0, 3), "result": result,
    }
    if not ok:
        why = ("timed out" if a.rc in (124, 137) else
               f"exit status {a.rc}" if a.rc else f"no '{a.metric}' in its last JSON line")
        rec["error"] = why
        rec["stderr_tail"] = tail(a.stderr)
        sys.stderr.write(f"  !! {a.case} {a.mode} round {a.round + 1}: {why}\n")
        for line in tail(a.stdout, 5) + tail(a.stderr):
            sys.stderr.write(f"  !!   {line}\n")
    with open(a.raw, "a") as f:
        f.write(json.dumps(rec) + "\n")
    if ok:
        print(f"  round {a.round + 1} {a.mode:<6} {fmt(value, a.unit)}", flush=True)
    return 0 if ok else 1


def load(raw):
    recs = []
    try:
        with open(raw) as f:
            for line in f:
                if line.strip():
                    recs.append(json.loads(line))
    except OSError:
        pass
    return recs


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "launches/s":
        return f"{v:,.0f}/s ({1e6 / v:.3f} us)"
    if unit == "ms":
        return f"{v:.4f} ms"
    return f"{v:g} {unit}"


def analyse(recs, case):
    rs = [r for r in recs if r["case"] == case]
    if not rs:
        return None
    first = rs[0]
    higher = first["better"] == "higher"
    by_round = {}
    for r in rs:
        if r["ok"]:
            by_round.setdefault(r["round"], {})[r["mode"]] = r["value"]
    native = [v["native"] for v in by_round.values() if "native" in v]
    drk = [v["drk"] for v in by_round.values() if "drk" in v]
    # Each round's pair ran back to back, so its ratio sees the least drift;
    # the case's ratio is the median over rounds. ratio >= 1: drk no slower.
    pairs = [(v["native"], v["drk"]) for _, v in sorted(by_round.items()) if len(v) == 2]
    ratios = [(d / n if higher else n / d) for n, d in pairs]

    def spread(xs):
        return (max(xs) - min(xs)) / statistics.median(xs) * 100 if len(xs) > 1 else None

    out = {
        "case": case, "metric": first["metric"], "unit": first["unit"], "better": first["better"],
        "target": first["target"], "runs": len(rs), "failed_runs": sum(1 for r in rs if not r["ok"]),
        "rounds": len(pairs),
        "native": native, "drk": drk, "ratios": ratios,
        "native_median": statistics.median(native) if native else None,
        "drk_median": statistics.median(drk) if drk else None,
        "ratio": statistics.median(ratios) if ratios else None,
        "ratio_min": min(ratios) if ratios else None,
        "ratio_max": max(ratios) if ratios else None,
        "native_spread_pct": spread(native) if native else None,
        "drk_spread_pct": spread(drk) if drk else None,
    }
    if native and drk:
        nm, dm = out["native_median"], out["drk_median"]
        out["ratio_of_medians"] = dm / nm if higher else nm / dm
    out["verdict"] = verdict(out)
    return out


def verdict(a):
    if a["ratio"] is None:
        return "ERROR"
    v = "ok" if a["ratio"] >= a["target"] else "BELOW"
    # The rounds disagree by more than the margin the target allows: one
    # number cannot settle it; rerun with more rounds.
    margin = 1 - a["target"]
    if a["rounds"] > 1 and a["ratio_max"] - a["ratio_min"] > 2 * margin:
        v += " (noisy)"
    return v


def pct(x):
    return "-" if x is None else f"{x:.2f}%"


def case_line(a):
    if a["ratio"] is None:
        return (f"{a['case']:<12} no complete native/drk pair "
                f"({a['failed_runs']} of {a['runs']} runs failed)  target >= {a['target']}  ERROR")
    return (f"{a['case']:<12} native {fmt(a['native_median'], a['unit'])}  drk {fmt(a['drk_median'], a['unit'])}  "
            f"ratio {a['ratio']:.4f} [{a['ratio_min']:.4f}..{a['ratio_max']:.4f} over {a['rounds']} rounds]  "
            f"spread native {pct(a['native_spread_pct'])} drk {pct(a['drk_spread_pct'])}  "
            f"target >= {a['target']}  {a['verdict']}")


def cases_in_order(recs):
    seen = []
    for r in recs:
        if r["case"] not in seen:
            seen.append(r["case"])
    return seen


def cmd_case(argv):
    raw, case = argv
    a = analyse(load(raw), case)
    if a is None:
        print(f"{case:<12} no runs")
        return 1
    print(case_line(a), flush=True)
    return 0 if a["ratio"] is not None else 1


def cmd_summary(argv):
    raw, out = argv[0], (argv[1] if argv[1] != "-" else None)
    meta = dict(kv.split("=", 1) for kv in argv[2:] if "=" in kv)
    recs = load(raw)
    cases = [analyse(recs, c) for c in cases_in_order(recs)]
    print()
    print("summary (ratio = drk throughput / native throughput; >= 1.0: no overhead)")
    hdr = f"{'case':<12} {'native':>26} {'drk':>26} {'ratio':>7} {'range':>15} {'spread n/d':>13} {'target':>7}  verdict"
    print(hdr)
    print("-" * len(hdr))
    bad = 0
    for a in cases:
        if a["ratio"] is None:
            bad += 1
            print(f"{a['case']:<12} {'-':>26} {'-':>26} {'-':>7} {'-':>15} {'-':>13} {a['target']:>7}  ERROR")
            continue
        rng = f"{a['ratio_min']:.4f}..{a['ratio_max']:.4f}"
        spr = f"{pct(a['native_spread_pct'])}/{pct(a['drk_spread_pct'])}"
        print(f"{a['case']:<12} {fmt(a['native_median'], a['unit']):>26} {fmt(a['drk_median'], a['unit']):>26} "
              f"{a['ratio']:>7.4f} {rng:>15} {spr:>13} {a['target']:>7}  {a['verdict']}")
    if out:
        doc = {"schema": "drk-bench", "version": 1, "meta": meta, "cases": cases, "runs": recs}
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, out)
        print(f"raw results: {out}")
    return 1 if bad else 0


def cmd_check_report(argv):
    """Exit 0 when DIR holds one drk report whose kernels.launches is N."""
    d, n = argv[0], int(argv[1])
    try:
        files = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".json")]
    except OSError:
        files = []
    if len(files) != 1:
        print(f"expected one drk report in {d}, found {len(files)}")
        return 1
    try:
        with open(files[0]) as f:
            launches = json.load(f)["kernels"]["launches"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"unreadable drk report {files[0]}: {e}")
        return 1
    print(f"drk counted {launches} launches (expected {n})")
    return 0 if launches == n else 1


def main():
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    cmd, argv = sys.argv[1], sys.argv[2:]
    fn = {"record": cmd_record, "case": cmd_case, "summary": cmd_summary,
          "check-report": cmd_check_report}.get(cmd)
    if not fn:
        sys.stderr.write(__doc__)
        return 2
    return fn(argv)


if __name__ == "__main__":
    sys.exit(main())
