#!/usr/bin/env python3
"""CPU-side test of the GPU suite's logic (no GPU needed; run by ctest).

It runs run.sh end to end against a fabricated build directory whose
"programs" are Python stand-ins: each prints an output, writes its counts,
a CUPTI-counter file and (under "drk", i.e. LD_PRELOAD set without
DRK_DISABLE=1) a drk report, like the real ones. With no fault injected every
check must pass; each injected fault (FAKE_FAULT) must fail exactly the checks
it should, with the numbers in the message. The routes, trainer-loss and
memory checks (alloc_frag, ipc_pair, memcheck, the device pool's report) are
fed fabricated run directories through check.py directly.
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# The device pool's report object as a fake or fabricated report has it.
POOL = {"enabled": True, "allocs": 3, "frees": 3, "failed_allocs": 0, "bad_frees": 0, "driver_allocs": 0,
        "live_bytes": 0, "peak_live_bytes": 3 << 20, "reserved_bytes": 4 << 20, "peak_reserved_bytes": 4 << 20,
        "pages_created": 2, "pages_released": 0, "pages_moved": 0, "defrag_events": 0, "out_of_memory": 0}

FAKE_PROGRAM = r'''#!PYTHON
import json, os, sys
name = os.path.basename(sys.argv[0])
fault = os.environ.get("FAKE_FAULT", "")
if not os.environ.get("LD_PRELOAD"):
    mode = "native"
elif os.environ.get("DRK_DISABLE") == "1":
    mode = "disabled"
else:
    mode = "drk"
pid = os.getpid()
kern = "drk_" + name
n = 30
failed = 1 if name == "drv_vecadd" else 0
api = {"cuLaunchKernel": n + failed}
if fault == "crash" and mode == "drk":
    print("fake: crashed", file=sys.stderr)
    sys.exit(3)
print("checksum 0123456789abcdef")
print("launches", n)
if fault == "stdout" and mode == "drk":
    print("one more line")
counts = {"workload": name, "pid": pid, "kernels": {kern: n}, "failed_launches": failed}
if name == "drv_vecadd":
    counts["by_api"] = api
with open(os.environ["DRK_TEST_COUNTS"], "w") as f:
    json.dump(counts, f)

extra = 1 if fault == "cupti_extra" and mode == "drk" else 0
out = os.environ.get("DRK_TEST_CUPTI_OUT")
if out:
    cupti = {"pid": pid, "enabled": True, "error": None, "total": n + failed + extra,
             "ok": n + extra, "failed": failed,
             "by_api": {"cuLaunchKernel": n + failed + extra, "cuLaunchKernelEx": 0},
             "by_api_ok": {"cuLaunchKernel": n + extra}, "by_api_failed": {"cuLaunchKernel": failed},
             "by_kernel": {kern: n + failed + extra}, "by_kernel_ok": {kern: n + extra},
             "by_kernel_failed": {kern: failed} if failed else {},
             "name_source": {"cupti": n + failed + extra, "cuFuncGetName": 0, "cuKernelGetName": 0, "none": 0},
             "memory": {"by_api": {"cuMemAlloc_v2": 3 if mode != "drk" else 0},
                        "by_api_ok": {"cuMemAlloc_v2": 3 if mode != "drk" else 0}, "by_api_failed": {}}}
    with open(out.replace("%p", str(pid)), "w") as f:
        json.dump(cupti, f)

image = {"from": "cuLibraryLoadData #1", "layout_source": "sass", "source_arch": 90,
         "params": [{"offset": 0, "size": 8, "kind": "pointer"},
                    {"offset": 8, "size": 8 if fault != "layout" else 4, "kind": "scalar"}],
         "params_size": 16, "registers": 16 if fault != "registers" else 17, "shared_bytes": 0, "local_bytes": 0,
         "const_bytes": 400, "max_threads": 0, "reqntid": [0, 0, 0], "sass": [90], "ptx": [{"arch": 90, "isa": "9.0"}],
         "ptx_for_device": True}
driver = {"params": [{"offset": 0, "size": 8}, {"offset": 8, "size": 8}], "registers": 16, "shared_bytes": 0,
          "local_bytes": 0, "const_bytes": 400, "max_threads": 1024, "ptx_version": 90, "binary_version": 90}

POOL = json.loads(r"""POOL_JSON""")

def report(dir_):
    os.makedirs(dir_, exist_ok=True)
    k = n + (2 if fault == "report_kernel" else 0)
    doc = {"schema": "drk-report", "version": 1, "drk_version": "0.1.0",
           "process": {"pid": pid, "forked_from": 0, "program": name},
           "driver": {"library": "libcuda.so.1", "path": "/usr/lib/libcuda.so.1", "version": 13000},
           "calls": {"launch": {"total": n + failed,
                                "by_name": {"cuLaunchKernel": n + failed, "cuLaunchKernelEx": 0}},
                     "entry": {"total": 0, "by_name": {"cuGetProcAddress_v2": 0}}},
           "memory": {"device": {"allocs": 3, "failed": 0, "bytes": 3 << 20, "frees": 3}},
           "device_pool": dict(POOL, enabled=fault != "pool_off", bad_frees=1 if fault == "bad_free" else 0),
           "kernels": {"launches": n, "failed_launches": failed, "untracked_launches": 0, "distinct": 1,
                       "list": [{"name": kern, "handles": 1, "launches": k, "shapes": [],
                                 "other_shape_launches": 0, "image": image, "driver": driver,
                                 "params_match": fault != "layout"}],
                       "facts": {"device_sm": 90, "device_reserved_shared_bytes": 1024, "images": {"loads": 1, "read": 1, "failed": 0, "kernels": 1,
                                                             "read_us": 120}}}}
    with open(os.path.join(dir_, "drk-%s-%d.json" % (name, pid)), "w") as f:
        json.dump(doc, f)

if mode == "drk" and fault != "no_report":
    report(os.environ["DRK_REPORT"])
if mode == "disabled" and fault == "disabled_report":
    report(os.environ["DRK_REPORT"])
if mode == "disabled" and fault == "disabled_log":
    print("drk[%d:%d] warn: something" % (pid, pid), file=sys.stderr)
'''


def libc_path():
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if re.search(r"/libc[.-][^/]*so", path):
                return path
    raise SystemExit("selftest: cannot find libc in /proc/self/maps")


def make_build(root):
    """A build directory run.sh accepts: a harmless library as the shim (libc,
    already loaded by everything), an empty counter, fake programs."""
    os.makedirs(os.path.join(root, "lib"))
    os.symlink(libc_path(), os.path.join(root, "lib", "libdrk_shim.so"))
    progs = os.path.join(root, "tests", "gpu")
    os.makedirs(progs)
    open(os.path.join(progs, "libdrk_test_cupti_count.so"), "w").close()
    for name in ("rt_vecadd", "drv_vecadd"):
        p = os.path.join(progs, name)
        with open(p, "w") as f:
            f.write(FAKE_PROGRAM.replace("PYTHON", sys.executable, 1).replace("POOL_JSON", json.dumps(POOL)))
        os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


failures = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run_suite(build, fault, tmp):
    env = dict(os.environ, FAKE_FAULT=fault, TMPDIR=tmp, PYTHON=sys.executable, DRK_GPU_EVOLVE="0",
               DRK_GPU_CUPTI_LIB=os.path.join(tmp, "libcupti.so.13"))
    env.pop("OUT", None)
    p = subprocess.run(["bash", os.path.join(HERE, "run.sh"), build, "rt_vecadd", "drv_vecadd"],
                       env=env, capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    return p.returncode, lines


def verdicts(lines):
    return {ln.split(":", 2)[0] + ":" + ln.split(":", 2)[1]: ln for ln in lines if ln.startswith(("PASS", "FAIL"))}


def test_run_sh(tmp):
    build = os.path.join(tmp, "build")
    make_build(build)
    open(os.path.join(tmp, "libcupti.so.13"), "w").close()  # only needs to exist

    rc, lines = run_suite(build, "", tmp)
    fails = [ln for ln in lines if ln.startswith("FAIL")]
    n_pass = sum(ln.startswith("PASS") for ln in lines)
    expect(rc == 0 and not fails, f"no fault: all pass (rc={rc}, failures: {fails[:3]})")
    expect(lines and lines[-1] == f"{n_pass} passed, 0 failed", f"last line is the tally: {lines[-1:]}")
    expect(n_pass >= 2 * 14, f"each workload made all its checks ({n_pass} PASS lines)")
    expect(any("every launched kernel known" in ln and "PTX usable on sm_90: 1/1" in ln for ln in lines),
           "the PTX fraction is printed")
    expect(any("program's own counts" in ln and "failed=1" in ln for ln in lines),
           "drv_vecadd's own counts include its refused launch")
    expect(any("device pool served allocations" in ln and "device_pool allocs=3" in ln
               and "native CUPTI: cuMemAlloc_v2=3" in ln and "reached the driver under drk: 0" in ln for ln in lines),
           "the pool line shows the pool's, the hooks' and CUPTI's counts")

    def failed_checks(fault):
        rc, lines = run_suite(build, fault, tmp)
        fails = [ln for ln in lines if ln.startswith("FAIL")]
        n_fail = len(fails)
        expect(rc != 0, f"{fault}: exit status non-zero (rc={rc})")
        expect(lines and lines[-1].endswith(f" {n_fail} failed"), f"{fault}: tally counts {n_fail} failures")
        return fails

    fails = failed_checks("cupti_extra")
    names = {f.split(": ")[1] for f in fails if f.startswith("FAIL rt_vecadd")}
    expect(names == {"launch calls == CUPTI", "launches + failed == CUPTI", "per-API calls == CUPTI",
                     "per-kernel launches == CUPTI", "program's own counts",
                     "CUPTI native == drk == disabled"}, f"cupti_extra fails the count checks: {sorted(names)}")
    expect(any("calls.launch.total=30 CUPTI total=31" in f for f in fails), "cupti_extra: message has the numbers")
    expect(any("total native=30 drk=31 disabled=30" in f for f in fails), "cupti_extra: cross-mode totals shown")

    fails = failed_checks("stdout")
    expect(any("outputs identical" in f and "drk differs from native at line 3" in f for f in fails),
           f"stdout: the differing line is named: {fails[:1]}")
    expect(all("outputs identical" in f for f in fails), "stdout: nothing else fails")

    fails = failed_checks("report_kernel")
    expect(any("per-kernel launches == CUPTI" in f and "drk=32 cupti=30" in f for f in fails),
           f"report_kernel: per-kernel numbers shown: {fails[:1]}")

    fails = failed_checks("layout")
    names = {f.split(": ")[1] for f in fails}
    expect(names == {"every launched kernel known"} and any("1 misses" in f and "(8, 4)" in f for f in fails),
           f"layout: only the kernel check fails, showing both layouts: {fails[:1]}")
    fails = failed_checks("registers")
    expect({f.split(": ")[1] for f in fails} == {"image resources == driver's"}
           and any("registers image=17 driver=16" in f for f in fails), f"registers: caught: {fails[:1]}")

    fails = failed_checks("no_report")
    expect(any("one report per process" in f and "0 reports" in f for f in fails), "no_report: caught")

    fails = failed_checks("disabled_report")
    expect(any("DRK_DISABLE=1 leaves no trace" in f and "report file" in f for f in fails),
           "disabled_report: caught")
    fails = failed_checks("disabled_log")
    expect(any("DRK_DISABLE=1 leaves no trace" in f and "drk[ line" in f for f in fails), "disabled_log: caught")

    fails = failed_checks("pool_off")
    expect({f.split(": ")[1] for f in fails} == {"device pool served allocations"}
           and any("enabled=False" in f and "served none" not in f for f in fails),
           f"pool_off: only the pool check fails, saying the pool is off: {fails[:1]}")
    fails = failed_checks("bad_free")
    expect({f.split(": ")[1] for f in fails} == {"device pool served allocations"}
           and any("device_pool.bad_frees=1" in f for f in fails), f"bad_free: caught: {fails[:1]}")

    fails = failed_checks("crash")
    expect(any("run drk" in f and "exit 3" in f and "fake: crashed" in f for f in fails),
           f"crash: exit status and stderr shown: {fails[:1]}")

    # No CUPTI library: every CUPTI-based check fails, saying why.
    env = dict(os.environ, TMPDIR=tmp, PYTHON=sys.executable, DRK_GPU_EVOLVE="0", DRK_GPU_CUPTI_LIB=os.path.join(tmp, "nonexistent.so"))
    p = subprocess.run(["bash", os.path.join(HERE, "run.sh"), build, "rt_vecadd"], env=env,
                       capture_output=True, text=True, timeout=120)
    fails = [ln for ln in p.stdout.splitlines() if ln.startswith("FAIL")]
    expect(p.returncode != 0 and any("preflight: CUPTI counter" in f for f in fails)
           and any("launch calls == CUPTI" in f and "no CUPTI counter" in f for f in fails),
           "no libcupti: the CUPTI checks fail with the reason")

    # $OUT: a summary and one archive.
    out = os.path.join(tmp, "out")
    env = dict(os.environ, TMPDIR=tmp, OUT=out, PYTHON=sys.executable, DRK_GPU_EVOLVE="0",
               DRK_GPU_CUPTI_LIB=os.path.join(tmp, "libcupti.so.13"))
    p = subprocess.run(["bash", os.path.join(HERE, "run.sh"), build, "rt_vecadd"], env=env,
                       capture_output=True, text=True, timeout=120)
    files = sorted(os.listdir(out)) if os.path.isdir(out) else []
    expect(files == ["gpu-suite-summary.txt", "gpu-suite.tar.gz"], f"$OUT holds the summary and archive: {files}")
    if "gpu-suite-summary.txt" in files:
        with open(os.path.join(out, "gpu-suite-summary.txt")) as f:
            last = f.read().splitlines()[-1]
        expect(last == p.stdout.splitlines()[-1], f"the summary ends with the tally: {last!r}")

    # Unknown build dir and unknown workload.
    p = subprocess.run(["bash", os.path.join(HERE, "run.sh"), os.path.join(tmp, "nope")],
                       env=dict(os.environ, TMPDIR=tmp, PYTHON=sys.executable), capture_output=True, text=True,
                       timeout=60)
    expect(p.returncode != 0 and p.stdout.splitlines()[-1] == "0 passed, 1 failed",
           f"missing build dir: one failure: {p.stdout.splitlines()[-1:]}")


def write_run(d, stdout="", rc=0, report=None, stderr="", counts=None, reports=()):
    os.makedirs(d, exist_ok=True)
    for name, text in (("stdout", stdout), ("stderr", stderr), ("rc", f"{rc}\n"), ("wall", "1.0\n"),
                       ("timeout", "60\n")):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    if counts is not None:
        with open(os.path.join(d, "counts.json"), "w") as f:
            json.dump(counts, f)
    if report is not None or reports:
        os.makedirs(os.path.join(d, "reports"))
    if report is not None:
        with open(os.path.join(d, "reports", "drk-python3-1.json"), "w") as f:
            json.dump(report, f)
    for doc in reports:
        with open(os.path.join(d, "reports", "drk-prog-%d.json" % doc["process"]["pid"]), "w") as f:
            json.dump(doc, f)


def check(args):
    p = subprocess.run([sys.executable, os.path.join(HERE, "check.py")] + args, capture_output=True, text=True)
    return p.returncode, p.stdout.splitlines()


def test_routes(tmp):
    def at(lib, sym, addr="0x1"):
        return {"file": f"/x/{lib}", "symbol": sym, "addr": addr, "exact": True}

    drk = {"handle_cuLaunchKernel": at("libdrk_shim.so", "cuLaunchKernel"),
           "default_cuLaunchKernel": at("libdrk_shim.so", "cuLaunchKernel"),
           "cuGetProcAddress_v2": at("libdrk_shim.so", "cuGetProcAddress_v2"),
           "proc_cuLaunchKernel_ptds": dict(at("libdrk_shim.so", "cuLaunchKernel_ptsz"), rc=0, status=0),
           "proc_cuMemAlloc": dict(at("libdrk_shim.so", "cuMemAlloc_v2"), rc=0, status=0)}
    cuda = {"handle_cuLaunchKernel": at("libcuda.so.1", "cuLaunchKernel"),
            "default_cuLaunchKernel": {"file": None, "symbol": None, "addr": None},
            "cuGetProcAddress_v2": at("libcuda.so.1", "cuGetProcAddress_v2"),
            "proc_cuLaunchKernel_ptds": dict(at("libcuda.so.1", None), rc=0, status=0),
            "proc_cuMemAlloc": dict(at("libcuda.so.1", None), rc=0, status=0)}
    rep = {"calls": {"entry": {"by_name": {"cuGetProcAddress_v2": 2}}}}
    d = os.path.join(tmp, "routes")
    write_run(os.path.join(d, "native"), json.dumps(cuda))
    write_run(os.path.join(d, "drk"), json.dumps(drk), report=rep)
    write_run(os.path.join(d, "disabled"), json.dumps(cuda))
    rc, lines = check(["routes", d])
    expect(rc == 0 and lines and all(ln.startswith("PASS") for ln in lines),
           f"routes: all pass on right answers ({len(lines)} checks): "
           + str([ln for ln in lines if not ln.startswith("PASS")][:2]))

    d2 = os.path.join(tmp, "routes2")
    bad = dict(drk, proc_cuLaunchKernel_ptds=dict(at("libdrk_shim.so", "cuLaunchKernel"), rc=0, status=0))
    write_run(os.path.join(d2, "native"), json.dumps(cuda))
    write_run(os.path.join(d2, "drk"), json.dumps(bad), report=rep)
    write_run(os.path.join(d2, "disabled"), json.dumps(drk))  # disabled yet answering with drk's hooks
    rc, lines = check(["routes", d2])
    fails = [ln for ln in lines if ln.startswith("FAIL")]
    expect(rc == 1 and len(fails) == 3
           and any("PER_THREAD" in f and "got libdrk_shim.so cuLaunchKernel " in f for f in fails),
           f"routes: a wrong _ptsz answer and a disabled drk answering are caught: {fails}")


def test_losses(tmp):
    d = os.path.join(tmp, "ppo")
    same = "final policy_loss 0x1.5p-3\nfinal value_loss 0x1.8p+0\nparams_sha256 ab\n"
    write_run(os.path.join(d, "native"), same)
    write_run(os.path.join(d, "drk"), same.replace("0x1.5p-3", "0x1.5000000000001p-3"))
    write_run(os.path.join(d, "disabled"), same)
    rc, lines = check(["workload", d, "--name", "ppo", "--losses", "--cupti-missing", "test"])
    loss = [ln for ln in lines if "final losses bitwise equal" in ln]
    expect(len(loss) == 1 and loss[0].startswith("FAIL") and "0x1.5000000000001p-3" in loss[0],
           f"ppo: a one-ulp loss difference fails: {loss}")


def test_evolve(tmp):
    """check.py --evolve: the evolve run's output and losses against native,
    a failed kernel caught, and the evolvable share computed from the report."""
    same = "final policy_loss 0x1.5p-3\nfinal value_loss 0x1.8p+0\nparams_sha256 ab\n"

    def ev_report(state="settled"):
        row = {"name": "k_a", "grid": [4, 1, 1], "block": [128, 1, 1], "state": state, "why": "x",
               "serving": "regs=64", "speedup": 2.0}
        refused = {"name": "k_b", "grid": [1, 1, 1], "block": [32, 1, 1], "state": "refused",
                   "why": "no PTX for sm_90: `x`", "serving": "", "speedup": 0}
        return {"process": {"pid": 1}, "gpu_time": {"by_kernel": [
                    {"name": "k_a", "grid": [4, 1, 1], "block": [128, 1, 1], "total_ns": 600},
                    {"name": "k_b", "grid": [1, 1, 1], "block": [32, 1, 1], "total_ns": 300},
                    {"name": "k_c", "grid": [1, 1, 1], "block": [32, 1, 1], "total_ns": 100}]},
                "kernels": {"list": [{"name": "k_a", "image": {"ptx_for_device": True}},
                                     {"name": "k_b", "image": {"ptx_for_device": False}},
                                     {"name": "k_c", "image": {"ptx_for_device": True}}]},
                "evolve": {"enabled": True, "kernels": 2, "evolved": 1, "refused": 1, "rounds": 9,
                           "trial_share": 0.01, "by_kernel": [row, refused]}}

    def run(tag, ev_out, state="settled"):
        d = os.path.join(tmp, tag)
        for m in ("native", "drk", "disabled"):
            write_run(os.path.join(d, m), same)
        write_run(os.path.join(d, "evolve"), ev_out, report=ev_report(state), counts={"pid": 1})
        return check(["workload", d, "--name", tag, "--losses", "--evolve", "--cupti-missing", "test"])[1]

    lines = run("ev_good", same)
    share = verdict_of(lines, "evolvable share")
    expect(verdict_of(lines, "evolve output identical to native").startswith("PASS")
           and verdict_of(lines, "evolve final losses bitwise equal").startswith("PASS")
           and verdict_of(lines, "evolution on, no kernel failed").startswith("PASS")
           and "60.0% of GPU time evolved or evolving (70.0% in kernels with PTX" in share and "k_a 2.00x" in share
           and "1.429x" in share and "not a target: PTX for the device" in share,
           f"evolve: a right run passes, 60% evolved, 70% with PTX, 1/(0.3+0.4)=1.429x: {share}")
    lines = run("ev_bad", same.replace("0x1.5p-3", "0x1.5000000000001p-3"), state="failed")
    expect(verdict_of(lines, "evolve output identical to native").startswith("FAIL")
           and verdict_of(lines, "evolve final losses bitwise equal").startswith("FAIL")
           and verdict_of(lines, "evolution on, no kernel failed").startswith("FAIL"),
           f"evolve: a one-ulp loss and a failed kernel are caught: {lines}")


def pool_report(pid, memory_calls=None, **pool):
    dp = dict(POOL, **pool)
    return {"schema": "drk-report", "version": 1, "process": {"pid": pid}, "options": {"DRK_STREAM_RESERVE": "5%"},
            "calls": {"memory": {"by_name": memory_calls or {}}}, "device_pool": dp}


def verdict_of(lines, check):
    hits = [ln for ln in lines if ln.split(": ")[1:2] == [check]]
    return hits[0] if len(hits) == 1 else f"<{len(hits)} lines for {check}>"


GIB = 1 << 30


def frag_dir(tmp, tag, nodefrag_rc=3, nodefrag_live=60 * GIB, peak_reserved=90 * GIB, moved=5000,
             nodefrag_moved=0, drk_peak_live=None):
    """A fabricated alloc_frag run: 141 GiB device, 80 GiB peak live in 700 blocks."""
    d = os.path.join(tmp, "frag-" + tag)
    done = {"alloc_frag": "completed", "cycles": 4, "total_bytes": 141 * GIB, "region_bytes": 74 * GIB,
            "unit_pages": 47, "allocs": 1000, "frees": 1000, "peak_live_bytes": 80 * GIB, "peak_live_blocks": 700}
    oom = {"alloc_frag": "out_of_memory", "cycle": 2, "request_bytes": GIB, "live_bytes": nodefrag_live,
           "live_blocks": 300, "total_bytes": 141 * GIB, "peak_live_bytes": 76 * GIB, "allocs": 800, "frees": 500}
    write_run(os.path.join(d, "native"), json.dumps(done) + "\n", counts={"pid": 10})
    write_run(os.path.join(d, "drk"), json.dumps(done) + "\n", counts={"pid": 11},
              reports=[pool_report(11, allocs=1000, frees=1000, peak_live_bytes=drk_peak_live or 80 * GIB,
                                   peak_reserved_bytes=peak_reserved, pages_moved=moved, pages_created=44000)])
    write_run(os.path.join(d, "nodefrag"), json.dumps(oom) + "\n", rc=nodefrag_rc, counts={"pid": 12},
              reports=[pool_report(12, allocs=800, frees=500, out_of_memory=1, pages_moved=nodefrag_moved,
                                   peak_reserved_bytes=139 * GIB)])
    write_run(os.path.join(d, "disabled"), json.dumps(done) + "\n", counts={"pid": 13})
    return check(["frag", d, "--name", "alloc_frag"])


def test_frag(tmp):
    rc, lines = frag_dir(tmp, "good")
    expect(rc == 0 and lines and all(ln.startswith("PASS") for ln in lines),
           f"alloc_frag: all pass on right answers ({len(lines)} checks): "
           + str([ln for ln in lines if not ln.startswith("PASS")][:2]))
    line = verdict_of(lines, "pool peak reserved close to peak live")
    expect("1.125x" in line and "stream reserve" in line, f"alloc_frag: the bound is shown: {line}")

    rc, lines = frag_dir(tmp, "loose", peak_reserved=100 * GIB)
    line = verdict_of(lines, "pool peak reserved close to peak live")
    expect(rc == 1 and line.startswith("FAIL"), f"alloc_frag: 100 GiB reserved for 80 GiB live fails: {line}")
    rc, lines = frag_dir(tmp, "completes", nodefrag_rc=0)
    line = verdict_of(lines, "DRK_DEFRAG=0 runs out of memory")
    expect(rc == 1 and line.startswith("FAIL") and "want exit 3" in line, f"alloc_frag: no OOM fails: {line}")
    rc, lines = frag_dir(tmp, "toolive", nodefrag_live=90 * GIB)
    line = verdict_of(lines, "DRK_DEFRAG=0 runs out of memory")
    expect(rc == 1 and line.startswith("FAIL") and "<= 60%" in line,
           f"alloc_frag: an OOM with too much live fails: {line}")
    rc, lines = frag_dir(tmp, "moved", nodefrag_moved=3, moved=0)
    fails = {ln.split(": ")[1] for ln in lines if ln.startswith("FAIL")}
    expect(fails == {"pool stitched pages", "DRK_DEFRAG=0 pool never moved a page"},
           f"alloc_frag: pages moved under DRK_DEFRAG=0, none by default: {sorted(fails)}")
    rc, lines = frag_dir(tmp, "live", drk_peak_live=81 * GIB)
    line = verdict_of(lines, "pool peak live == program's")
    expect(line.startswith("FAIL"), f"alloc_frag: the pool's peak live off by 1 GiB fails: {line}")


def ipc_dir(tmp, tag, drk_rc=0, drk_async="CUDA_ERROR_INVALID_VALUE", noalloc_pool=None, child_report=True):
    d = os.path.join(tmp, "ipc-" + tag)

    def out(async_result):
        return ("ipc_pair: cuMemAlloc buffer of 3149924 bytes: the child read the parent's bytes, the parent the "
                f"child's\nipc_pair: cuIpcGetMemHandle of the cuMemAllocAsync buffer: {async_result}\n")

    parent_calls = {"cuIpcGetMemHandle": 2}
    child_calls = {"cuIpcOpenMemHandle_v2": 1, "cuIpcCloseMemHandle": 1}
    write_run(os.path.join(d, "native"), out("CUDA_ERROR_INVALID_VALUE"), counts={"pid": 20, "child_pid": 21})
    stderr = "" if drk_rc == 0 else ("ipc_pair child: cuIpcOpenMemHandle of the parent's 3149924-byte buffer failed: "
                                     "CUDA_ERROR_INVALID_VALUE (1)\nipc_pair: the child failed (exit status 2)\n")
    reps = [pool_report(22, parent_calls, allocs=2, frees=2)]
    if child_report:
        reps.append(pool_report(23, child_calls, allocs=0, frees=0))
    write_run(os.path.join(d, "drk"), out(drk_async) if drk_rc == 0 else "", rc=drk_rc, stderr=stderr,
              counts={"pid": 22, "child_pid": 23}, reports=reps)
    off = dict({"enabled": False, "allocs": 0, "frees": 0}, **(noalloc_pool or {}))
    write_run(os.path.join(d, "noalloc"), out("CUDA_ERROR_INVALID_VALUE"), counts={"pid": 24, "child_pid": 25},
              reports=[pool_report(24, parent_calls, **off), pool_report(25, child_calls, **off)])
    write_run(os.path.join(d, "disabled"), out("CUDA_ERROR_INVALID_VALUE"), counts={"pid": 26, "child_pid": 27})
    return check(["ipc", d, "--name", "ipc_pair"])


def test_ipc(tmp):
    rc, lines = ipc_dir(tmp, "good")
    expect(rc == 0 and lines and all(ln.startswith("PASS") for ln in lines),
           f"ipc_pair: all pass on right answers ({len(lines)} checks): "
           + str([ln for ln in lines if not ln.startswith("PASS")][:2]))
    rc, lines = ipc_dir(tmp, "child", drk_rc=1, child_report=False)
    line = verdict_of(lines, "run drk")
    expect(rc == 1 and line.startswith("FAIL") and "CUDA_ERROR_INVALID_VALUE" in line and "exit 1" in line,
           f"ipc_pair: the child's CUDA error is shown: {line}")
    rc, lines = ipc_dir(tmp, "async", drk_async="CUDA_SUCCESS (shared and checked too)")
    line = verdict_of(lines, "cuMemAllocAsync memory's IPC handle as the driver's")
    expect(rc == 1 and line.startswith("FAIL") and "drk=CUDA_SUCCESS" in line,
           f"ipc_pair: an IPC handle the driver would refuse fails: {line}")
    rc, lines = ipc_dir(tmp, "noalloc", noalloc_pool={"enabled": True})
    fails = [ln for ln in lines if ln.startswith("FAIL")]
    expect(rc == 1 and fails and all("noalloc:" in f and "device pool" in f for f in fails),
           f"ipc_pair: a pool on under DRK_ALLOC=0 fails: {fails}")


def test_memcheck(tmp):
    def run(tag, drk_out, drk_rc=0):
        d = os.path.join(tmp, "memcheck-" + tag)
        prog = "alloc_heavy malloc=300 async=320 pitch=80 bytes=5 launches=1400\nchecksum 00ff\n"
        write_run(os.path.join(d, "native"), "========= COMPUTE-SANITIZER\n" + prog +
                  "========= LEAK SUMMARY: 0 bytes leaked in 0 allocations\n========= ERROR SUMMARY: 0 errors\n",
                  counts={"pid": 30})
        write_run(os.path.join(d, "drk"), "========= COMPUTE-SANITIZER\n" + prog + drk_out, rc=drk_rc,
                  counts={"pid": 31}, reports=[pool_report(31, allocs=701, frees=701)])
        return check(["memcheck", d, "--name", "alloc_memcheck"])

    rc, lines = run("good", "========= ERROR SUMMARY: 0 errors\n")
    expect(rc == 0 and len(lines) == 4 and all(ln.startswith("PASS") for ln in lines),
           f"memcheck: all pass on clean runs: {lines}")
    bad = ("========= Invalid __global__ write of size 1 bytes\n=========     at drk_fill_bytes+0x90\n"
           "========= ERROR SUMMARY: 1 error\n")
    rc, lines = run("bad", bad, drk_rc=9)
    line = verdict_of(lines, "memcheck drk")
    expect(rc == 1 and line.startswith("FAIL") and "Invalid __global__ write" in line and "exit 9" in line,
           f"memcheck: an invalid write under drk fails, quoted: {line}")


def test_host_map(tmp):
    def run(tag, dptr_calls):
        d = os.path.join(tmp, "host-" + tag)
        rep = {"schema": "drk-report", "version": 1, "process": {"pid": 41},
               "calls": {"launch": {"total": 0, "by_name": {}},
                         "host_memory": {"by_name": {"cuMemHostAlloc": 3, "cuMemHostGetDevicePointer_v2": dptr_calls,
                                                     "cuMemHostGetFlags": 3}}},
               "memory": {"host": {"allocs": 3}}, "device_pool": POOL,
               "kernels": {"launches": 0, "failed_launches": 0, "list": []}}
        for m, pid in (("native", 40), ("drk", 41), ("disabled", 42)):
            write_run(os.path.join(d, m), "checksum 1\n", counts={"pid": pid, "host_allocs": 3},
                      reports=[rep] if m == "drk" else ())
        rc, lines = check(["workload", d, "--name", "host_map", "--cupti-missing", "test"])
        return verdict_of(lines, "pinned host allocations seen")

    line = run("good", 3)
    expect(line.startswith("PASS"), f"host_map: 3 allocations and queries seen: {line}")
    line = run("bad", 0)
    expect(line.startswith("FAIL") and "cuMemHostGetDevicePointer*=0" in line,
           f"host_map: device-pointer queries that never reached drk fail: {line}")


def main():
    tmp = tempfile.mkdtemp(prefix="drk-gpu-selftest.")
    try:
        test_run_sh(tmp)
        test_routes(tmp)
        test_losses(tmp)
        test_evolve(tmp)
        test_frag(tmp)
        test_ipc(tmp)
        test_memcheck(tmp)
        test_host_map(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} selftest failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
