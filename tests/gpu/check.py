#!/usr/bin/env python3
"""The GPU suite's judge: reads what run.sh left of one workload's runs and
prints one line per check, "PASS <workload>: <check>: <detail>" or
"FAIL ...", the detail saying what differed, with numbers.

    check.py workload DIR [--losses] [--cupti-missing WHY]
    check.py routes DIR

DIR holds one folder per mode (native, drk, disabled), each with what run.sh
wrote: stdout, stderr, rc, wall (seconds), timeout (seconds), counts.json
(the program's own counts), cupti-<pid>.json (the CUPTI counter's), and
reports/ (DRK_REPORT, a directory). The exit status is 0 when every check
passed, 1 otherwise; an error of this script is itself printed as a FAIL
line.
"""
import argparse
import glob
import json
import os
import sys

MODES = ("native", "drk", "disabled")
LAUNCH_APIS = ("cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
               "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz")


def short(text, n=90):
    text = str(text)
    return text if len(text) <= n else text[:n - 3] + "..."


def nonzero(m):
    return {k: v for k, v in (m or {}).items() if v}


def diff_maps(named, limit=6):
    """named: [(label, {key: count})]. Lists the keys whose counts differ,
    e.g. 'kern: native=5 drk=6'; '' when all maps agree."""
    keys = sorted(set().union(*(m.keys() for _, m in named)))
    rows = []
    for k in keys:
        vals = [m.get(k, 0) for _, m in named]
        if len(set(vals)) > 1:
            rows.append(f"{short(k, 70)}: " + " ".join(f"{lab}={v}" for (lab, _), v in zip(named, vals)))
    if len(rows) > limit:
        rows = rows[:limit] + [f"... {len(rows) - limit} more"]
    return "; ".join(rows)


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def read_json(path):
    """(document, None) or (None, why)."""
    try:
        with open(path) as f:
            return json.load(f), None
    except OSError as e:
        return None, f"cannot read {os.path.basename(path)}: {e.strerror}"
    except ValueError as e:
        return None, f"{os.path.basename(path)} is not JSON: {e}"


class Run:
    """One mode's run of a workload, as run.sh left it."""

    def __init__(self, d, mode):
        self.dir, self.mode = d, mode
        rc = read_text(os.path.join(d, "rc"))
        self.rc = int(rc) if rc and rc.strip().lstrip(b"-").isdigit() else None
        wall = read_text(os.path.join(d, "wall"))
        self.wall = float(wall) if wall and wall.strip().replace(b".", b"", 1).isdigit() else None
        limit = read_text(os.path.join(d, "timeout"))
        self.limit = int(limit) if limit and limit.strip().isdigit() else None
        self.stdout = read_text(os.path.join(d, "stdout"))
        err = read_text(os.path.join(d, "stderr"))
        self.stderr = err.decode(errors="replace") if err is not None else ""
        self.counts, self.counts_why = read_json(os.path.join(d, "counts.json"))
        self.pid = self.counts.get("pid") if isinstance(self.counts, dict) else None
        self.cupti_files = sorted(glob.glob(os.path.join(d, "cupti-*.json")))
        rdir = os.path.join(d, "reports")
        self.reports_dir_exists = os.path.isdir(rdir)
        self.report_files = sorted(glob.glob(os.path.join(rdir, "*"))) if self.reports_dir_exists else []

    def ran_ok(self):
        return self.rc == 0

    def failure(self):
        """Why the run failed, for messages."""
        if self.rc is None:
            return "did not run (no rc file)"
        if self.rc in (124, 137) and self.limit:
            what = f"timed out after {self.limit} s (rc={self.rc})"
        else:
            what = f"exit {self.rc}"
        tail = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()][-3:]
        return what + (f"; stderr: {short(' | '.join(tail), 300)}" if tail else "")

    def drk_lines(self):
        return [ln for ln in self.stderr.splitlines() if "drk[" in ln]

    def cupti(self):
        """(document, None) for this process's CUPTI counts, or (None, why)."""
        if not self.cupti_files:
            return None, f"{self.mode}: no CUPTI output (counter not loaded? see {self.mode}/stderr)"
        docs = []
        for p in self.cupti_files:
            doc, why = read_json(p)
            if doc is None:
                return None, f"{self.mode}: {why}"
            docs.append(doc)
        if self.pid is not None:
            mine = [d for d in docs if d.get("pid") == self.pid]
            if not mine:
                return None, f"{self.mode}: no CUPTI output for pid {self.pid} (have pids {[d.get('pid') for d in docs]})"
            doc = mine[0]
        elif len(docs) == 1:
            doc = docs[0]
        else:
            return None, f"{self.mode}: {len(docs)} CUPTI outputs and no program pid to choose"
        if not doc.get("enabled") or doc.get("total") is None:
            return None, f"{self.mode}: CUPTI counter disabled: {doc.get('error')}"
        return doc, None


class Judge:
    def __init__(self, scope):
        self.scope, self.failed, self.count = scope, 0, 0

    def emit(self, ok, check, detail):
        self.count += 1
        if not ok:
            self.failed += 1
        print(f"{'PASS' if ok else 'FAIL'} {self.scope}: {check}: {detail}", flush=True)


def report_launches(rep):
    """drk report -> (calls.launch.total, by_name, kernels.launches, failed, {kernel: launches}, untracked)."""
    calls = rep["calls"]["launch"]
    k = rep["kernels"]
    per = {}
    for e in k["list"]:
        per[e["name"]] = per.get(e["name"], 0) + e["launches"]
    return calls["total"], calls["by_name"], k["launches"], k["failed_launches"], per, k.get("untracked_launches", 0)


def similar(name, keys, limit=3):
    hits = [k for k in keys if name in k or k in name]
    return ", ".join(short(h, 60) for h in hits[:limit]) or "none"


def check_workload(d, name, losses, cupti_missing):
    j = Judge(name)
    runs = {m: Run(os.path.join(d, m), m) for m in MODES}
    nat, drk, dis = runs["native"], runs["drk"], runs["disabled"]

    # 1. Each run exits 0.
    for m in MODES:
        r = runs[m]
        wall = f" in {r.wall:.1f} s" if r.wall is not None else ""
        j.emit(r.ran_ok(), f"run {m}", f"exit 0{wall}" if r.ran_ok() else r.failure())

    # 2. Same output, byte for byte.
    outs = {m: runs[m].stdout for m in MODES}
    if any(v is None for v in outs.values()):
        j.emit(False, "outputs identical", "missing stdout of " + ", ".join(m for m in MODES if outs[m] is None))
    elif not outs["native"].strip():
        j.emit(False, "outputs identical", "native printed nothing")
    else:
        bad = []
        for m in ("drk", "disabled"):
            if outs[m] != outs["native"]:
                a, b = outs["native"].decode(errors="replace").splitlines(), outs[m].decode(errors="replace").splitlines()
                i = next((i for i in range(max(len(a), len(b)))
                          if i >= len(a) or i >= len(b) or a[i] != b[i]), 0)
                la = a[i] if i < len(a) else "<end>"
                lb = b[i] if i < len(b) else "<end>"
                bad.append(f"{m} differs from native at line {i + 1}: native={short(la)!r} {m}={short(lb)!r}")
        j.emit(not bad, "outputs identical",
               "; ".join(bad) if bad else f"{len(outs['native'])} bytes, {len(outs['native'].splitlines())} lines")

    # 2b. PPO: the final losses, bitwise.
    if losses:
        vals = {}
        for m in MODES:
            text = (outs[m] or b"").decode(errors="replace").splitlines()
            vals[m] = tuple(ln.split()[-1] for ln in text if ln.startswith(("final policy_loss", "final value_loss")))
        ok = len(vals["native"]) == 2 and len(set(vals.values())) == 1
        j.emit(ok, "final losses bitwise equal",
               " ".join(f"{m}=({', '.join(vals[m]) or 'missing'})" for m in MODES))

    # 3. Exactly one drk report for the process, schema drk-report v1.
    rep = None
    docs, problems = [], []
    for p in drk.report_files:
        doc, why = read_json(p)
        if doc is None:
            problems.append(why)
        else:
            docs.append((p, doc))
    pids = [doc.get("process", {}).get("pid") for _, doc in docs]
    dup = sorted({p for p in pids if pids.count(p) > 1})
    if drk.pid is not None:
        mine = [(p, doc) for p, doc in docs if doc.get("process", {}).get("pid") == drk.pid]
    else:
        mine = docs if len(docs) == 1 else []
        if len(docs) != 1:
            problems.append(f"the program wrote no counts.json (pid unknown) and there are {len(docs)} reports")
    if dup:
        problems.append(f"several reports for pid(s) {dup}")
    if len(mine) != 1:
        problems.append(f"{len(mine)} reports for the program's pid {drk.pid} "
                        f"({len(drk.report_files)} files in drk/reports/, dir exists: {drk.reports_dir_exists})")
    else:
        path, doc = mine[0]
        if doc.get("schema") != "drk-report" or doc.get("version") != 1:
            problems.append(f"{os.path.basename(path)}: schema={doc.get('schema')!r} version={doc.get('version')!r}")
        else:
            try:
                report_launches(doc)
                rep = doc
            except (KeyError, TypeError) as e:
                problems.append(f"{os.path.basename(path)}: missing key {e} under calls.launch/kernels")
            drv = doc.get("driver") or {}
            if not isinstance(drv.get("version"), int) or drv.get("version", 0) < 12000 or not drv.get("path"):
                problems.append(f"{os.path.basename(path)}: driver path {drv.get('path')!r} version {drv.get('version')!r}")
    if problems:
        j.emit(False, "one report per process", "; ".join(problems))
    else:
        others = len(docs) - 1
        j.emit(True, "one report per process",
               f"{os.path.basename(mine[0][0])} (drk-report v1)"
               + (f"; {others} more from other processes" if others else "")
               + f"; {len(drk.drk_lines())} drk[ lines on stderr")

    # CUPTI documents.
    cup, cup_why = {}, {}
    for m in MODES:
        if cupti_missing:
            cup[m], cup_why[m] = None, f"no CUPTI counter: {cupti_missing}"
        else:
            cup[m], cup_why[m] = runs[m].cupti()

    def need(*what):
        """Why a check cannot be made, or None."""
        whys = []
        for w in what:
            if w == "report" and rep is None:
                whys.append("no usable drk report")
            elif w in MODES and cup[w] is None:
                whys.append(cup_why[w])
        return "; ".join(dict.fromkeys(whys)) or None

    # 4. drk's launch calls == CUPTI's, in the same process.
    why = need("report", "drk")
    if why:
        for check in ("launch calls == CUPTI", "launches + failed == CUPTI", "per-API calls == CUPTI",
                      "per-kernel launches == CUPTI"):
            j.emit(False, check, why)
    else:
        total, by_name, launches, failed, per, untracked = report_launches(rep)
        c = cup["drk"]
        j.emit(total == c["total"], "launch calls == CUPTI",
               f"calls.launch.total={total} CUPTI total={c['total']}")
        ok = launches + failed == c["total"] and launches == c["ok"] and failed == c["failed"]
        j.emit(ok, "launches + failed == CUPTI",
               f"kernels.launches={launches} + failed_launches={failed} = {launches + failed}; "
               f"CUPTI total={c['total']} (accepted {c['ok']}, refused {c['failed']})")
        d_api, c_api = nonzero(by_name), nonzero(c["by_api"])
        j.emit(d_api == c_api, "per-API calls == CUPTI",
               diff_maps([("drk", d_api), ("cupti", c_api)]) if d_api != c_api
               else ", ".join(f"{k}={v}" for k, v in sorted(d_api.items())) or "no launches")
        c_kern = nonzero(c["by_kernel_ok"])
        # Kernels looked up but never launched are in drk's list with 0.
        per = nonzero(per)
        src = nonzero(c.get("name_source"))
        note = f" (CUPTI names from {src})" if set(src) - {"cupti"} else ""
        if per != c_kern:
            extra = f"; untracked_launches={untracked}" if untracked else ""
            j.emit(False, "per-kernel launches == CUPTI",
                   diff_maps([("drk", per), ("cupti", c_kern)]) + extra + note)
        else:
            j.emit(True, "per-kernel launches == CUPTI",
                   f"{len(per)} kernels, {sum(per.values())} launches agree{note}")

    # 5. The program's own counts, where it knows them.
    counts = drk.counts if isinstance(drk.counts, dict) else None
    claims = counts and any(k in counts for k in ("kernels", "by_api", "failed_launches"))
    if counts is None and nat.counts is not None and any(
            k in nat.counts for k in ("kernels", "by_api", "failed_launches")):
        j.emit(False, "program's own counts", f"drk run left no counts.json ({drk.counts_why})")
    elif claims:
        why = need("report", "drk")
        if why:
            j.emit(False, "program's own counts", why)
        else:
            total, by_name, launches, failed, per, _ = report_launches(rep)
            c = cup["drk"]
            bad, good = [], []
            for kname, n in sorted(counts.get("kernels", {}).items()):
                dv, cv = per.get(kname, 0), c["by_kernel_ok"].get(kname, 0)
                if dv == n == cv:
                    good.append(f"{kname}={n}")
                else:
                    hint = "" if kname in per else f" (drk has no such name; similar: {similar(kname, per)})"
                    bad.append(f"{kname}: program={n} drk={dv} cupti={cv}{hint}")
            prog_api = nonzero(counts.get("by_api"))
            if prog_api:
                d_api, c_api = nonzero(by_name), nonzero(c["by_api"])
                if prog_api == d_api == c_api:
                    good.append("by_api " + ",".join(f"{k}={v}" for k, v in sorted(prog_api.items())))
                else:
                    bad.append("by_api " + diff_maps([("program", prog_api), ("drk", d_api), ("cupti", c_api)]))
            if "failed_launches" in counts:
                n = counts["failed_launches"]
                if n == failed == c["failed"]:
                    good.append(f"failed={n}")
                else:
                    bad.append(f"failed launches: program={n} drk={failed} cupti={c['failed']}")
            j.emit(not bad, "program's own counts", "; ".join(bad) if bad else ", ".join(good))

    # 6. drk neither adds nor drops launches: CUPTI agrees across the modes.
    why = need(*MODES)
    if why:
        j.emit(False, "CUPTI native == drk == disabled", why)
    else:
        tot = {m: cup[m]["total"] for m in MODES}
        parts = []
        if len(set(tot.values())) > 1:
            parts.append("total " + " ".join(f"{m}={tot[m]}" for m in MODES))
        for key in ("by_api", "by_kernel", "by_kernel_ok"):
            maps = [(m, nonzero(cup[m][key])) for m in MODES]
            if any(mp != maps[0][1] for _, mp in maps):
                parts.append(f"{key}: " + diff_maps(maps))
        j.emit(not parts, "CUPTI native == drk == disabled",
               "; ".join(parts) if parts else
               f"total {tot['native']}, {len(nonzero(cup['native']['by_kernel']))} kernels, same in all three")

    # 7. DRK_DISABLE=1: invisible.
    j.emit(*disabled_invisible(dis))

    # 8. Every launched kernel is known: a name, and a parameter layout read
    #    from its image that equals the driver's (cuFuncGetParamInfo).
    if rep is None:
        j.emit(False, "every launched kernel known", "no usable drk report")
        j.emit(False, "image resources == driver's", "no usable drk report")
    else:
        j.emit(*kernel_facts(rep))
        j.emit(*kernel_resources(rep))
    return j


def kernel_facts(rep):
    k = rep["kernels"]
    launched = [e for e in k["list"] if e["launches"]]
    misses = []
    for e in launched:
        img, drv = e.get("image"), e.get("driver")
        if e["name"].startswith("<unnamed"):
            misses.append(f"{e['name']}: no name")
        elif img is None:
            misses.append(f"{short(e['name'], 60)}: no image facts")
        elif e.get("params_match") is not True:
            got = [(p["offset"], p["size"]) for p in img["params"]]
            want = None if not drv or drv["params"] is None else [(p["offset"], p["size"]) for p in drv["params"]]
            misses.append(f"{short(e['name'], 60)}: image layout {short(str(got), 80)} driver {short(str(want), 80)}")
    f = k.get("facts", {})
    n = len(launched)
    ptx = sum(1 for e in launched if e.get("image") and e["image"]["ptx_for_device"])
    anyptx = sum(1 for e in launched if e.get("image") and e["image"]["ptx"])
    detail = (f"{n} launched kernels, {n - len(misses)} with name and image layout == driver's, {len(misses)} misses; "
              f"PTX usable on sm_{f.get('device_sm')}: {ptx}/{n} ({anyptx} with any PTX); "
              f"images read {f.get('images', {}).get('read')}/{f.get('images', {}).get('loads')} "
              f"({f.get('images', {}).get('deferred', 0)} deferred to exit) "
              f"in {f.get('images', {}).get('read_us', 0) / 1000:.1f} ms, "
              f"{f.get('images', {}).get('read_at_exit_us', 0) / 1000:.1f} ms of it at exit")
    if misses:
        detail += "; " + "; ".join(misses[:5]) + (f"; ... {len(misses) - 5} more" if len(misses) > 5 else "")
    return not misses and n > 0, "every launched kernel known", detail


def kernel_resources(rep):
    """Registers, static shared memory and max threads read from a kernel's
    cubin equal what the driver says of the loaded kernel."""
    bad, compared = [], 0
    # A cubin's shared size includes the per-block reserve when the kernel
    # uses shared memory; the driver's excludes it.
    reserve = rep["kernels"].get("facts", {}).get("device_reserved_shared_bytes") or 0
    for e in rep["kernels"]["list"]:
        img, drv = e.get("image"), e.get("driver")
        if not e["launches"] or not img or not drv or img["layout_source"] != "sass":
            continue
        compared += 1
        for key in ("registers", "shared_bytes"):
            if img[key] is None or drv[key] is None:
                continue
            ok = img[key] == drv[key] or (key == "shared_bytes" and img[key] == drv[key] + reserve)
            if not ok:
                bad.append(f"{short(e['name'], 50)} {key} image={img[key]} driver={drv[key]}"
                           + (f" (+{reserve} reserved)" if key == "shared_bytes" else ""))
    detail = f"{compared} kernels with SASS facts compared" + ("; " + "; ".join(bad[:5]) if bad else "")
    return not bad, "image resources == driver's", detail


def disabled_invisible(dis):
    probs = []
    if dis.report_files:
        probs.append(f"{len(dis.report_files)} report file(s): "
                     + ", ".join(os.path.basename(p) for p in dis.report_files[:3]))
    lines = dis.drk_lines()
    if lines:
        probs.append(f"{len(lines)} drk[ line(s) on stderr, first: {short(lines[0], 160)!r}")
    return (not probs, "DRK_DISABLE=1 leaves no trace",
            "; ".join(probs) if probs else "no report, no drk[ line on stderr")


def check_routes(d):
    j = Judge("routes")
    runs = {m: Run(os.path.join(d, m), m) for m in MODES}
    got = {}
    for m in MODES:
        r = runs[m]
        doc = None
        if r.ran_ok():
            try:
                doc = json.loads(r.stdout or b"")
            except ValueError as e:
                doc = None
                j.emit(False, f"probe {m}", f"stdout is not JSON: {e}")
                got[m] = None
                continue
        j.emit(doc is not None, f"probe {m}", "exit 0, JSON read" if doc is not None else r.failure())
        got[m] = doc

    def at(m, key, lib, symbol=None, label=None):
        label = label or key
        doc = got[m]
        if doc is None:
            j.emit(False, f"{m}: {label}", f"no probe output for {m}")
            return
        e = doc.get(key) or {}
        f, s = e.get("file") or "", e.get("symbol")
        ok = os.path.basename(f).startswith(lib) and (symbol is None or s == symbol)
        want = lib + (f" {symbol}" if symbol else "")
        extra = f" (rc={e['rc']}, status={e['status']})" if "rc" in e else ""
        j.emit(ok, f"{m}: {label}", f"want {want}; got {os.path.basename(f) or 'nothing'} "
                                    f"{s or '<no symbol>'} at {e.get('addr')}{extra}")

    at("drk", "handle_cuLaunchKernel", "libdrk_shim.so", "cuLaunchKernel",
       'dlsym(libcuda handle, "cuLaunchKernel")')
    at("drk", "default_cuLaunchKernel", "libdrk_shim.so", "cuLaunchKernel",
       'dlsym(global scope, "cuLaunchKernel")')
    at("drk", "cuGetProcAddress_v2", "libdrk_shim.so", "cuGetProcAddress_v2",
       'dlsym(libcuda handle, "cuGetProcAddress_v2")')
    at("drk", "proc_cuLaunchKernel_ptds", "libdrk_shim.so", "cuLaunchKernel_ptsz",
       'cuGetProcAddress_v2("cuLaunchKernel", 12000, PER_THREAD_DEFAULT_STREAM)')
    at("drk", "proc_cuMemAlloc", "libdrk_shim.so", "cuMemAlloc_v2",
       'cuGetProcAddress_v2("cuMemAlloc", 12000, DEFAULT)')
    for m in ("disabled", "native"):
        at(m, "handle_cuLaunchKernel", "libcuda.so", None, 'dlsym(libcuda handle, "cuLaunchKernel")')
        at(m, "proc_cuLaunchKernel_ptds", "libcuda.so", None,
           'cuGetProcAddress_v2("cuLaunchKernel", 12000, PER_THREAD_DEFAULT_STREAM)')

    # drk counted exactly the probe's two cuGetProcAddress_v2 calls.
    reps = []
    for p in runs["drk"].report_files:
        doc, _ = read_json(p)
        if doc:
            reps.append(doc)
    if len(reps) != 1:
        j.emit(False, "drk: report counts the probe's 2 cuGetProcAddress_v2 calls",
               f"{len(reps)} readable reports in drk/reports/")
    else:
        try:
            n = reps[0]["calls"]["entry"]["by_name"]["cuGetProcAddress_v2"]
        except (KeyError, TypeError) as e:
            n = f"missing key {e}"
        j.emit(n == 2, "drk: report counts the probe's 2 cuGetProcAddress_v2 calls",
               f"calls.entry.by_name.cuGetProcAddress_v2={n}")
    j.emit(*disabled_invisible(runs["disabled"]))
    return j


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("workload")
    w.add_argument("dir")
    w.add_argument("--name")
    w.add_argument("--losses", action="store_true", help="also compare the final losses (ppo)")
    w.add_argument("--cupti-missing", default="", help="why no CUPTI counter ran: its checks fail with this")
    r = sub.add_parser("routes")
    r.add_argument("dir")
    args = ap.parse_args()
    scope = args.name if args.cmd == "workload" and args.name else (
        "routes" if args.cmd == "routes" else os.path.basename(os.path.normpath(args.dir)))
    try:
        if args.cmd == "workload":
            j = check_workload(args.dir, scope, args.losses, args.cupti_missing)
        else:
            j = check_routes(args.dir)
    except Exception as e:  # a bug here must still count as a failure
        import traceback
        traceback.print_exc(file=sys.stderr)
        print(f"FAIL {scope}: check.py: {type(e).__name__}: {e}", flush=True)
        return 1
    return 1 if j.failed else 0


if __name__ == "__main__":
    sys.exit(main())
