#!/usr/bin/env python3
"""The GPU suite's judge: reads what run.sh left of one workload's runs and
prints one line per check, "PASS <workload>: <check>: <detail>" or
"FAIL ...", the detail saying what differed, with numbers.

    check.py workload DIR [--losses] [--min-pool-allocs N] [--want-async] [--evolve] [--cupti-missing WHY]
    check.py routes DIR
    check.py frag DIR        (alloc_frag: native, drk, nodefrag, disabled)
    check.py ipc DIR         (ipc_pair: native, drk, noalloc, disabled)
    check.py memcheck DIR    (alloc_heavy under compute-sanitizer: native, drk)

DIR holds one folder per mode (native, drk, disabled; nodefrag and noalloc
are drk with DRK_DEFRAG=0 and DRK_ALLOC=0; with --evolve, evolve is drk
with DRK_EVOLVE=1, uncounted), each with what run.sh wrote: stdout, stderr, rc, wall (seconds), timeout (seconds), counts.json
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

import evolve_share

MODES = ("native", "drk", "disabled")
# What the device pool's report object holds (docs/report.md, device_pool).
POOL_KEYS = ("enabled", "allocs", "frees", "failed_allocs", "bad_frees", "driver_allocs", "live_bytes",
             "peak_live_bytes", "reserved_bytes", "peak_reserved_bytes", "pages_created", "pages_released",
             "pages_moved", "defrag_events", "out_of_memory")
# Allocation entry points the pool serves, as CUPTI names them.
ALLOC_APIS = ("cuMemAlloc_v2", "cuMemAllocPitch_v2", "cuMemAllocAsync", "cuMemAllocAsync_ptsz")
PAGE = 2 << 20
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


def final_losses(stdout):
    """A trainer's final losses: the values of its "final <name>loss <float.hex()>" lines."""
    text = (stdout or b"").decode(errors="replace").splitlines()
    return tuple(ln.split()[-1] for ln in text
                 if ln.startswith("final ") and len(ln.split()) == 3 and ln.split()[1].endswith("loss"))


def similar(name, keys, limit=3):
    hits = [k for k in keys if name in k or k in name]
    return ", ".join(short(h, 60) for h in hits[:limit]) or "none"


def check_workload(d, name, losses, cupti_missing, min_pool_allocs=0, want_async=False):
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

    # 2b. Trainers: the final losses ("final <name>loss <float.hex()>" lines), bitwise.
    if losses:
        vals = {m: final_losses(outs[m]) for m in MODES}
        ok = len(vals["native"]) >= 1 and len(set(vals.values())) == 1
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

    # 7b. The device pool (on by default) served the program's allocations.
    if rep is None:
        j.emit(False, "device pool served allocations", "no usable drk report")
    else:
        j.emit(*pool_served(rep, cup["native"], cup["drk"], min_pool_allocs, want_async))

    # 7b'. Contexts the program ended: the device pool followed each.
    if isinstance(counts, dict) and "contexts_ended" in counts:
        n = counts["contexts_ended"]
        dp = (rep or {}).get("device_pool") if isinstance(rep, dict) else None
        got = dp.get("contexts_ended") if isinstance(dp, dict) else None
        hp = (rep or {}).get("host_pool") if isinstance(rep, dict) else None
        j.emit(got == n, "device pool followed contexts ending",
               f"program ended {n}; device_pool.contexts_ended={got!r}, allocs={dp.get('allocs') if dp else None}, "
               f"pages_created={dp.get('pages_created') if dp else None}; host_pool.contexts_ended="
               f"{hp.get('contexts_ended') if isinstance(hp, dict) else None!r}")

    # 7c. Pinned host memory: drk saw the program's allocations and queries.
    if isinstance(counts, dict) and "host_allocs" in counts:
        n = counts["host_allocs"]
        if rep is None:
            j.emit(False, "pinned host allocations seen", "no usable drk report")
        else:
            host = ((rep.get("memory") or {}).get("host") or {}).get("allocs", 0)
            dptr = calls_named(rep, "host_memory", "cuMemHostGetDevicePointer")
            flags = calls_named(rep, "host_memory", "cuMemHostGetFlags")
            ok = host == n and dptr >= n and flags >= n
            pools = {k: v for k, v in rep.items() if "host" in k and isinstance(v, dict)}
            j.emit(ok, "pinned host allocations seen",
                   f"program {n}; report memory.host.allocs={host}, cuMemHostGetDevicePointer*={dptr}, "
                   f"cuMemHostGetFlags={flags} (each >= {n})"
                   + "".join(f"; {k}: {short(json.dumps(v), 200)}" for k, v in pools.items()))

    # 8. Every launched kernel is known: a name, and a parameter layout read
    #    from its image that equals the driver's (cuFuncGetParamInfo).
    if rep is None:
        j.emit(False, "every launched kernel known", "no usable drk report")
        j.emit(False, "image resources == driver's", "no usable drk report")
    else:
        j.emit(*kernel_facts(rep))
        j.emit(*kernel_resources(rep))
    return j


def pool_of(rep):
    """(device_pool object, None) or (None, why)."""
    dp = rep.get("device_pool") if isinstance(rep, dict) else None
    if not isinstance(dp, dict):
        return None, "the report has no device_pool object"
    missing = [k for k in POOL_KEYS if k not in dp]
    if missing:
        return None, f"device_pool lacks {', '.join(missing)}"
    return dp, None


def hook_allocs(rep):
    """Successful allocations drk's hooks counted, by kind (memory.*.allocs)."""
    mem = rep.get("memory") or {}
    return {k: (mem.get(k) or {}).get("allocs", 0) for k in ("device", "pitch", "async")}


def cupti_allocs(doc, key="by_api_ok"):
    """CUPTI's allocation calls per entry point ({} without a counter)."""
    return nonzero(((doc or {}).get("memory") or {}).get(key) or {})


def pool_line(dp):
    return (f"device_pool allocs={dp['allocs']} frees={dp['frees']} driver_allocs={dp['driver_allocs']} "
            f"failed_allocs={dp['failed_allocs']} bad_frees={dp['bad_frees']} "
            f"peak_live={dp['peak_live_bytes']} peak_reserved={dp['peak_reserved_bytes']} "
            f"pages created={dp['pages_created']} moved={dp['pages_moved']} released={dp['pages_released']} "
            f"(handles made={dp.get('handles_created')} moved={dp.get('handles_moved')})")


def pool_served(rep, native_cupti, drk_cupti, min_allocs=0, want_async=False):
    """The pool is on (the default) and served the program's cuMemAlloc,
    cuMemAllocPitch and cuMemAllocAsync calls where it made any (native
    CUPTI, or drk's own hook counts); no bad frees, no failures."""
    check = "device pool served allocations"
    dp, why = pool_of(rep)
    if dp is None:
        return False, check, why
    kinds = hook_allocs(rep)
    made = sum(kinds.values())
    nat = {k: v for k, v in cupti_allocs(native_cupti).items() if k in ALLOC_APIS}
    nat_async = nat.get("cuMemAllocAsync", 0) + nat.get("cuMemAllocAsync_ptsz", 0)
    probs = []
    if dp["enabled"] is not True:
        probs.append(f"device_pool.enabled={dp['enabled']!r} (the pool is on by default)")
    if (made or nat) and not dp["allocs"]:
        probs.append(f"the program allocated (hooks {made}, native CUPTI {sum(nat.values())}) but the pool served none")
    if dp["allocs"] + dp["driver_allocs"] < made:
        probs.append(f"allocs + driver_allocs = {dp['allocs'] + dp['driver_allocs']} < {made} allocations the hooks "
                     f"counted")
    if min_allocs and dp["allocs"] < min_allocs:
        probs.append(f"device_pool.allocs={dp['allocs']} < {min_allocs} expected")
    if want_async and not (kinds["async"] and (nat_async or native_cupti is None)):
        probs.append(f"cuMemAllocAsync not reached: hooks async={kinds['async']}, native CUPTI {nat_async}")
    if dp["bad_frees"]:
        probs.append(f"device_pool.bad_frees={dp['bad_frees']}")
    # Failed allocations only where the driver refused as many natively.
    nat_failed = sum(v for k, v in cupti_allocs(native_cupti, "by_api_failed").items() if k in ALLOC_APIS)
    for key in ("failed_allocs", "out_of_memory"):
        if dp[key] > nat_failed:
            probs.append(f"device_pool.{key}={dp[key]} (native failed allocations: {nat_failed})")
    detail = (pool_line(dp) + f"; hooks: device={kinds['device']} pitch={kinds['pitch']} async={kinds['async']}"
              + (f"; native CUPTI: {', '.join(f'{k}={v}' for k, v in sorted(nat.items())) or 'none'}"
                 if native_cupti is not None else "")
              + (f"; reached the driver under drk: {sum(v for k, v in cupti_allocs(drk_cupti).items() if k in ALLOC_APIS)}"
                 if drk_cupti is not None else ""))
    return not probs, check, ("; ".join(probs) + " | " + detail) if probs else detail


def own_report(run, pid=None):
    """The report a run's process wrote: (doc, None) or (None, why). pid
    defaults to the program's (counts.json); without one, the only report."""
    pid = run.pid if pid is None else pid
    docs, bad = [], []
    for p in run.report_files:
        doc, why = read_json(p)
        if doc is None:
            bad.append(why)
        else:
            docs.append(doc)
    if pid is not None:
        mine = [doc for doc in docs if (doc.get("process") or {}).get("pid") == pid]
    else:
        mine = docs if len(docs) == 1 else []
    if len(mine) != 1:
        return None, (f"{run.mode}: {len(mine)} reports for pid {pid} ({len(run.report_files)} files in "
                      f"{run.mode}/reports/" + (f"; {'; '.join(bad)}" if bad else "") + ")")
    doc = mine[0]
    if doc.get("schema") != "drk-report" or doc.get("version") != 1:
        return None, f"{run.mode}: report of pid {pid}: schema={doc.get('schema')!r} version={doc.get('version')!r}"
    return doc, None


def last_json(run):
    """The last stdout line that is a JSON object, or None."""
    for ln in reversed((run.stdout or b"").decode(errors="replace").splitlines()):
        ln = ln.strip()
        if ln.startswith("{"):
            try:
                return json.loads(ln)
            except ValueError:
                return None
    return None


def stream_reserve(rep, total):
    """DRK_STREAM_RESERVE in bytes, as the report's options say (default 5%
    of device memory)."""
    text = str(((rep or {}).get("options") or {}).get("DRK_STREAM_RESERVE") or "5%").strip()
    try:
        if text.endswith("%"):
            return int(float(text[:-1]) / 100 * total)
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1:].upper(), 1)
        return int(float(text[:-1] if mult > 1 else text) * mult)
    except ValueError:
        return int(0.05 * total)


def check_evolve(j, d, losses):
    """The evolve mode (DRK_EVOLVE=1) against the native run: exit 0, the
    same output byte for byte, the same final losses, evolution on with no
    kernel failed; and, as the detail of a PASS, the share of GPU time drk
    could evolve and what it served."""
    nat, ev = Run(os.path.join(d, "native"), "native"), Run(os.path.join(d, "evolve"), "evolve")
    j.emit(ev.ran_ok(), "run evolve", f"exit 0 in {ev.wall:.1f} s" if ev.ran_ok() and ev.wall else ev.failure())
    same = ev.stdout is not None and nat.stdout is not None and nat.stdout.strip() and ev.stdout == nat.stdout
    j.emit(bool(same), "evolve output identical to native",
           f"{len(nat.stdout)} bytes" if same else "differs or missing (see evolve/stdout)")
    if losses:
        a, b = final_losses(nat.stdout), final_losses(ev.stdout)
        j.emit(bool(a) and a == b, "evolve final losses bitwise equal", f"native={a} evolve={b}")
    docs = [read_json(p)[0] for p in ev.report_files]
    docs = [x for x in docs if isinstance(x, dict)]
    if ev.pid is not None:
        docs = [x for x in docs if x.get("process", {}).get("pid") == ev.pid]
    if len(docs) != 1 or "evolve" not in docs[0]:
        j.emit(False, "evolve report", f"{len(docs)} reports for the program with an evolve section")
        return
    rep = docs[0]
    e = rep["evolve"]
    failed = [f"{short(r['name'], 50)}: {short(r['why'], 120)}" for r in e.get("by_kernel", [])
              if r["state"] == "failed"]
    j.emit(e.get("enabled") and not failed, "evolution on, no kernel failed",
           e.get("off_reason") or "; ".join(failed) or
           f"{e['kernels']} kernel-shapes targeted, {e['evolved']} evolved, {e['refused']} refused over "
           f"{e['rounds']} rounds; trials {100 * e['trial_share']:.2f}% of kernel time")
    sh = evolve_share.shares(rep)
    where = "; ".join(f"{100 * s:.1f}% {short(w, 60)} ({n})" for s, n, w in sh["rows"][:4]) or "no GPU times"
    served = ", ".join(f"{short(n, 30)} {sp:.2f}x ({100 * s:.1f}%)" for n, s, sp in sh["served"]) or "none"
    j.emit(True, "evolvable share",
           f"{100 * sh['could']:.1f}% of GPU time evolved or evolving ({100 * sh['ptx']:.1f}% in kernels with "
           f"PTX for the device) over {e['rounds']} rounds; served: {served}; est. kernel-time speedup "
           f"{sh['speedup']:.3f}x; where: {where}")


def check_frag(d, name):
    """alloc_frag: completes natively and under drk's pool with peak
    reserved close to peak live; runs out of memory under DRK_DEFRAG=0."""
    j = Judge(name)
    modes = ("native", "drk", "nodefrag", "disabled")
    runs = {m: Run(os.path.join(d, m), m) for m in modes}
    res = {m: last_json(runs[m]) for m in modes}
    for m in ("native", "drk", "disabled"):
        r, doc = runs[m], res[m]
        ok = r.ran_ok() and isinstance(doc, dict) and doc.get("alloc_frag") == "completed"
        if ok:
            detail = (f"peak live {doc['peak_live_bytes']} bytes in {doc['peak_live_blocks']} blocks "
                      f"({100 * doc['peak_live_bytes'] / doc['total_bytes']:.1f}% of {doc['total_bytes']}), "
                      f"{doc['allocs']} allocations" + (f" in {r.wall:.1f} s" if r.wall is not None else ""))
        else:
            detail = f"{r.failure()}; last JSON: {short(json.dumps(doc), 200) if doc else 'none'}"
        j.emit(ok, f"run {m} completes", detail)
    nat, drk = res["native"], res["drk"]
    same = isinstance(nat, dict) and nat == drk
    j.emit(same, "same allocations native and under drk",
           "the programs' summaries are equal" if same else f"native {short(json.dumps(nat), 150)} drk "
                                                            f"{short(json.dumps(drk), 150)}")

    # Under drk's pool: peak reserved close to the program's peak live.
    rep, why = own_report(runs["drk"])
    dp, why2 = pool_of(rep) if rep else (None, why)
    if dp is None or not isinstance(drk, dict) or drk.get("alloc_frag") != "completed":
        for c in ("pool peak live == program's", "pool peak reserved close to peak live", "pool stitched pages"):
            j.emit(False, c, why2 or "the drk run did not complete")
    else:
        live, blocks, total = drk["peak_live_bytes"], drk["peak_live_blocks"], drk["total_bytes"]
        ok = live <= dp["peak_live_bytes"] <= live + 512 * blocks
        j.emit(ok, "pool peak live == program's",
               f"device_pool.peak_live_bytes={dp['peak_live_bytes']}, the program's {live} "
               f"(allowed: up to 512 bytes of rounding on each of {blocks} blocks)")
        # Pages under live blocks: at most the live bytes plus two partly
        # used pages per block; idle pages kept in place: the stream reserve
        # and the heap's 1% of live pages. Anything beyond is memory a
        # stitching pool should not hold.
        reserve = stream_reserve(rep, total)
        bound = live + 2 * PAGE * blocks + reserve + live // 100
        pr = dp["peak_reserved_bytes"]
        ok = dp["peak_live_bytes"] <= pr <= bound
        j.emit(ok, "pool peak reserved close to peak live",
               f"peak_reserved_bytes={pr} ({pr / max(live, 1):.3f}x the program's peak live {live}); bound "
               f"{bound} = peak live + 2 pages x {blocks} blocks + stream reserve {reserve} + 1% of peak live"
               f" ({100 * bound / total:.1f}% of device memory); " + pool_line(dp))
        ok = dp["pages_moved"] > 0 and not dp["out_of_memory"] and not dp["bad_frees"]
        j.emit(ok, "pool stitched pages",
               f"pages_moved={dp['pages_moved']} (> 0: free pages mapped into new ranges), "
               f"defrag_events={dp['defrag_events']}, out_of_memory={dp['out_of_memory']}, "
               f"bad_frees={dp['bad_frees']}")

    # DRK_DEFRAG=0: a pool that cannot stitch runs out while the live set fits.
    r, doc = runs["nodefrag"], res["nodefrag"]
    oom = r.rc == 3 and isinstance(doc, dict) and doc.get("alloc_frag") == "out_of_memory"
    if oom:
        share = (doc["live_bytes"] + doc["request_bytes"]) / doc["total_bytes"]
        oom = share <= 0.6
        detail = (f"exit 3 in cycle {doc['cycle']}: {doc['request_bytes']} bytes asked with {doc['live_bytes']} live "
                  f"({100 * share:.1f}% of device memory with the request; must be <= 60%)")
    else:
        detail = f"want exit 3 (CUDA_ERROR_OUT_OF_MEMORY): {r.failure() if r.rc else 'exit 0, completed'}"
    j.emit(oom, "DRK_DEFRAG=0 runs out of memory", detail)
    rep, why = own_report(r)
    dp, why = pool_of(rep) if rep else (None, why)
    if dp is None:
        j.emit(False, "DRK_DEFRAG=0 pool never moved a page", why)
    else:
        ok = dp["enabled"] is True and dp["out_of_memory"] >= 1 and dp["pages_moved"] == 0 \
            and dp["pages_released"] == 0 and not dp["bad_frees"]
        j.emit(ok, "DRK_DEFRAG=0 pool never moved a page",
               f"out_of_memory={dp['out_of_memory']} (>= 1), pages_moved={dp['pages_moved']} and "
               f"pages_released={dp['pages_released']} (0); " + pool_line(dp))
    j.emit(*disabled_invisible(runs["disabled"]))
    return j


def stdout_lines(run, strip_prefix=None):
    lines = (run.stdout or b"").decode(errors="replace").splitlines()
    return [ln for ln in lines if not (strip_prefix and ln.startswith(strip_prefix))]


def same_outputs(runs, modes, strip_prefix=None):
    """(ok, detail): the runs' stdout lines (less strip_prefix ones) equal the first mode's."""
    base = stdout_lines(runs[modes[0]], strip_prefix)
    if not base:
        return False, f"{modes[0]} printed nothing"
    bad = []
    for m in modes[1:]:
        other = stdout_lines(runs[m], strip_prefix)
        if other != base:
            i = next((i for i in range(max(len(base), len(other)))
                      if i >= len(base) or i >= len(other) or base[i] != other[i]), 0)
            la = base[i] if i < len(base) else "<end>"
            lb = other[i] if i < len(other) else "<end>"
            bad.append(f"{m} differs from {modes[0]} at line {i + 1}: {modes[0]}={short(la)!r} {m}={short(lb)!r}")
    return not bad, "; ".join(bad) if bad else f"{len(base)} lines, same in {', '.join(modes)}"


def calls_named(rep, family, prefix):
    by = (((rep or {}).get("calls") or {}).get(family) or {}).get("by_name") or {}
    return sum(v for k, v in by.items() if k.startswith(prefix))


def check_ipc(d, name):
    """ipc_pair: a parent and its exec'd child share cuMemAlloc memory by
    CUDA IPC natively, under drk (pool memory) and under DRK_ALLOC=0."""
    j = Judge(name)
    modes = ("native", "drk", "noalloc", "disabled")
    runs = {m: Run(os.path.join(d, m), m) for m in modes}
    for m in modes:
        r = runs[m]
        if r.ran_ok():
            j.emit(True, f"run {m}", "exit 0" + (f" in {r.wall:.1f} s" if r.wall is not None else ""))
        else:
            # The program's own lines (the child's CUDA error among them), else the stderr tail.
            errs = [ln.strip() for ln in r.stderr.splitlines() if ln.startswith("ipc_pair")]
            what = r.failure().split("; stderr:")[0]
            j.emit(False, f"run {m}", what + (f"; {short(' | '.join(errs[-4:]), 400)}" if errs else
                                               r.failure()[len(what):]))
    ok, detail = same_outputs(runs, modes)
    j.emit(ok, "outputs identical", detail)
    key = "ipc_pair: cuIpcGetMemHandle of the cuMemAllocAsync buffer:"
    got = {m: next((ln[len(key):].strip() for ln in stdout_lines(runs[m]) if ln.startswith(key)), None) for m in modes}
    ok = got["native"] is not None and len(set(got.values())) == 1
    j.emit(ok, "cuMemAllocAsync memory's IPC handle as the driver's",
           " ".join(f"{m}={got[m] or 'missing'}" for m in modes)
           + ("" if ok else " (the driver refuses IPC on memory of the device's default async pool; drk must too)"))
    for m in ("drk", "noalloc"):
        r = runs[m]
        parent, why = own_report(r)
        child_pid = r.counts.get("child_pid") if isinstance(r.counts, dict) else None
        child, cwhy = own_report(r, child_pid) if child_pid else (None, f"{m}: no child pid in counts.json")
        probs = [w for w in (why, cwhy) if w]
        if not probs:
            opened = calls_named(child, "memory", "cuIpcOpenMemHandle")
            closed = calls_named(child, "memory", "cuIpcCloseMemHandle")
            got_h = calls_named(parent, "memory", "cuIpcGetMemHandle")
            if got_h < 2 or opened < 1 or closed < 1:
                probs.append(f"parent cuIpcGetMemHandle={got_h} (want 2), child cuIpcOpenMemHandle*={opened}, "
                             f"cuIpcCloseMemHandle={closed} (want >= 1)")
        j.emit(not probs, f"{m}: a report per process, IPC calls seen",
               "; ".join(probs) if probs else f"parent pid {r.pid}, child pid {child_pid}")
        for who, rep in (("parent", parent), ("child", child)):
            if rep is None:
                continue
            dp, why = pool_of(rep)
            if dp is None:
                j.emit(False, f"{m}: {who}'s device pool", why)
                continue
            if m == "drk":
                # Parent: its cuMemAlloc and cuMemAllocAsync buffers; child: none of its own.
                ok = dp["enabled"] is True and (who == "child" or dp["allocs"] >= 2) and not dp["bad_frees"]
                want = "enabled, allocs >= 2 (its two buffers), no bad frees" if who == "parent" else \
                    "enabled, no bad frees"
            else:
                ok = dp["enabled"] is False and dp["allocs"] == 0
                want = "DRK_ALLOC=0: enabled false, allocs 0 (the driver allocates)"
            j.emit(ok, f"{m}: {who}'s device pool", f"want {want}; " + pool_line(dp) + f", enabled={dp['enabled']}")
    j.emit(*disabled_invisible(runs["disabled"]))
    return j


def check_memcheck(d, name):
    """alloc_heavy under compute-sanitizer's memcheck, natively and with
    drk preloaded: exit 0 and "ERROR SUMMARY: 0 errors" both times."""
    j = Judge(name)
    modes = ("native", "drk")
    runs = {m: Run(os.path.join(d, m), m) for m in modes}
    for m in modes:
        r = runs[m]
        text = (r.stdout or b"").decode(errors="replace") + "\n" + r.stderr
        summary = [ln for ln in text.splitlines() if "ERROR SUMMARY:" in ln]
        clean = bool(summary) and summary[-1].split("ERROR SUMMARY:")[1].split()[0] == "0"
        ok = r.ran_ok() and clean
        if ok:
            detail = summary[-1].strip("= ").strip() + (f" in {r.wall:.1f} s" if r.wall is not None else "")
        else:
            errs = [ln.strip("= ").strip() for ln in text.splitlines()
                    if ln.startswith("=========") and ln.strip("= ").strip()
                    and not any(k in ln for k in ("COMPUTE-SANITIZER", "ERROR SUMMARY", "LEAK SUMMARY"))][:4]
            detail = (r.failure() if not r.ran_ok() else "exit 0") + \
                f"; {summary[-1].strip() if summary else 'no ERROR SUMMARY line'}" + \
                (f"; first lines: {short(' | '.join(errs), 400)}" if errs else "")
        j.emit(ok, f"memcheck {m}", detail)
    ok, detail = same_outputs(runs, modes, strip_prefix="=========")
    j.emit(ok, "outputs identical", detail)
    rep, why = own_report(runs["drk"])
    if rep is None:
        j.emit(False, "device pool served allocations", why)
    else:
        j.emit(*pool_served(rep, None, None))
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
    subs = {c: sub.add_parser(c) for c in ("workload", "routes", "frag", "ipc", "memcheck")}
    for p in subs.values():
        p.add_argument("dir")
        p.add_argument("--name")
        p.add_argument("--cupti-missing", default="", help="why no CUPTI counter ran: its checks fail with this")
    w = subs["workload"]
    w.add_argument("--losses", action="store_true", help="also compare the final losses (trainers)")
    w.add_argument("--min-pool-allocs", type=int, default=0, help="the device pool must serve at least this many")
    w.add_argument("--want-async", action="store_true", help="the program must reach cuMemAllocAsync")
    w.add_argument("--evolve", action="store_true", help="also judge the evolve mode (DRK_EVOLVE=1) against native")
    args = ap.parse_args()
    scope = args.name or ("routes" if args.cmd == "routes" else os.path.basename(os.path.normpath(args.dir)))
    try:
        if args.cmd == "workload":
            j = check_workload(args.dir, scope, args.losses, args.cupti_missing, args.min_pool_allocs,
                               args.want_async)
            if args.evolve:
                check_evolve(j, args.dir, args.losses)
        elif args.cmd == "routes":
            j = check_routes(args.dir)
        elif args.cmd == "frag":
            j = check_frag(args.dir, scope)
        elif args.cmd == "ipc":
            j = check_ipc(args.dir, scope)
        else:
            j = check_memcheck(args.dir, scope)
    except Exception as e:  # a bug here must still count as a failure
        import traceback
        traceback.print_exc(file=sys.stderr)
        print(f"FAIL {scope}: check.py: {type(e).__name__}: {e}", flush=True)
        return 1
    return 1 if j.failed else 0


if __name__ == "__main__":
    sys.exit(main())
