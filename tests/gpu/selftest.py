#!/usr/bin/env python3
"""CPU-side test of the GPU suite's logic (no GPU needed; run by ctest).

It runs run.sh end to end against a fabricated build directory whose
"programs" are Python stand-ins: each prints an output, writes its counts,
a CUPTI-counter file and (under "drk", i.e. LD_PRELOAD set without
DRK_DISABLE=1) a drk report, like the real ones. With no fault injected every
check must pass; each injected fault (FAKE_FAULT) must fail exactly the checks
it should, with the numbers in the message. The routes and PPO-loss checks
are fed fabricated run directories through check.py directly.
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
             "name_source": {"cupti": n + failed + extra, "cuFuncGetName": 0, "cuKernelGetName": 0, "none": 0}}
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

def report(dir_):
    os.makedirs(dir_, exist_ok=True)
    k = n + (2 if fault == "report_kernel" else 0)
    doc = {"schema": "drk-report", "version": 1, "drk_version": "0.1.0",
           "process": {"pid": pid, "forked_from": 0, "program": name},
           "driver": {"library": "libcuda.so.1", "path": "/usr/lib/libcuda.so.1", "version": 13000},
           "calls": {"launch": {"total": n + failed,
                                "by_name": {"cuLaunchKernel": n + failed, "cuLaunchKernelEx": 0}},
                     "entry": {"total": 0, "by_name": {"cuGetProcAddress_v2": 0}}},
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
            f.write(FAKE_PROGRAM.replace("PYTHON", sys.executable, 1))
        os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


failures = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run_suite(build, fault, tmp):
    env = dict(os.environ, FAKE_FAULT=fault, TMPDIR=tmp, PYTHON=sys.executable,
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

    fails = failed_checks("crash")
    expect(any("run drk" in f and "exit 3" in f and "fake: crashed" in f for f in fails),
           f"crash: exit status and stderr shown: {fails[:1]}")

    # No CUPTI library: every CUPTI-based check fails, saying why.
    env = dict(os.environ, TMPDIR=tmp, PYTHON=sys.executable, DRK_GPU_CUPTI_LIB=os.path.join(tmp, "nonexistent.so"))
    p = subprocess.run(["bash", os.path.join(HERE, "run.sh"), build, "rt_vecadd"], env=env,
                       capture_output=True, text=True, timeout=120)
    fails = [ln for ln in p.stdout.splitlines() if ln.startswith("FAIL")]
    expect(p.returncode != 0 and any("preflight: CUPTI counter" in f for f in fails)
           and any("launch calls == CUPTI" in f and "no CUPTI counter" in f for f in fails),
           "no libcupti: the CUPTI checks fail with the reason")

    # $OUT: a summary and one archive.
    out = os.path.join(tmp, "out")
    env = dict(os.environ, TMPDIR=tmp, OUT=out, PYTHON=sys.executable,
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


def write_run(d, stdout="", rc=0, report=None, stderr=""):
    os.makedirs(d, exist_ok=True)
    for name, text in (("stdout", stdout), ("stderr", stderr), ("rc", f"{rc}\n"), ("wall", "1.0\n"),
                       ("timeout", "60\n")):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    if report is not None:
        os.makedirs(os.path.join(d, "reports"))
        with open(os.path.join(d, "reports", "drk-python3-1.json"), "w") as f:
            json.dump(report, f)


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


def main():
    tmp = tempfile.mkdtemp(prefix="drk-gpu-selftest.")
    try:
        test_run_sh(tmp)
        test_routes(tmp)
        test_losses(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} selftest failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
