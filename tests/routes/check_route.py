#!/usr/bin/env python3
"""Runs a test program against the stand-in driver natively and under drk,
and checks that drk changed nothing and counted everything.

Usage: check_route.py --shim LIB --driver DIR MODE PROGRAM [ARGS...]
ARGS may contain {counts}, replaced by a file the program writes its own
counts to (the workload's JSON format)."""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from scratch import keep_if, scratch  # noqa: E402

FAILURES = []
keep_if(lambda: FAILURES)
DRK = None


def fail(msg):
    FAILURES.append(msg)
    print("FAIL:", msg)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


class Runner:
    def __init__(self, shim, driver, program, args, before=(), after=(), runtime=None):
        self.shim, self.driver, self.program, self.args = shim, driver, program, args
        # A sanitizer runtime must be first of all preloads.
        self.before, self.after = ([runtime] if runtime else []) + list(before), list(after)
        self.sanitized = bool(runtime)
        self.tmp = scratch("drk-route-")
        self.n = 0

    def forking(self, extra=None):
        """env_extra for a program that forks while drk's threads run. GCC
        12's AddressSanitizer does not hold its allocator's locks across a
        fork: a thread of drk's inside malloc at that moment leaves one held
        in the child, and LeakSanitizer's check at the child's exit then
        waits for it forever (route_fork hung so in CI, before and after
        2026-12-04's changes; one run in 1-10 here). glibc's malloc takes its
        locks around a fork, so programs without the sanitizer are not
        concerned; the child's leaks go unchecked, nothing else."""
        env = dict(extra or {})
        if self.sanitized:
            opts = os.environ.get("ASAN_OPTIONS", "")
            env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "detect_leaks=0"
        return env

    def run(self, drk, env_extra=None, expect_rc=0):
        """One run; returns (stdout, stderr, counts, reports dir)."""
        self.n += 1
        d = os.path.join(self.tmp, f"run{self.n}")
        os.makedirs(d)
        counts = os.path.join(d, "counts.json")
        reports = os.path.join(d, "reports")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k != "LD_PRELOAD"}
        env["LD_LIBRARY_PATH"] = self.driver
        preload = self.before + ([self.shim] if drk else []) + self.after
        if drk:
            env["DRK_CUDA_LIBRARY"] = os.path.join(self.driver, "libcuda.so.1")
            env["DRK_REPORT"] = reports + "/"
        if preload:
            env["LD_PRELOAD"] = " ".join(preload)
        env.update(env_extra or {})
        # drk asks the driver for primary contexts itself (its pool holds
        # one; a context ending is checked) unless it is off.
        if drk and env.get("DRK_DISABLE") != "1":
            env["ROUTE_DRK"] = "1"
        # drk's device pool serves memory calls unless drk or the pool is off.
        if drk and env.get("DRK_DISABLE") != "1" and env.get("DRK_ALLOC") != "0":
            env["ROUTE_POOL"] = "1"
        if drk and env.get("DRK_DISABLE") != "1" and env.get("DRK_HOST_ALLOC") != "0":
            env["ROUTE_HOST_POOL"] = "1"
        argv = [self.program] + [a.replace("{counts}", counts) for a in self.args]
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        label = f"{os.path.basename(self.program)} ({'drk' if drk else 'native'}{', ' + str(env_extra) if env_extra else ''})"
        if not check(p.returncode == expect_rc, f"{label} exited {p.returncode}, expected {expect_rc}\n{p.stdout}{p.stderr}"):
            pass
        c = None
        if os.path.exists(counts):
            with open(counts) as f:
                c = json.load(f)
        return p.stdout, p.stderr, c, reports

    def reports(self, d):
        out = []
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            with open(path) as f:
                out.append(json.load(f))
        return out


def drk_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("drk[")]


def compare_report(rep, counts, label):
    """Every count the program made must equal the report's."""
    check(rep.get("schema") == "drk-report" and rep.get("version") == 1, f"{label}: schema/version {rep.get('schema')} {rep.get('version')}")
    by_name = {}
    for fam, data in rep["calls"].items():
        check(data["total"] == sum(data["by_name"].values()), f"{label}: family {fam} total {data['total']} != sum of names")
        for name, n in data["by_name"].items():
            check(name not in by_name, f"{label}: {name} in two families")
            by_name[name] = n
    for name, n in counts["calls"].items():
        if name in by_name:
            check(by_name[name] == n, f"{label}: report counts {by_name[name]} calls of {name}, program made {n}")
    for name, n in by_name.items():
        if name not in counts["calls"]:
            check(n == 0, f"{label}: report counts {n} calls of {name}, program made none")
    k = rep["kernels"]
    listed = {e["name"]: e for e in k["list"]}
    for name, n in counts["kernels"].items():
        got = listed.get(name, {}).get("launches", 0)
        check(got == n, f"{label}: report has {got} launches of kernel {name}, program made {n}")
        e = listed.get(name)
        if e:
            check(sum(s["launches"] for s in e["shapes"]) + e["other_shape_launches"] == e["launches"],
                  f"{label}: shapes of {name} do not add up")
    check(k["launches"] == sum(counts["kernels"].values()), f"{label}: kernels.launches {k['launches']} != {sum(counts['kernels'].values())}")
    check(k["launches"] == sum(e["launches"] for e in k["list"]) + k["untracked_launches"], f"{label}: kernel list does not add up")
    check(k["failed_launches"] == counts["failed_launches"], f"{label}: failed launches {k['failed_launches']} != {counts['failed_launches']}")
    for kind, want in counts["memory"].items():
        got = rep["memory"][kind]
        for key in ("allocs", "bytes", "frees", "failed_frees"):
            check(got[key] == want[key], f"{label}: memory.{kind}.{key} is {got[key]}, program says {want[key]}")


def check_alloc_trace(paths, counts):
    """One trace, well formed, whose allocs and frees by kind are the
    program's own: 'a'/'f' cuMemAlloc(Pitch)/cuMemFree, 'A'/'F' async."""
    if not check(len(paths) == 1, f"DRK_ALLOC_TRACE wrote {len(paths)} files") or not counts:
        return
    lines = open(paths[0]).read().splitlines()
    check(lines and lines[0] == "# drk-alloc-trace 1", f"trace header {lines[:1]}")
    ops = [ln.split(" ") for ln in lines if not ln.startswith("#")]
    by = {k: sum(1 for o in ops if o[1] == k) for k in "aAfF"}
    mem = counts["memory"]
    want = {"a": mem["device"]["allocs"] + mem["pitch"]["allocs"], "A": mem["async"]["allocs"] + mem["pool_async"]["allocs"],
            "f": mem["device"]["frees"], "F": mem["async"]["frees"]}
    check(by == want, f"trace ops {by}, the program made {want}")
    times = [int(o[0]) for o in ops]
    check(times == sorted(times), "trace times go backwards")
    replay = subprocess.run([DRK, "trace", "replay", "--json", paths[0]], capture_output=True, text=True)
    check(replay.returncode == 0, f"drk trace replay failed: {replay.stderr}")


def check_facts(rep, ptx_image=True):
    """Every launched kernel has the driver's layout; with ptx_image, vec_add's
    PTX image was read too, and its layout is the driver's."""
    k = rep["kernels"]
    facts = k["facts"]
    check(facts["device_sm"] == 90, f"facts.device_sm {facts['device_sm']}, the stand-in is sm_90")
    launched = [x for x in k["list"] if x["launches"]]
    check(facts["launched_kernels"] == len(launched), f"facts.launched_kernels {facts['launched_kernels']} != {len(launched)}")
    check(facts["with_layout"] == len(launched), f"launched kernels without a layout: {facts}")
    if not ptx_image:
        return
    check(facts["images"]["read"] >= 1, f"no image read: {facts['images']}")
    e = {x["name"]: x for x in k["list"]}.get("vec_add")
    if not check(e is not None, "vec_add not in the report"):
        return
    img, drv = e["image"], e["driver"]
    if check(img is not None, "vec_add has no image facts"):
        check(img["from"].startswith("cuModuleLoadData"), f"vec_add's image came from {img['from']}")
        check([(p["offset"], p["size"]) for p in img["params"]] == [(0, 8), (8, 8), (16, 8), (24, 4)],
              f"vec_add's image layout {img['params']}")
        check([p["kind"] for p in img["params"]] == ["pointer"] * 3 + ["scalar"], f"vec_add's kinds {img['params']}")
        check(img["layout_source"] == "ptx" and img["ptx"] == [{"arch": 90, "isa": "8.8"}] and img["ptx_for_device"],
              f"vec_add's PTX facts {img}")
    if check(drv is not None and drv["params"] is not None, f"vec_add has no driver layout: {drv}"):
        check([(p["offset"], p["size"]) for p in drv["params"]] == [(0, 8), (8, 8), (16, 8), (24, 4)],
              f"vec_add's driver layout {drv['params']}")
    check(e["params_match"] is True, f"vec_add params_match {e['params_match']}")
    check(facts["layout_differs_from_driver"] == 0, f"layouts differ: {facts}")


def one_report(r, d, label):
    reps = r.reports(d)
    check(len(reps) == 1, f"{label}: {len(reps)} reports in {d}, expected 1")
    return reps[0] if reps else None


def mode_workload(r, owners):
    out0, err0, counts0, _ = r.run(False)
    check(counts0 is not None, "native run wrote no counts")
    env = {"ROUTE_EXPECT_OWNER": "drk"} if owners else None
    out1, err1, counts1, rep_dir = r.run(True, env)
    check(out1 == out0, f"output under drk differs from native:\n--- native\n{out0}--- drk\n{out1}")
    check(counts1 == counts0, "the program's own counts differ under drk")
    check(not drk_lines(err1), f"drk logged at the default level: {drk_lines(err1)}")
    rep = one_report(r, rep_dir, "drk")
    if rep and counts1:
        compare_report(rep, counts1, "drk")
        check(rep["process"]["forked_from"] == 0, "forked_from set in a process that did not fork")
        check(rep["driver"]["path"] and rep["driver"]["path"].endswith("libcuda.so.1"), f"driver path {rep['driver']['path']}")
        check(rep["driver"]["version"] == 13000, f"driver version {rep['driver']['version']}, the stand-in says 13000")
        check_facts(rep)
    env = {"DRK_DISABLE": "1"}
    if owners:
        env["ROUTE_EXPECT_OWNER"] = "driver"
    out2, err2, _, rep_dir2 = r.run(True, env)
    check(out2 == out0, f"output under DRK_DISABLE=1 differs from native:\n{out2}")
    check(not os.path.exists(rep_dir2) or not os.listdir(rep_dir2), "DRK_DISABLE=1 wrote a report")
    check(not drk_lines(err2), f"DRK_DISABLE=1 logged: {drk_lines(err2)}")
    # Hooks that only forward (DRK_OBSERVE=0): same results, a report with zero counts.
    out3, _, _, rep_dir3 = r.run(True, {"DRK_OBSERVE": "0"})
    check(out3 == out0, "output under DRK_OBSERVE=0 differs from native")
    rep3 = one_report(r, rep_dir3, "observe=0")
    if rep3:
        check(all(f["total"] == 0 for f in rep3["calls"].values()) and rep3["kernels"]["launches"] == 0,
              "DRK_OBSERVE=0 still counted calls")
    # DRK_ALLOC_TRACE: every device allocation and free, in a trace whose
    # ops match the program's own counts and replay without an error.
    trace = os.path.join(r.tmp, "alloc-%p.trace")
    out5, err5, counts5, _ = r.run(True, {"DRK_ALLOC_TRACE": trace})
    check(out5 == out0, "output under DRK_ALLOC_TRACE differs from native")
    check_alloc_trace(glob.glob(trace.replace("%p", "*")), counts5)
    # DRK_ALLOC=0, DRK_HOST_ALLOC=0: the driver allocates, and sees every memory call.
    out6, err6, _, _ = r.run(True, {"DRK_ALLOC": "0", "DRK_HOST_ALLOC": "0"})
    check(out6 == out0, f"output under DRK_ALLOC=0 differs from native:\n{out6}{err6}")
    # DRK_IMAGES=0: no image is read; the driver's answers remain.
    out4, _, _, rep_dir4 = r.run(True, {"DRK_IMAGES": "0"})
    check(out4 == out0, "output under DRK_IMAGES=0 differs from native")
    rep4 = one_report(r, rep_dir4, "images=0")
    if rep4:
        f = rep4["kernels"]["facts"]
        e = {x["name"]: x for x in rep4["kernels"]["list"]}.get("vec_add", {})
        check(f["images"]["loads"] == 0 and e.get("image", 1) is None and e.get("driver"),
              f"DRK_IMAGES=0: images {f['images']}, vec_add image {e.get('image')}, driver {e.get('driver')}")


def mode_counts(r):
    out0, _, counts0, _ = r.run(False)
    out1, err1, counts1, rep_dir = r.run(True)
    check(out1 == out0, f"output under drk differs:\n{out0}\n{out1}")
    check(not drk_lines(err1), f"drk logged: {drk_lines(err1)}")
    rep = one_report(r, rep_dir, "drk")
    if rep and counts1:
        compare_report(rep, counts1, "drk")
        check(rep["driver"]["version"] == 13000, f"driver version {rep['driver']['version']}, the stand-in says 13000")
        check_facts(rep, ptx_image=False)


def mode_fork(r):
    out, _, _, rep_dir = r.run(True, r.forking())
    m = re.search(r"parent (\d+) child (\d+) launches (\d+) (\d+)", out)
    if not check(m, f"unexpected output {out!r}"):
        return
    parent, child, n_parent, n_child = map(int, m.groups())
    reps = {rep["process"]["pid"]: rep for rep in r.reports(rep_dir)}
    check(set(reps) == {parent, child}, f"reports for pids {sorted(reps)}, expected {parent} and {child}")
    if parent in reps:
        check(reps[parent]["kernels"]["launches"] == n_parent, f"parent report: {reps[parent]['kernels']['launches']} launches, expected {n_parent}")
        check(reps[parent]["process"]["forked_from"] == 0, "parent has forked_from set")
    if child in reps:
        check(reps[child]["kernels"]["launches"] == n_child, f"child report: {reps[child]['kernels']['launches']} launches, expected {n_child}")
        check(reps[child]["process"]["forked_from"] == parent, f"child forked_from {reps[child]['process']['forked_from']}, expected {parent}")


def mode_badopts(r):
    out0, _, counts0, _ = r.run(False)
    bad = {"DRK_LOG_LEVEL": "loud", "DRK_OBSERVE": "maybe", "DRK_DISABLE": "perhaps"}
    out1, err1, _, rep_dir = r.run(True, bad)
    check(out1 == out0, "bad option values changed the program's output")
    lines = drk_lines(err1)
    for var, val in bad.items():
        hits = [l for l in lines if f"{var}={val}" in l]
        check(len(hits) == 1, f"expected one warning naming {var}={val}, got {hits}")
        if hits:
            check(re.match(r"drk\[\d+:\d+\] warn: ", hits[0]) and "using" in hits[0], f"warning badly formed: {hits[0]}")
    rep = one_report(r, rep_dir, "bad options")
    if rep and counts0:
        compare_report(rep, counts0, "bad options")
        check(rep["options"]["DRK_LOG_LEVEL"] == "warn" and rep["options"]["DRK_OBSERVE"] == "1", f"options used: {rep['options']}")
    # A driver path that does not exist: drk says so once and uses the default
    # (the stand-in, found through LD_LIBRARY_PATH), changing nothing.
    out_d, err_d, _, rep_dir_d = r.run(True, {"DRK_CUDA_LIBRARY": "/nonexistent/libcuda.so.1"})
    check(out_d == out0, "a wrong DRK_CUDA_LIBRARY changed the program's output")
    hits = [l for l in drk_lines(err_d) if "DRK_CUDA_LIBRARY=/nonexistent/libcuda.so.1" in l]
    check(len(hits) == 1 and "using libcuda.so.1" in hits[0], f"expected one warning about DRK_CUDA_LIBRARY, got {drk_lines(err_d)}")
    rep_d = one_report(r, rep_dir_d, "wrong driver path")
    if rep_d and counts0:
        compare_report(rep_d, counts0, "wrong driver path")
    # A log file, at info level: lines go there, not to stderr.
    log = os.path.join(r.tmp, "drk.log")
    _, err2, _, _ = r.run(True, {"DRK_LOG_FILE": log, "DRK_LOG_LEVEL": "info"})
    check(not drk_lines(err2), f"DRK_LOG_FILE set, yet drk wrote to stderr: {drk_lines(err2)}")
    text = open(log).read() if os.path.exists(log) else ""
    check(re.search(r"^drk\[\d+:\d+\] info: .*report written to ", text, re.M), f"log file lacks the report line:\n{text}")


def mode_same(r, expect, launches):
    """The program's output is the same natively and under drk, and matches;
    with `launches`, the report counts that many."""
    out0, err0, _, _ = r.run(False)
    out1, err1, _, rep_dir = r.run(True)
    check(out1 == out0, f"output differs: native {out0!r} drk {out1!r}\n{err1}")
    check(re.search(expect, out1), f"output {out1!r} does not match {expect!r}")
    if launches is not None:
        rep = one_report(r, rep_dir, "drk")
        if rep:
            check(rep["kernels"]["launches"] == launches, f"report has {rep['kernels']['launches']} launches, expected {launches}")


def mode_private(r):
    """A launched kernel whose image no load brought in gets its facts from
    the program's own fatbin section."""
    out0, _, _, _ = r.run(False)
    out1, err1, _, rep_dir = r.run(True)
    check(out1 == out0 and out0.startswith("ok "), f"outputs: native {out0!r} drk {out1!r}")
    check(not drk_lines(err1), f"drk logged at the default level: {drk_lines(err1)}")
    rep = one_report(r, rep_dir, "drk")
    if not rep:
        return
    k = rep["kernels"]
    e = {x["name"]: x for x in k["list"]}.get("drk_private_scale")
    if not check(e is not None and e["launches"] == 5, f"drk_private_scale launches: {e and e['launches']}"):
        return
    img = e["image"]
    if check(img is not None, "drk_private_scale has no image facts"):
        check(os.path.realpath(img["from"]) == os.path.realpath(r.program), f"facts from {img['from']}")
        check([(p["offset"], p["size"]) for p in img["params"]] == [(0, 8), (8, 4), (12, 4)],
              f"layout {img['params']}")
        check(img["layout_source"] == "sass" and img["sass"] == [90] and img["registers"] is not None,
              f"SASS facts {img}")
    check(e["params_match"] is True, f"params_match {e['params_match']}")
    check(k["facts"]["images"]["objects_read"] >= 1, f"images {k['facts']['images']}")


def mode_pool(r):
    """drk's device pool: every answer the program sees is the driver's, the
    report says the pool served it, and a fragmenting live set that fits
    completes with the defaults but not when pages may not move."""
    out0, err0, _, _ = r.run(False, None)
    out1, err1, _, rep_dir = r.run(True)
    check(out1 == out0 and "threads ok" in out0, f"basic: native {out0!r} drk {out1!r}\n{err1}")
    check(not drk_lines(err1), f"drk logged at the default level: {drk_lines(err1)}")
    rep = one_report(r, rep_dir, "drk")
    if rep:
        p = rep.get("device_pool", {})
        # sizes 10 + 1, queries 2, async 6, threads 8 x (300 + ...) allocations.
        check(p.get("enabled") is True and p.get("allocs", 0) >= 2400, f"device_pool: {p}")
        check(p.get("bad_frees") == 2, f"bad frees {p.get('bad_frees')}, expected 2 (interior, double)")
        check(p.get("live_bytes") == 0 and p.get("frees") == p.get("allocs"), f"live at exit: {p}")
        check(p.get("peak_reserved_bytes", 0) >= p.get("peak_live_bytes", 1), f"reserved below live: {p}")
    out2, err2, _, rep_dir2 = r.run(True, {"DRK_ALLOC": "0"})
    check(out2 == out0, f"DRK_ALLOC=0: {out2!r}\n{err2}")
    rep2 = one_report(r, rep_dir2, "DRK_ALLOC=0")
    if rep2:
        check(rep2["device_pool"]["enabled"] is False and rep2["device_pool"]["allocs"] == 0,
              f"DRK_ALLOC=0 pool: {rep2['device_pool']}")
    out3, err3, _, _ = r.run(True, {"DRK_ALLOC_SYNC_FREE": "1"})
    check(out3 == out0, f"DRK_ALLOC_SYNC_FREE=1: {out3!r}\n{err3}")
    r.args = ["frag"]
    f0, _, _, _ = r.run(False)
    check(f0 == "frag completed\n", f"frag natively: {f0!r}")
    f1, ferr1, _, frep = r.run(True)
    check(f1 == "frag completed\n", f"frag under drk: {f1!r}\n{ferr1}")
    rep = one_report(r, frep, "frag")
    if rep:
        p = rep["device_pool"]
        # Peak live is 96 MiB; the reserve (5% of 128 MiB: 3 pages) and one
        # page per boundary are what reserved may exceed it by.
        check(p["peak_reserved_bytes"] <= p["peak_live_bytes"] + (8 << 20), f"frag: reserved {p['peak_reserved_bytes']} for live {p['peak_live_bytes']}")
        check(p["pages_moved"] > 0 and p["defrag_events"] > 0, f"frag: no page moved: {p}")
        # One shard: its peak live is exact (48 blocks of 2 MiB).
        check(p["peak_live_bytes"] == 96 << 20, f"frag: peak live {p['peak_live_bytes']}, expected {96 << 20}")
    f2, ferr2, _, frep2 = r.run(True, {"DRK_DEFRAG": "0"})
    check(f2 == "frag out of memory\n", f"frag with DRK_DEFRAG=0: {f2!r}\n{ferr2}")
    rep = one_report(r, frep2, "frag, DRK_DEFRAG=0")
    if rep:
        p = rep["device_pool"]
        check(p["out_of_memory"] == 1 and p["pages_moved"] == 0, f"frag, DRK_DEFRAG=0: {p}")
    # drk_alloc_switch, found with dlsym: off, new allocations are the driver's and the pool's stay its own.
    r.args = ["switch"]
    w0, _, _, _ = r.run(False)
    check(w0 == "no drk_alloc_switch\n", f"switch natively: {w0!r}")
    w1, werr1, _, wrep = r.run(True)
    want = ("on: pool (switch was 1)\noff: switch was 1\noff: driver, async driver; the pool's block still pool\n"
            "on: switch was 0\non: pool, async pool\nswitch ok\n")
    check(w1 == want, f"switch under drk: {w1!r}\n{werr1}")
    rep = one_report(r, wrep, "switch")
    if rep:
        p = rep["device_pool"]
        check(p["switched_off_allocs"] == 2 and p["bad_frees"] == 1 and p["live_bytes"] == 0,
              f"switch: device_pool {p}")
    w2, werr2, _, _ = r.run(True, {"DRK_ALLOC": "0"})
    check(w2.startswith("on: driver (switch was -1)"), f"switch with DRK_ALLOC=0: {w2!r}\n{werr2}")
    # Threads on cuMemAlloc alone: with a page taking 2 ms to create, the
    # threads' first allocations (a new page each) queue on the shared
    # shard's lock, so some threads get shards of their own; every block
    # keeps its bytes and every free is served, neighbours' frees included.
    r.args = ["tsplit"]
    t0, _, _, _ = r.run(False)
    check(t0 == "tsplit ok\n", f"tsplit natively: {t0!r}")
    t1, terr1, _, trep = r.run(True, {"FAKECUDA_VMM_COSTS": "2000,0,0,0,0"})
    check(t1 == t0, f"tsplit under drk: {t1!r}\n{terr1}")
    rep = one_report(r, trep, "tsplit")
    if rep:
        p = rep["device_pool"]
        own = [s for s in p["streams"] if s.get("thread")]
        check(p["thread_shards"] >= 1 and len(own) == p["thread_shards"] and all(s["allocs"] > 0 for s in own),
              f"tsplit: no thread took a shard of its own: thread_shards {p['thread_shards']}, shards {p['streams']}")
        check(p["live_bytes"] == 0 and p["frees"] == p["allocs"] == 8 * 400 and p["bad_frees"] == 0,
              f"tsplit: device_pool {p}")
    # Growth ahead of demand, with page making as slow as an H200's: a
    # program that grows between other work finds pages made ahead (and its
    # calls make fewer than with DRK_ALLOC_GROW=0), in the parent and in a
    # forked child alike; a process that exits while the grower is busy
    # ends at once, its report written.
    r.args = ["grow"]
    g0, _, _, _ = r.run(False)
    check(g0 == "grow ok\n", f"grow natively: {g0!r}")
    runs = {}
    for on in ("1", "0"):
        t = time.monotonic()
        g1, gerr1, _, grep_dir = r.run(True, r.forking({"FAKECUDA_VMM_COSTS": "h200", "DRK_ALLOC_GROW": on}))
        took = time.monotonic() - t
        check(g1 == g0, f"grow, DRK_ALLOC_GROW={on}: {g1!r}\n{gerr1}")
        check(took < 10, f"grow, DRK_ALLOC_GROW={on}: took {took:.1f} s")
        reps = sorted(r.reports(grep_dir), key=lambda x: x["process"]["forked_from"])
        check(len(reps) == 2, f"grow: {len(reps)} reports, expected the parent's and the child's")
        runs[on] = [x["device_pool"] for x in reps]
    if len(runs.get("1", [])) == 2 and len(runs.get("0", [])) == 2:
        for who, on, off in zip(("parent", "child"), runs["1"], runs["0"]):
            check(on["pages_taken_ahead"] > 0 and on["pages_made_ahead"] >= on["pages_taken_ahead"],
                  f"grow, {who}: no page made ahead was taken: {on}")
            check(on["pages_created_in_calls"] < off["pages_created_in_calls"] and off["pages_made_ahead"] == 0,
                  f"grow, {who}: calls made {on['pages_created_in_calls']} pages with the grower, "
                  f"{off['pages_created_in_calls']} without; without it {off['pages_made_ahead']} made ahead")
            check(on["pages_created"] == on["pages_created_in_calls"] + on["pages_made_ahead"],
                  f"grow, {who}: pages_created {on['pages_created']}")
            # One thread allocates: waits for the grower are no contention.
            check(on["thread_shards"] == 0, f"grow, {who}: a single-threaded program took "
                                             f"{on['thread_shards']} thread shard(s) with the grower on")
    # Runs: pages made and moved a driver handle of several pages at a time;
    # DRK_ALLOC_RUN_PAGES=1 makes every handle one page, with the same
    # answers.
    r.args = ["runs"]
    u0, _, _, _ = r.run(False)
    check(u0 == "runs ok\n", f"runs natively: {u0!r}")
    for n in ("64", "1"):
        u1, uerr1, _, urep = r.run(True, {"DRK_ALLOC_RUN_PAGES": n})
        check(u1 == u0, f"runs, DRK_ALLOC_RUN_PAGES={n}: {u1!r}\n{uerr1}")
        rep = one_report(r, urep, "runs")
        if not rep:
            continue
        p = rep["device_pool"]
        made, moved = (p["handles_created"], p["pages_created"]), (p["handles_moved"], p["pages_moved"])
        ok = moved[1] > 0 and p["bad_frees"] == 0 and p["out_of_memory"] == 0
        ok = ok and (made[0] == made[1] and moved[0] == moved[1] if n == "1" else
                     made[0] * 4 < made[1] and moved[0] * 4 < moved[1])
        check(ok, f"runs, DRK_ALLOC_RUN_PAGES={n}: handles made/pages {made}, moved {moved}: {p}")
    # Contexts ending under the pools: the same answers, and both pools
    # followed (the host pool's chunk was pinned in the created context).
    r.args = ["reset"]
    c0, cerr0, _, _ = r.run(False)
    check(c0.endswith("reset ok\n"), f"reset natively: {c0!r}\n{cerr0}")
    c1, cerr1, _, crep = r.run(True)
    check(c1 == c0, f"reset under drk: {c1!r}, natively {c0!r}\n{cerr1}")
    rep = one_report(r, crep, "reset")
    if rep:
        p, h = rep["device_pool"], rep["host_pool"]
        check(p["contexts_ended"] == 2 and p["allocs"] >= 4 and p["bad_frees"] == 0,
              f"reset: device_pool {p}")
        check(h["contexts_ended"] == 1 and h["allocs"] == 1, f"reset: host_pool {h}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--owners", action="store_true", help="check which object each resolved pointer is in")
    ap.add_argument("--preload-before", action="append", default=[], help="preloaded before drk (and natively)")
    ap.add_argument("--preload-after", action="append", default=[], help="preloaded after drk (and natively)")
    ap.add_argument("--sanitizer-runtime", help="preloaded first in every run (sanitizer builds)")
    ap.add_argument("--drk", help="the drk command, to replay recorded traces")
    ap.add_argument("--expect", default="ok", help="same mode: a regex the output must match")
    ap.add_argument("--launches", type=int, help="same mode: launches the report must count")
    ap.add_argument("mode", choices=["workload", "counts", "fork", "badopts", "same", "private", "pool"])
    ap.add_argument("program")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    global DRK
    DRK = a.drk
    r = Runner(a.shim, a.driver, a.program, a.args, a.preload_before, a.preload_after, a.sanitizer_runtime)
    {"workload": lambda: mode_workload(r, a.owners), "counts": lambda: mode_counts(r), "fork": lambda: mode_fork(r),
     "badopts": lambda: mode_badopts(r), "same": lambda: mode_same(r, a.expect, a.launches),
     "private": lambda: mode_private(r), "pool": lambda: mode_pool(r)}[a.mode]()
    print(f"{'FAILED' if FAILURES else 'passed'}: {a.mode} {os.path.basename(a.program)}")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
