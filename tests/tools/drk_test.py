#!/usr/bin/env python3
"""CPU tests of the drk command (tools/): one named case per ctest test.

    drk_test.py --drk BIN --shim LIB --version V --rel-libdir=DIR \
                --options-source base/options.c --fixtures DIR CASE

A case passes by returning; any failed check raises and exits non-zero.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

ARGS = None


def drk(*argv, env=None, cwd=None, drk_bin=None, extra_env=None):
    """Run drk; returns the CompletedProcess (text, both streams captured)."""
    e = dict(os.environ if env is None else env)
    # A DRK_SANITIZE build preloads an ASan library into programs that are
    # not: let ASan start anyway instead of refusing the link order.
    e.setdefault("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0")
    e.update(extra_env or {})
    return subprocess.run([drk_bin or ARGS.drk, *argv], env=e, cwd=cwd, capture_output=True,
                          text=True, errors="replace", timeout=60)


def check(cond, what, proc=None):
    if not cond:
        detail = ""
        if proc is not None:
            detail = f"\n--- rc {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        raise AssertionError(what + detail)


def env_of(proc):
    """`env` output as a dict."""
    out = {}
    for line in proc.stdout.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def clean_env(**overrides):
    """The environment without any DRK_* or LD_PRELOAD, plus overrides."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("DRK_") and k != "LD_PRELOAD"}
    e.update(overrides)
    return e


def shim():
    return os.path.realpath(ARGS.shim)


def fixture(*parts):
    return os.path.join(ARGS.fixtures, *parts)


def option_table():
    """(name, type, default) of every entry of drk_option_table, from the source."""
    src = open(ARGS.options_source).read()
    rows = re.findall(r'\[DRK_OPT_\w+\]\s*=\s*\{\s*"(DRK_\w+)"\s*,\s*DRK_OPTION_(\w+)\s*,\s*"([^"]*)"', src)
    hdr = open(os.path.join(os.path.dirname(ARGS.options_source), "options.h")).read()
    enum = re.search(r"typedef enum drk_option_id \{(.*?)DRK_OPT_COUNT\b", hdr, re.S).group(1)
    ids = re.findall(r"DRK_OPT_\w+", enum)
    check(len(rows) == len(ids) and rows, f"parsed {len(rows)} table rows for {len(ids)} option ids")
    return [(n, t.lower(), d) for n, t, d in rows]


# ---------------------------------------------------------------- commands

def case_version():
    p = drk("--version")
    check(p.returncode == 0 and p.stdout == f"drk {ARGS.version}\n", "drk --version", p)


def case_help():
    for argv in (["--help"], ["-h"], ["help"]):
        p = drk(*argv)
        check(p.returncode == 0, f"drk {argv} exits 0", p)
        for word in ("run", "report", "options", "--version"):
            check(word in p.stdout, f"drk {argv} mentions {word}", p)
    for cmd, word in (("run", "--library"), ("report", "--top"), ("options", "DRK_")):
        for argv in ([cmd, "--help"], ["help", cmd]):
            p = drk(*argv)
            check(p.returncode == 0 and word in p.stdout and f"usage: drk {cmd}" in p.stdout,
                  f"drk {argv} prints {cmd}'s usage", p)
    p = drk("frobnicate")
    check(p.returncode == 2 and "unknown command 'frobnicate'" in p.stderr and "usage: drk" in p.stderr
          and not p.stdout, "an unknown command is a usage error on stderr", p)
    p = drk()
    check(p.returncode == 2 and "usage: drk" in p.stderr, "drk alone prints usage, exit 2", p)
    p = drk("help", "frobnicate")
    check(p.returncode == 2, "help for an unknown command", p)


def case_options():
    table = option_table()
    p = drk("options", env=clean_env())
    check(p.returncode == 0, "drk options exits 0", p)
    for name, typ, default in table:
        row = re.search(rf"^{name}\s+{typ}\s+(\S+)", p.stdout, re.M)
        check(row is not None, f"drk options lists {name} as {typ}", p)
        check(row.group(1) == (default or "(empty)"), f"{name}'s default shows as {default!r}", p)
    check("(no DRK_* variables)" in p.stdout, "nothing set in a clean environment", p)

    p = drk("options", env=clean_env(DRK_LOG_LEVEL="loud", DRK_DISABLE="yes", DRK_TYPO="1"))
    check(p.returncode == 0, "drk options with variables set", p)
    check(re.search(r"DRK_LOG_LEVEL=loud\n\s+refused: not a log level.*default 'warn'", p.stdout),
          "a refused value is shown with the default used instead", p)
    check(re.search(r"DRK_DISABLE=yes\n\s+accepted, as 1", p.stdout), "an accepted value", p)
    check(re.search(r"DRK_TYPO=1\n\s+unknown", p.stdout), "an unknown DRK_ variable is pointed out", p)


# ---------------------------------------------------------------- drk run

def case_run_env():
    with tempfile.TemporaryDirectory() as tmp:
        old = "/nonexistent/drk-test-a.so other-b.so"
        p = drk("run", "--report", "reports/", "--disable", "--set", "log_level=debug", "--set",
                "DRK_OBSERVE=0", "--set=CUDA_LIBRARY=libcuda.so.1", "--", "/usr/bin/env",
                env=clean_env(LD_PRELOAD=old), cwd=tmp)
        check(p.returncode == 0, "drk run -- env exits 0", p)
        e = env_of(p)
        check(e.get("LD_PRELOAD") == f"{shim()}:{old}",
              "the shim beside drk comes first in LD_PRELOAD and the old entries stay", p)
        check(e.get("DRK_REPORT") == os.path.join(os.path.realpath(tmp), "reports/")
              or e.get("DRK_REPORT") == os.path.join(tmp, "reports/"),
              "--report is made absolute and keeps its trailing /", p)
        check(e.get("DRK_DISABLE") == "1", "--disable sets DRK_DISABLE=1", p)
        check(e.get("DRK_LOG_LEVEL") == "debug", "--set log_level=debug sets DRK_LOG_LEVEL", p)
        check(e.get("DRK_OBSERVE") == "0", "--set DRK_OBSERVE=0 (with prefix)", p)
        check(e.get("DRK_CUDA_LIBRARY") == "libcuda.so.1", "--set=KEY=VALUE form", p)

        p = drk("run", "--report", "/abs/r-%p.json", "--", "/usr/bin/env", env=clean_env())
        e = env_of(p)
        check(p.returncode == 0 and e.get("LD_PRELOAD") == shim(), "no LD_PRELOAD before: the shim alone", p)
        check(e.get("DRK_REPORT") == "/abs/r-%p.json", "an absolute --report is kept as given", p)
        check("DRK_DISABLE" not in e, "no --disable, no DRK_DISABLE", p)

        p = drk("run", "/usr/bin/env", env=clean_env(LD_PRELOAD="  "))
        check(p.returncode == 0 and env_of(p).get("LD_PRELOAD") == shim(),
              "the program may follow the options without '--'; blank LD_PRELOAD replaced", p)


def case_run_preload_order():
    for old in (f"{shim()}:/nonexistent/x.so", f" {shim()} /nonexistent/x.so", shim()):
        p = drk("run", "--", "/usr/bin/env", env=clean_env(LD_PRELOAD=old))
        check(p.returncode == 0 and env_of(p).get("LD_PRELOAD") == old,
              f"already first in {old!r}: LD_PRELOAD unchanged", p)
    old = f"/nonexistent/x.so:{shim()}"
    p = drk("run", "--", "/usr/bin/env", env=clean_env(LD_PRELOAD=old))
    check(env_of(p).get("LD_PRELOAD") == f"{shim()}:{old}", "present but not first: put first", p)


def case_run_library():
    with tempfile.TemporaryDirectory() as tmp:
        lib = os.path.join(tmp, "copy.so")
        shutil.copy(ARGS.shim, lib)
        p = drk("run", "--library", lib, "--", "/usr/bin/env", env=clean_env())
        check(p.returncode == 0 and env_of(p).get("LD_PRELOAD") == os.path.realpath(lib),
              "--library overrides the shim beside drk", p)
        marker = os.path.join(tmp, "ran")
        for bad in (os.path.join(tmp, "missing.so"), tmp):
            p = drk("run", "--library", bad, "--", "sh", "-c", f"touch {marker}", env=clean_env())
            check(p.returncode == 2 and bad in p.stderr and not os.path.exists(marker),
                  f"--library {bad}: error, nothing runs", p)
        spaced = os.path.join(tmp, "a b.so")
        shutil.copy(ARGS.shim, spaced)
        p = drk("run", "--library", spaced, "--", "sh", "-c", f"touch {marker}", env=clean_env())
        check(p.returncode == 2 and "space or colon" in p.stderr and not os.path.exists(marker),
              "a library path LD_PRELOAD cannot hold is refused", p)


def case_run_layout():
    """drk finds the shim in an install tree and in a build tree, by itself."""
    with tempfile.TemporaryDirectory() as tmp:
        def layout(name, libdir):
            bindir = os.path.join(tmp, name, "bin")
            os.makedirs(bindir)
            exe = os.path.join(bindir, "drk")
            shutil.copy(ARGS.drk, exe)
            if libdir is None:
                return exe, None
            d = os.path.normpath(os.path.join(bindir, libdir))
            os.makedirs(d, exist_ok=True)
            lib = os.path.join(d, "libdrk_shim.so")
            shutil.copy(ARGS.shim, lib)
            return exe, os.path.realpath(lib)

        exe, lib = layout("install", ARGS.rel_libdir or ".")
        p = drk("run", "--", "/usr/bin/env", env=clean_env(), drk_bin=exe)
        check(p.returncode == 0 and env_of(p).get("LD_PRELOAD") == lib,
              f"install layout: bin/{ARGS.rel_libdir}/libdrk_shim.so", p)

        exe, lib = layout("build", "../lib")
        p = drk("run", "--", "/usr/bin/env", env=clean_env(), drk_bin=exe)
        check(p.returncode == 0 and env_of(p).get("LD_PRELOAD") == lib, "build layout: bin/../lib", p)

        exe, _ = layout("none", None)
        marker = os.path.join(tmp, "ran")
        p = drk("run", "--", "sh", "-c", f"touch {marker}", env=clean_env(), drk_bin=exe)
        check(p.returncode == 2 and "cannot find libdrk_shim.so" in p.stderr and "--library" in p.stderr
              and not os.path.exists(marker), "no shim anywhere: a clear error, nothing runs", p)


def case_run_bad_set():
    names = [n for n, _, _ in option_table()]
    with tempfile.TemporaryDirectory() as tmp:
        marker = os.path.join(tmp, "ran")
        prog = ["--", "sh", "-c", f"touch {marker}"]
        p = drk("run", "--set", "NOPE=1", *prog, env=clean_env())
        check(p.returncode == 2 and "NOPE" in p.stderr, "an unknown key is an error naming it", p)
        for n in names:
            check(n in p.stderr, f"the error lists valid option {n}", p)
        for arg, key in (("LOG_LEVEL=loud", "DRK_LOG_LEVEL"), ("DRK_DISABLE=maybe", "DRK_DISABLE"),
                         ("observe=2", "DRK_OBSERVE")):
            p = drk("run", "--set", arg, *prog, env=clean_env())
            check(p.returncode == 2 and key in p.stderr and "bad value" in p.stderr,
                  f"--set {arg}: a refused value is an error naming {key}", p)
        for argv in (["--set", "DISABLE", *prog], ["--set", "=1", *prog], ["--bogus", *prog], ["--set"],
                     ["--report"], ["--library"]):
            p = drk("run", *argv, env=clean_env())
            check(p.returncode == 2 and "usage: drk run" in p.stderr, f"drk run {argv}: usage error", p)
        p = drk("run", env=clean_env())
        check(p.returncode == 2 and "no program" in p.stderr, "no program: usage error", p)
        check(not os.path.exists(marker), "nothing ran after any of these errors")


def case_run_status():
    p = drk("run", "--", "sh", "-c", "exit 3", env=clean_env())
    check(p.returncode == 3, "the program's exit status is drk run's", p)
    p = drk("run", "--", "sh", "-c", "kill -TERM $$", env=clean_env())
    check(p.returncode == -signal.SIGTERM, "a program killed by SIGTERM: drk's process dies the same way", p)
    p = drk("run", "--", "sh", "-c", "echo out; echo err >&2; exit 0", env=clean_env())
    check(p.returncode == 0 and p.stdout == "out\n" and "err" in p.stderr, "the program's output passes", p)
    p = drk("run", "--", "sh", "-c", 'printf "%s|" "$@"', "sh", "a b", "--set", "--", env=clean_env())
    check(p.stdout == "a b|--set|--|", "arguments after the program reach it untouched", p)


def case_run_exec_fail():
    with tempfile.TemporaryDirectory() as tmp:
        p = drk("run", "--", "drk-test-no-such-command", env=clean_env())
        check(p.returncode == 127 and "drk-test-no-such-command" in p.stderr, "command not found: 127", p)
        p = drk("run", "--", os.path.join(tmp, "missing"), env=clean_env())
        check(p.returncode == 127 and "No such file" in p.stderr, "missing path: 127", p)
        plain = os.path.join(tmp, "plain")
        open(plain, "w").write("not a program\n")
        os.chmod(plain, 0o644)
        p = drk("run", "--", plain, env=clean_env())  # root too: exec needs an x bit
        check(p.returncode == 126 and plain in p.stderr, "not executable: 126", p)
        p = drk("run", "--", tmp, env=clean_env())
        check(p.returncode == 126, "a directory: 126", p)


# ---------------------------------------------------------------- drk report

LONG = ("_ZN7cutlass7Kernel2I61cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8"
        "EEvNT_6ParamsE_")


def row(out, *cells):
    """A table row holding these cells in order, separated by blanks."""
    pat = r"^\s*" + r"\s+".join(re.escape(c) for c in cells) + r"\s*$"
    return re.search(pat, out, re.M) is not None


def row_start(out, *cells):
    """A table row starting with these cells."""
    pat = r"^\s*" + r"\s+".join(re.escape(c) for c in cells) + r"(\s|$)"
    return re.search(pat, out, re.M) is not None


def case_report_single():
    p = drk("report", fixture("single.json"))
    o = p.stdout
    check(p.returncode == 0 and not p.stderr, "drk report on one file", p)
    check("== python3 (pid 4242) ==" in o, "process header", p)
    check("libcuda.so.580.65.06, version 13000 (CUDA 13.0)" in o, "driver path and version", p)
    check(re.search(r"duration\s+12\.345 s", o), "duration", p)
    check("kernels: 27000 launches (2 failed, 0 untracked), 5 distinct" in o, "kernel totals", p)
    names = [l.split()[0] for l in o.splitlines() if re.match(r"  \S+\s+\d+\s+[\d.]+\s+\d+\s+\d+\+?\s", l)]
    check(names[:2] == ["_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFu...",
                        "ampere_sgemm_128x64_tn"], f"most launched first, names cut to 64 columns: {names}", p)
    check(row(o, "ampere_sgemm_128x64_tn", "8000", "29.6", "1", "1", "8x16x1 / 256x1x1 / 32768"),
          "a kernel row: launches, %, handles, shapes, top shape", p)
    check(row(o, names[0], "12000", "44.4", "2", "2", "1024x1x1 / 128x1x1 / 0"), "top shape of a two-shape kernel",
          p)
    check(LONG[:40] in o and LONG not in o, "a long name is truncated", p)
    check(re.search(re.escape(LONG[:61]) + r"\.\.\.\s+5000\s+18\.5\s+1\s+8\+\s", o),
          "with an ellipsis; '8+' marks shapes beyond those recorded", p)
    check("kernel_caf\u00e9_\U0001F680" in o, "\\u escapes and surrogate pairs decoded to UTF-8", p)
    check(row(o, "launch", "27002") and row(o, "cuLaunchKernel", "25200") and row(o, "cuLaunchKernelEx", "1802"),
          "calls by family and name", p)
    check(row(o, "graph", "0") and row(o, "entry", "412") and row(o, "cuGetProcAddress_v2", "412"),
          "every family, zero ones too", p)
    check("cuLaunchKernel_ptsz" not in o and "cuGraphLaunch" not in o, "names with no calls are left out", p)
    check("kernel facts" not in o, "a report without kernel facts (older drk) prints none", p)
    check("device pool" not in o and "host pool" not in o, "a report without the pools (older drk) prints none", p)
    check(row(o, "device", "12", "1", "1.50 GiB", "10") and row(o, "host", "2", "0", "8.00 MiB", "2")
          and row(o, "pitch", "0", "0", "0 B", "0"), "allocations by kind, bytes human-readable", p)
    check("combined" not in o, "one file: no combined section", p)
    check("GPU time" not in o and "rounds:" not in o, "a report without gpu_time (older drk) prints no GPU times", p)
    check_profile_text()
    check_findings_text()


PROFILE = ("profile", "drk-profile_route-1.json")
MICRO = "\u00b5s"


def check_profile_text():
    """The profile fixture: 4 rounds ended by cuProfilerStop and one by exit;
    "empty" at two shapes, "hidden" timed but never launched through drk."""
    p = drk("report", fixture(*PROFILE))
    o = p.stdout
    check(p.returncode == 0 and not p.stderr, "drk report on a report with GPU times", p)
    check("kernels: 80 launches (0 failed, 0 untracked), 1 distinct" in o
          and row(o, "empty", "80", "100.0", "1", "2", "1x1x1 / 32x1x1 / 0") and row(o, "profiler", "4"),
          "the existing sections as before", p)
    i = [o.find(x) for x in ("\nkernel facts:", "\ntop kernels by GPU time", "\nrounds:", "\ncalls by family:")]
    check(0 <= i[0] < i[1] < i[2] < i[3], "GPU times after the kernels and facts, rounds next, then calls", p)
    check("top kernels by GPU time (CUPTI: /usr/local/cuda/lib64/libcupti.so.13):\n" in o, "the title names CUPTI", p)
    rows = [("1", "empty", "4x1x1 / 64x1x1 / 0", "40", "240 " + MICRO, "66.7", "8.00 " + MICRO, "8.00 " + MICRO,
             "6.00 " + MICRO),
            ("2", "empty", "1x1x1 / 32x1x1 / 0", "40", "80.0 " + MICRO, "22.2", "2.00 " + MICRO, "2.00 " + MICRO,
             "2.00 " + MICRO),
            ("3", "hidden", "2x1x1 / 128x1x1 / 256", "4", "40.0 " + MICRO, "11.1", "10.0 " + MICRO, "10.0 " + MICRO,
             "10.0 " + MICRO)]
    for r in rows:
        check(row(o, *r), f"a GPU time row: {r}", p)
    check(o.find("  1  empty   4x1x1") < o.find("  2  empty   1x1x1") < o.find("  3  hidden"), "most time first", p)
    check(f"\n  GPU busy 444 {MICRO} of 4.01 ms (11.1%) over 5 rounds; kernel time 360 {MICRO} in 84 kernels, "
          f"copy time 84.0 {MICRO} in 8 copies (4.02 MiB)\n" in o, "busy over wall, kernel and copy totals", p)
    check("dropped" not in o and "late" not in o and "stopped" not in o, "nothing lost, nothing said", p)
    check("\nrounds: 5 closed (4 marked by the program):\n" in o, "the rounds header", p)
    gap = f"569 {MICRO} memset \u2192 (end)"
    want = [("0", "cuProfilerStop", "1.00 ms", "9.1%", "70.0 " + MICRO, "21.0 " + MICRO, "21",
             "empty 4x1x1 / 64x1x1 / 0 (57.1%)", gap, "0 B / 0 B"),
            ("1", "cuProfilerStop", "1.00 ms", "9.1%", "70.0 " + MICRO, "21.0 " + MICRO, "21",
             "empty 4x1x1 / 64x1x1 / 0 (57.1%)", gap, "0 B / 0 B"),
            ("2", "cuProfilerStop", "1.00 ms", "13.1%", "110 " + MICRO, "21.0 " + MICRO, "21",
             "empty 4x1x1 / 64x1x1 / 0 (72.7%)", gap, "0 B / 0 B"),
            ("3", "cuProfilerStop", "1.00 ms", "13.1%", "110 " + MICRO, "21.0 " + MICRO, "21",
             "empty 4x1x1 / 64x1x1 / 0 (72.7%)", gap, "0 B / 0 B"),
            ("4", "exit", "5.00 " + MICRO, "0.0%", "0 ns", "0 ns", "0", "-", f"5.00 {MICRO} (start) \u2192 (end)",
             "0 B / 0 B")]
    for r in want:
        check(row(o, *r), f"a round: {r}", p)
    table = o[i[2]:i[3]]
    check(len([l for l in table.splitlines() if re.match(r"\s+\d+\s+(cuProfilerStop|exit)\s", l)]) == 5
          and "earlier round" not in table, "five rounds, all listed", p)


def case_report_top():
    p = drk("report", "--top", "2", fixture("single.json"))
    check(p.returncode == 0 and "ampere_sgemm_128x64_tn" in p.stdout and "triton_poi_fused_add_0" not in p.stdout,
          "--top 2 lists two kernels", p)
    check("... 3 more kernels, 7000 launches" in p.stdout, "and sums the rest", p)
    p = drk("report", "--top=0", fixture("single.json"))
    check(p.returncode == 0 and "kernel_caf" in p.stdout and "more kernels" not in p.stdout, "--top=0: all", p)
    single = fixture("single.json")
    for bad in (["--top", "x", single], ["--top", "-1", single], ["--frob", single], [single, "--top"], []):
        p = drk("report", *bad)
        check(p.returncode == 2 and "usage: drk report" in p.stderr, f"drk report {bad}: usage error", p)
    p = drk("report", fixture("single.json"), fixture("future.json"))
    check(p.returncode == 2, "two paths: usage error", p)

    p = drk("report", "--top", "2", fixture(*PROFILE))
    o = p.stdout
    check(p.returncode == 0 and row(o, "2", "empty", "1x1x1 / 32x1x1 / 0", "40", "80.0 " + MICRO, "22.2",
                                    "2.00 " + MICRO, "2.00 " + MICRO, "2.00 " + MICRO)
          and "hidden" not in o and f"  ... 1 more kernel-shape, 40.0 {MICRO}\n" in o, "--top 2: two GPU time rows", p)
    check("rounds: 5 closed (4 marked by the program), the last 2 listed:" in o
          and row_start(o, "3", "cuProfilerStop", "1.00 ms", "13.1%") and row_start(o, "4", "exit", "5.00 " + MICRO)
          and not re.search(r"^\s+[012]\s+cuProfilerStop", o, re.M), "--top 2: the last two rounds", p)
    check(f"  ... 3 earlier rounds (0 merged by drk): wall 3.00 ms, busy 313 {MICRO} (10.4%), kernel time "
          f"250 {MICRO}, copy time 63.0 {MICRO}, 63 kernels\n" in o, "and a line for the earlier ones", p)
    p = drk("report", "--top", "0", fixture(*PROFILE))
    check(p.returncode == 0 and "hidden" in p.stdout and "earlier round" not in p.stdout
          and "more kernel-shape" not in p.stdout, "--top 0: every row and round", p)


def pool_lines(section):
    """The pool lines of one section: from "device pool" or "host pool" to the section's end."""
    m = re.search(r"^(device|host) pool.*", section, re.M | re.S)
    return m.group(0).rstrip("\n").split("\n") if m else []


def profile_dir(tmp):
    """The profile fixture (pid 1); a copy (pid 2) where the big shape has more
    launches and other quantiles, and the hidden one ties; one with times off
    (pid 3); and single.json, without gpu_time."""
    base = json.load(open(fixture(*PROFILE)))
    def write(d, name):
        with open(os.path.join(tmp, name), "w") as f:
            json.dump(d, f, indent=1)
    write(base, "drk-profile_route-1.json")
    d = json.loads(json.dumps(base))
    d["process"]["pid"] = 2
    big, hidden = d["gpu_time"]["by_kernel"][0], d["gpu_time"]["by_kernel"][2]
    big.update(launches=100, total_ns=300000, min_ns=1000, median_ns=3000, p95_ns=6000, max_ns=9000)
    hidden.update(median_ns=12000, p95_ns=12000, min_ns=12000, max_ns=12000)
    d["gpu_time"].update(kernel_ns=420000, dropped=3, late=1, stopped="the program began to use CUPTI itself")
    write(d, "drk-profile_route-2.json")
    d = json.loads(json.dumps(base))
    d["process"]["pid"] = 3
    d["gpu_time"] = {"enabled": False, "off_reason": "DRK_PROFILE=0", "source": None, "stopped": None,
                     "kernels": 0, "kernel_ns": 0, "copies": 0, "copy_ns": 0, "copy_bytes": 0, "dropped": 0,
                     "untracked": 0, "late": 0, "by_kernel": []}
    d["rounds"] = {"closed": 0, "kept": 0, "marked": 0, "merged": {k: 0 for k in (
        "rounds", "wall_ns", "busy_ns", "kernel_ns", "copy_ns", "kernels", "copies")}, "list": []}
    for k in d["kernels"]["list"]:
        k["gpu_ns"] = k["gpu_launches"] = 0
    write(d, "drk-profile_route-3.json")
    shutil.copy(fixture("single.json"), tmp)


def case_report_dir():
    with tempfile.TemporaryDirectory() as tmp:
        profile_dir(tmp)
        p = drk("report", tmp)
        o = p.stdout
        check(p.returncode == 0 and not p.stderr, "drk report on reports with times, times off and none", p)
        i = [o.find(h) for h in ("== python3 (pid 4242) ==", "== profile_route (pid 1) ==",
                                 "== profile_route (pid 2) ==", "== profile_route (pid 3) ==",
                                 "== combined: 4 processes ==")]
        check(0 <= i[0] < i[1] < i[2] < i[3] < i[4], "four processes, then combined", p)
        old, one, two, off, combined = o[i[0]:i[1]], o[i[1]:i[2]], o[i[2]:i[3]], o[i[3]:i[4]], o[i[4]:]
        check("GPU time" not in old and "rounds:" not in old, "no GPU lines for the older report", p)
        check("rounds: 5 closed" in one and "rounds: 5 closed" in two and "rounds:" not in off
              and "rounds:" not in combined, "rounds per process, not combined", p)
        check("GPU times: off (DRK_PROFILE=0)\n" in off and "top kernels by GPU time" not in off,
              "times off: one line", p)
        check("; 3 records dropped; 1 late record\n  timing stopped before exit: the program began to use CUPTI "
              "itself\n" in two, "dropped, late and stopped, when there are", p)
        check("top kernels by GPU time (2 of 4 processes timed):" in combined, "the combined title", p)
        check(row(combined, "1", "empty", "4x1x1 / 64x1x1 / 0", "140", "540 " + MICRO, "69.2", "3.00 " + MICRO,
                  "6.00 " + MICRO, "3.86 " + MICRO),
              "rows summed by kernel-shape, median and p95 from the process with most launches", p)
        check(row_start(combined, "2", "empty", "1x1x1 / 32x1x1 / 0", "80", "160 " + MICRO, "20.5")
              and row_start(combined, "3", "hidden", "2x1x1 / 128x1x1 / 256", "8", "80.0 " + MICRO, "10.3",
                      "10.0 " + MICRO, "10.0 " + MICRO), "a tie: the first process's quantiles", p)
        check(f"  GPU busy 888 {MICRO} of 8.01 ms (11.1%) over 10 rounds (sums over processes); kernel time 780 "
              f"{MICRO} in 168 kernels, copy time 168 {MICRO} in 16 copies (8.03 MiB); 3 records dropped; "
              "1 late record\n  timing stopped before exit in 1 process (first: the program began to use CUPTI "
              "itself)\n" in combined, "busy and wall summed over processes", p)
        check(row(combined, "empty", "240", "0.9", "3", "2", "1x1x1 / 32x1x1 / 0"), "kernels as before", p)

        for name in ("drk-profile_route-1.json", "drk-profile_route-2.json"):
            os.unlink(os.path.join(tmp, name))
        p = drk("report", tmp)
        check(p.returncode == 0 and "GPU times: off in 1 of 2 processes, none timed (first reason: DRK_PROFILE=0)"
              in p.stdout[p.stdout.find("== combined"):], "no process timed: one combined line", p)

    p = drk("report", fixture("dir"))
    o = p.stdout
    check(p.returncode == 0, "drk report on a directory", p)
    check("skipping" in p.stderr and "notes.json" in p.stderr, "a JSON file of another schema is skipped", p)
    i_parent = o.find("== python (pid 5000) ==")
    i_child = o.find("== python (pid 5001, forked from 5000) ==")
    i_all = o.find("== combined: 2 processes ==")
    check(0 <= i_parent < i_child < i_all, "parent, forked child, then combined", p)
    child, combined = o[i_child:i_all], o[i_all:]
    check("driver    (not opened), version unknown" in child, "a null driver path and version", p)
    check("kernels: 310 launches (2 failed, 3 untracked), 2 distinct" in child, "the child's totals", p)
    check("kernels: 460 launches (2 failed, 3 untracked), 3 distinct" in combined, "combined totals", p)
    check(row(combined, "k_shared", "400", "87.0", "2", "2", "10x1x1 / 32x1x1 / 0"),
          "kernels merged by name across processes: launches, handles, shapes", p)
    check(row(combined, "launch", "462") and row(combined, "cuLaunchKernel", "150")
          and row(combined, "cuLaunchKernel_ptsz", "312"), "calls summed", p)
    check(row(combined, "device", "5", "0", "1.00 MiB", "4") and row(combined, "async", "10", "0", "10.0 KiB", "0"),
          "memory summed", p)
    check(re.search(r"span\s+5\.000 s", combined), "the combined span", p)
    check("kernel facts: 4 launched kernels, 4 with a parameter layout (3 read from their image: 3 equal to the "
          "driver's, 0 differ); PTX for sm_90: 1 (any PTX: 1)" in combined, "kernel facts summed", p)
    check("device pool" not in o and "host pool" not in o, "reports without the pools: no pool lines", p)
    check("GPU time" not in o and "rounds:" not in o, "reports without gpu_time: no GPU lines", p)

    # device_pool and host_pool: reports that have both, the device pool only, neither (an older drk).
    p = drk("report", fixture("pools"))
    o = p.stdout
    check(p.returncode == 0 and not p.stderr, "drk report on reports with and without pools", p)
    i = [o.find(h) for h in ("== python (pid 7000) ==", "== python (pid 7001) ==", "== python (pid 7002) ==",
                             "== combined: 3 processes ==")]
    check(0 <= i[0] < i[1] < i[2] < i[3], "three processes, then combined", p)
    both, device_only, older, combined = o[i[0]:i[1]], o[i[1]:i[2]], o[i[2]:i[3]], o[i[3]:]
    check(pool_lines(both) == [
        "device pool: 1000 allocs, 990 frees, 1 out of memory, 2 bad frees",
        "  peak live 3.00 GiB, peak reserved 4.00 GiB: fragmentation 25.00%",
        "  pages: 2048 created, 12 moved, 100 released; 3 defrag events",
        "  driver handles: 700 made, 3 moved (runs of pages: each one call)",
        "  latency, sampled: alloc median 512\u20131023 ns (16 samples), free median 128\u2013255 ns (16 samples)",
        "host pool: 40 allocs, 38 frees, peak live 6.00 MiB, pinned 32.0 MiB in 1 chunk, 1 driver fallback, "
        "4 waits for the device before reusing freed memory (1.5 ms)",
    ], "both pools, after the allocations table", p)
    check(pool_lines(device_only) == [
        "device pool: 500 allocs, 500 frees, 0 out of memory, 0 bad frees",
        "  peak live 1.00 GiB, peak reserved 1.50 GiB: fragmentation 33.33%",
        "  pages: 768 created, 0 moved, 768 released; 0 defrag events",
        "  grown ahead: 300 pages made by drk's grower, 280 of them taken; 468 made inside allocation calls; "
        "2 waits for pages being made",
        "  1 thread allocating alongside others got a shard of its own",
        "  latency, sampled: alloc median 512\u20131023 ns (8 samples), free median 64\u2013127 ns (8 samples)",
    ], "a host pool without allocations prints no line; the grower's and thread shards' lines", p)
    check(pool_lines(older) == [] and "allocations by kind" in older, "a report without the pools prints none", p)
    check(pool_lines(combined) == [
        "device pool (2 of 3 processes): 1500 allocs, 1490 frees, 1 out of memory, 2 bad frees",
        "  sum of per-process peaks: live 4.00 GiB, reserved 5.50 GiB: fragmentation 27.27%",
        "  pages: 2816 created, 12 moved, 868 released; 3 defrag events",
        "  driver handles: 700 made, 3 moved (runs of pages: each one call)",
        "  grown ahead: 300 pages made by drk's grower, 280 of them taken; 468 made inside allocation calls; "
        "2 waits for pages being made",
        "  1 thread allocating alongside others got a shard of its own",
        "  latency, sampled: alloc median 512\u20131023 ns (24 samples), free median 128\u2013255 ns (24 samples)",
        "host pool (1 of 3 processes): 40 allocs, 38 frees, peak live 6.00 MiB (sum of per-process peaks), "
        "pinned 32.0 MiB in 1 chunk, 1 driver fallback, 4 waits for the device before reusing freed memory (1.5 ms)",
    ], "combined: counts and peaks summed, histograms merged before the median", p)
    check_compare_text()


def case_report_json():
    p = drk("report", "--json", fixture("dir"))
    check(p.returncode == 0, "drk report --json", p)
    d = json.loads(p.stdout)
    check(d["schema"] == "drk-report-summary" and d["version"] == 1, "summary schema", p)
    check([(x["pid"], x["forked_from"]) for x in d["processes"]] == [(5000, 0), (5001, 5000)], "processes", p)
    k = d["kernels"]
    check((k["launches"], k["failed_launches"], k["untracked_launches"], k["distinct"]) == (460, 2, 3, 3),
          "kernel totals", p)
    check([x["name"] for x in k["list"]] == ["k_shared", "k_parent_only", "k_child_only"], "all kernels, in order", p)
    ks = k["list"][0]
    check((ks["launches"], ks["handles"]) == (400, 2), "merged kernel", p)
    check(ks["shapes"] == [{"grid": [10, 1, 1], "block": [32, 1, 1], "shared_bytes": 0, "launches": 300},
                           {"grid": [20, 1, 1], "block": [32, 1, 1], "shared_bytes": 0, "launches": 100}],
          "shapes merged by grid/block/shared", p)
    check(d["calls"]["launch"]["total"] == 462 and d["calls"]["launch"]["by_name"]["cuLaunchKernel_ptsz"] == 312,
          "calls", p)
    check(k["facts"] == {"launched_kernels": 4, "with_layout": 4, "layout_from_image": 3, "layout_equal_to_driver": 3,
                         "layout_differs_from_driver": 0, "with_ptx": 1, "ptx_for_device": 1}, "kernel facts", p)
    check(d["memory"]["device"] == {"allocs": 5, "failed": 0, "bytes": 1052672, "frees": 4, "failed_frees": 0},
          "memory", p)
    check("device_pool" not in d and "host_pool" not in d, "reports without the pools: none in --json", p)
    p = drk("report", "--json", "--top", "1", fixture("dir"))
    d = json.loads(p.stdout)
    check(len(d["kernels"]["list"]) == 1 and d["kernels"]["distinct"] == 3, "--json --top 1", p)
    p = drk("report", "--json", fixture("single.json"))
    d = json.loads(p.stdout)
    check(d["kernels"]["launches"] == 27000 and len(d["kernels"]["list"]) == 5
          and d["kernels"]["list"][4]["name"] == "kernel_caf\u00e9_\U0001F680", "--json on one file", p)
    p = drk("report", "--json", fixture("pools"))
    check(p.returncode == 0, "drk report --json with pools", p)
    d = json.loads(p.stdout)
    check(d.get("device_pool") == {
        "processes": 2, "allocs": 1500, "frees": 1490, "failed_allocs": 0, "out_of_memory": 1, "bad_frees": 2,
        "driver_allocs": 0, "peak_live_bytes": 4 << 30, "peak_reserved_bytes": 11 << 29, "pages_created": 2816,
        "pages_moved": 12, "pages_released": 868, "defrag_events": 3, "pages_made_ahead": 300,
        "pages_taken_ahead": 280, "pages_created_in_calls": 468, "growth_waits": 2, "thread_shards": 1,
        "handles_created": 700, "handles_moved": 3,
        "latency_ns": {"samples": 24, "alloc": {"256": 6, "512": 10, "1024": 4, "2048": 4},
                       "free": {"64": 8, "128": 10, "256": 6}}}, "device pool sums in --json", p)
    check(d.get("host_pool") == {
        "processes": 1, "allocs": 40, "frees": 38, "bad_frees": 0, "peak_live_bytes": 6 << 20,
        "pinned_bytes": 32 << 20, "chunks": 1, "driver_fallbacks": 1, "driver_direct": 0,
        "reuse_waits": 4, "reuse_wait_us": 1500}, "host pool sums", p)
    p = drk("report", "--json", fixture("pools", "drk-python-7002.json"))
    d = json.loads(p.stdout)
    check(p.returncode == 0 and "device_pool" not in d and "host_pool" not in d,
          "--json on a report without the pools has none", p)
    check("gpu_time" not in d and "gpu_time" not in d["processes"][0], "nor gpu_time", p)

    p = drk("report", "--json", fixture(*PROFILE))
    check(p.returncode == 0 and not p.stderr, "drk report --json with GPU times", p)
    d = json.loads(p.stdout)
    g = d["gpu_time"]
    check({k: v for k, v in g.items() if k != "by_kernel"} == {
        "enabled": True, "reports": 1, "processes": 1, "off_reason": None, "stopped_processes": 0, "kernels": 84,
        "kernel_ns": 360000, "copies": 8, "copy_ns": 84000, "copy_bytes": 4210688, "dropped": 0, "untracked": 0,
        "late": 0, "rounds": 5, "wall_ns": 4006000, "busy_ns": 444000, "distinct": 3}, f"gpu_time sums: {g}", p)
    check(g["by_kernel"] == json.load(open(fixture(*PROFILE)))["gpu_time"]["by_kernel"],
          "one report: its rows as they are", p)
    check(d["processes"][0]["gpu_time"] == {"enabled": True, "off_reason": None, "stopped": None, "rounds": 5,
                                            "wall_ns": 4006000, "busy_ns": 444000}, "per process: busy and wall", p)
    k = d["kernels"]["list"][0]
    check((k["gpu_ns"], k["gpu_launches"]) == (320000, 80), "a kernel's gpu_ns and gpu_launches", p)
    p = drk("report", "--json", fixture("single.json"))
    check(json.loads(p.stdout)["kernels"]["list"][0]["gpu_ns"] == 0, "gpu_ns 0 for a report without it", p)

    with tempfile.TemporaryDirectory() as tmp:
        profile_dir(tmp)
        p = drk("report", "--json", tmp)
        check(p.returncode == 0, "drk report --json on reports with and without times", p)
        d = json.loads(p.stdout)
        g = d["gpu_time"]
        check((g["enabled"], g["reports"], g["processes"], g["off_reason"], g["stopped_processes"], g["kernels"],
               g["kernel_ns"], g["dropped"], g["late"], g["rounds"], g["wall_ns"], g["busy_ns"], g["distinct"])
              == (True, 3, 2, "DRK_PROFILE=0", 1, 168, 780000, 3, 1, 10, 8012000, 888000, 3), f"sums: {g}", p)
        check(g["by_kernel"] == [
            {"name": "empty", "grid": [4, 1, 1], "block": [64, 1, 1], "shared_bytes": 0, "launches": 140,
             "total_ns": 540000, "min_ns": 1000, "median_ns": 3000, "p95_ns": 6000, "max_ns": 9000},
            {"name": "empty", "grid": [1, 1, 1], "block": [32, 1, 1], "shared_bytes": 0, "launches": 80,
             "total_ns": 160000, "min_ns": 2000, "median_ns": 2000, "p95_ns": 2000, "max_ns": 2000},
            {"name": "hidden", "grid": [2, 1, 1], "block": [128, 1, 1], "shared_bytes": 256, "launches": 8,
             "total_ns": 80000, "min_ns": 10000, "median_ns": 10000, "p95_ns": 10000, "max_ns": 12000}],
              f"rows combined by kernel-shape: {g['by_kernel']}", p)
        procs = {x["pid"]: x for x in d["processes"]}
        check("gpu_time" not in procs[4242] and procs[3]["gpu_time"]["enabled"] is False
              and procs[3]["gpu_time"]["off_reason"] == "DRK_PROFILE=0" and procs[2]["gpu_time"]["stopped"]
              == "the program began to use CUPTI itself", "per process gpu_time", p)
        empty = [x for x in d["kernels"]["list"] if x["name"] == "empty"][0]
        check((empty["gpu_ns"], empty["gpu_launches"]) == (640000, 160), "kernels' gpu_ns summed", p)
        p = drk("report", "--json", "--top", "1", tmp)
        g = json.loads(p.stdout)["gpu_time"]
        check(len(g["by_kernel"]) == 1 and g["distinct"] == 3 and g["by_kernel"][0]["launches"] == 140,
              "--json --top 1: one row", p)
    check_findings_json()
    check_compare_json()


def case_report_errors():
    p = drk("report", fixture("malformed.json"))
    check(p.returncode == 1 and "malformed.json:5:3: malformed JSON" in p.stderr and not p.stdout,
          "malformed JSON: exit 1, with line and column", p)
    p = drk("report", fixture("future.json"))
    check(p.returncode == 1 and "version 2 is newer" in p.stderr and "version 1" in p.stderr,
          "a newer version is refused as newer", p)
    p = drk("report", fixture("dir", "notes.json"))
    check(p.returncode == 1 and "not a drk report" in p.stderr, "a file of another schema: exit 1", p)
    p = drk("report", fixture("no-such.json"))
    check(p.returncode == 1 and "No such file" in p.stderr, "a missing file: exit 1", p)
    p = drk("report", "/dev/null")
    check(p.returncode == 1 and "unexpected end of input" in p.stderr, "an empty file", p)
    with tempfile.TemporaryDirectory() as tmp:
        p = drk("report", tmp)
        check(p.returncode == 1 and "no drk reports" in p.stderr, "an empty directory: exit 1", p)
        shutil.copy(fixture("dir", "notes.json"), tmp)
        p = drk("report", tmp)
        check(p.returncode == 1 and "no drk reports" in p.stderr, "a directory of other JSON: exit 1", p)
        shutil.copy(fixture("single.json"), tmp)
        shutil.copy(fixture("malformed.json"), tmp)
        p = drk("report", tmp)
        check(p.returncode == 1 and "malformed.json:5:3" in p.stderr, "one bad report fails the directory", p)
        os.unlink(os.path.join(tmp, "malformed.json"))
        shutil.copy(fixture("future.json"), tmp)
        p = drk("report", tmp)
        check(p.returncode == 1 and "version 2" in p.stderr, "a newer report fails the directory", p)
        if os.geteuid() != 0:  # root reads anything
            os.unlink(os.path.join(tmp, "future.json"))
            locked = os.path.join(tmp, "locked.json")
            shutil.copy(fixture("single.json"), locked)
            os.chmod(locked, 0)
            p = drk("report", locked)
            check(p.returncode == 1 and "cannot open" in p.stderr, "an unreadable file: exit 1", p)
    check_compare_errors()


def case_report_parser():
    """The JSON reader, through reports written here."""
    base = json.load(open(fixture("single.json")))
    with tempfile.TemporaryDirectory() as tmp:
        def write(text, name="r.json"):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            return path

        def variant(edit):
            d = json.loads(json.dumps(base))
            edit(d)
            return write(json.dumps(d, indent=2))

        # Escapes of every kind survive the trip through drk's reader and writer.
        odd = 'q"b\\s/\b\f\n\r\t\x01\u00e9\u20ac\U0001F680'
        def rename(d):
            d["kernels"]["list"][0]["name"] = odd
        p = drk("report", "--json", variant(rename))
        check(p.returncode == 0 and json.loads(p.stdout)["kernels"]["list"][0]["name"] == odd,
              "string escapes and \\u (incl. surrogate pairs) round-trip", p)

        # Counters are exact 64-bit integers, beyond what a double holds.
        def big(d):
            d["memory"]["device"]["bytes"] = 2**64 - 1
            d["memory"]["device"]["allocs"] = 2**53 + 1
            d["kernels"]["failed_launches"] = 2.0e1
        p = drk("report", "--json", variant(big))
        m = json.loads(p.stdout)["memory"]["device"] if p.returncode == 0 else {}
        check(m.get("bytes") == 2**64 - 1 and m.get("allocs") == 2**53 + 1, "exact uint64 counters", p)
        check(json.loads(p.stdout)["kernels"]["failed_launches"] == 20, "an integral 2.0e1 reads as 20", p)
        p = drk("report", variant(big))
        check(row(p.stdout, "device", str(2**53 + 1), "1", "16.0 EiB", "10"), "16 EiB in the table", p)

        def fail(path, *words):
            p = drk("report", path)
            check(p.returncode == 1 and all(w in p.stderr for w in words) and "Traceback" not in p.stderr,
                  f"refused with {words}", p)

        fail(write("[" * 100000 + "]" * 100000), "nested deeper than")
        fail(write('{"schema": "drk-report", "version": 1, "x": "\\ud800"}'), ":1:", "surrogate")
        fail(write('{"schema": "drk-report", "version": 1, "x": "\\udc00\\ud800"}'), "surrogate")
        fail(write('{"schema": "drk-report", "x": "\\q"}'), ":1:", "invalid escape")
        fail(write('{"schema": "drk-report", "x": "a\nb"}'), ":1:", "control character")
        fail(write('{"schema": "drk-report", "x": "abc'), ":1:", "unterminated string")
        fail(write('{"schema": "drk-report", "x": 01}'), ":1:")
        fail(write('{"schema": "drk-report", "x": -}'), ":1:", "invalid number")
        fail(write('{"schema": "drk-report", "x": 1.}'), ":1:", "invalid number")
        fail(write('{"schema": "drk-report", "x": tru}'), ":1:", "invalid literal")
        fail(write('{"schema": "drk-report",\n  "x": [1, 2,]}'), ":2:", "expected a value")
        fail(write('{"schema": "drk-report"} x'), ":1:26:", "after the document")
        fail(write('{"schema": "drk-report", "a": 1'), "unterminated object")
        fail(write('{"schema": "drk-report", "version": "1"}'), "version")
        fail(write('{"schema": "drk-report", "version": 0}'), "version")
        fail(write('{"schema": "drk-report"}'), "missing \"version\"")

        def drop(d):
            del d["kernels"]["list"][1]["launches"]
        fail(variant(drop), "kernels.list[1]", "launches")
        def negative(d):
            d["memory"]["host"]["bytes"] = -5
        fail(variant(negative), "memory.host.bytes", "non-negative integer")
        def bad_grid(d):
            d["kernels"]["list"][0]["shapes"][1]["grid"] = [1, 2]
        fail(variant(bad_grid), "kernels.list[0].shapes[1].grid")
        def no_calls(d):
            d["calls"] = []
        fail(variant(no_calls), "calls", "object")

        # Whitespace and a byte-order mark are fine; unknown fields are ignored.
        def extra(d):
            d["future_field"] = {"x": [None, True, False, 1.5e-3, -2]}
        path = variant(extra)
        text = "\ufeff\r\n\t " + open(path, encoding="utf-8").read() + "\n\n"
        p = drk("report", write(text, "bom.json"))
        check(p.returncode == 0 and "27000 launches" in p.stdout, "BOM, whitespace, unknown fields", p)

    # device_pool and host_pool: optional, but checked when there.
    base = json.load(open(fixture("pools", "drk-python-7000.json")))
    with tempfile.TemporaryDirectory() as tmp:
        def variant(edit, name="r.json"):
            d = json.loads(json.dumps(base))
            edit(d)
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(d, f, indent=2)
            return path

        # DRK_ALLOC=0 and DRK_HOST_ALLOC=0: both objects, no allocations, no lines.
        def off(d):
            for k in ("allocs", "frees", "peak_live_bytes", "peak_reserved_bytes", "pages_created"):
                d["device_pool"][k] = 0
            d["device_pool"]["enabled"] = d["host_pool"]["enabled"] = False
            d["device_pool"]["latency_ns"] = {"samples": 0, "alloc": {}, "free": {}}
            d["host_pool"]["allocs"] = 0
        p = drk("report", variant(off))
        check(p.returncode == 0 and "device pool" not in p.stdout and "host pool" not in p.stdout,
              "pools that served nothing print nothing", p)

        def host_only(d):
            d["device_pool"]["allocs"] = 0
        p = drk("report", variant(host_only))
        check(p.returncode == 0 and "device pool" not in p.stdout
              and re.search(r"^  host  .*\n\nhost pool: 40 allocs", p.stdout, re.M),
              "a host pool line without a device pool one", p)

        # The lowest bucket also holds 0 ns; an empty histogram has no median.
        def first_bucket(d):
            d["device_pool"]["latency_ns"] = {"samples": 3, "alloc": {"1": 2, "1024": 1}, "free": {}}
        p = drk("report", variant(first_bucket))
        check("alloc median 0\u20131 ns (3 samples), free median - (0 samples)" in p.stdout,
              "the first bucket's range starts at 0; no samples, no median", p)

        def fail(edit, *words):
            p = drk("report", variant(edit))
            check(p.returncode == 1 and all(w in p.stderr for w in words) and "Traceback" not in p.stderr,
                  f"refused with {words}", p)
        def not_object(d):
            d["device_pool"] = [1]
        fail(not_object, "device_pool: expected an object, found array")
        def host_not_object(d):
            d["host_pool"] = None
        fail(host_not_object, "host_pool: expected an object, found null")
        def missing(d):
            del d["device_pool"]["pages_moved"]
        fail(missing, "device_pool: missing \"pages_moved\"")
        def negative(d):
            d["host_pool"]["chunks"] = -1
        fail(negative, "host_pool.chunks", "non-negative integer")
        def bucket(d):
            d["device_pool"]["latency_ns"]["alloc"]["300"] = 1
        fail(bucket, "device_pool.latency_ns.alloc", "\"300\"", "power of two")
        def count(d):
            d["device_pool"]["latency_ns"]["free"]["128"] = 1.5
        fail(count, "device_pool.latency_ns.free.128", "non-negative integer")
        def no_latency(d):
            del d["device_pool"]["latency_ns"]
        fail(no_latency, "device_pool: missing \"latency_ns\"")

    # gpu_time, rounds and the kernels' gpu_ns: optional, but checked when there.
    base = json.load(open(fixture(*PROFILE)))
    with tempfile.TemporaryDirectory() as tmp:
        def variant(edit, name="r.json"):
            d = json.loads(json.dumps(base))
            edit(d)
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(d, f, indent=2)
            return path

        def off(d):
            d["gpu_time"].update(enabled=False, off_reason="CUPTI (libcupti.so) not found", source=None,
                                 kernels=0, kernel_ns=0, copies=0, copy_ns=0, copy_bytes=0, by_kernel=[])
            d["rounds"].update(closed=0, kept=0, marked=0, list=[])
        p = drk("report", variant(off))
        check(p.returncode == 0 and not p.stderr and "\n\nGPU times: off (CUPTI (libcupti.so) not found)\n\ncalls by"
              in p.stdout and "top kernels by GPU time" not in p.stdout and "rounds:" not in p.stdout,
              "gpu_time.enabled false: one line with the reason", p)

        def older(d):
            del d["gpu_time"], d["rounds"]
            for k in d["kernels"]["list"]:
                del k["gpu_ns"], k["gpu_launches"]
        p = drk("report", variant(older))
        check(p.returncode == 0 and not p.stderr and "GPU time" not in p.stdout and "rounds:" not in p.stdout,
              "without gpu_time and rounds (an older drk): no GPU lines", p)

        def long_run(d):
            d["rounds"]["merged"] = {"rounds": 100, "wall_ns": 100 * 10**6, "busy_ns": 25 * 10**6,
                                     "kernel_ns": 20 * 10**6, "copy_ns": 5 * 10**6, "kernels": 2000, "copies": 100}
            d["rounds"]["closed"] = 105
            d["gpu_time"]["untracked"] = 7
        p = drk("report", variant(long_run))
        o = p.stdout
        check(p.returncode == 0 and f"  GPU busy 25.4 ms of 104 ms (24.5%) over 105 rounds;" in o
              and "; 7 untracked records\n" in o, "busy over wall with merged rounds; untracked records", p)
        check("rounds: 105 closed (4 marked by the program), the last 5 listed:" in o
              and f"  ... 100 earlier rounds (100 merged by drk): wall 100 ms, busy 25.0 ms (25.0%), kernel time "
              "20.0 ms, copy time 5.00 ms, 2000 kernels\n" in o, "merged rounds: one line", p)

        def fail(edit, *words):
            p = drk("report", variant(edit))
            check(p.returncode == 1 and all(w in p.stderr for w in words) and not p.stdout
                  and "Traceback" not in p.stderr, f"refused with {words}", p)
        def rows_not_array(d):
            d["gpu_time"]["by_kernel"] = {"empty": 1}
        fail(rows_not_array, "gpu_time.by_kernel: expected an array, found object")
        def not_object(d):
            d["gpu_time"] = [1]
        fail(not_object, "gpu_time: expected an object, found array")
        def enabled(d):
            d["gpu_time"]["enabled"] = "yes"
        fail(enabled, "gpu_time.enabled: expected true or false, found string")
        def reason(d):
            d["gpu_time"]["off_reason"] = 3
        fail(reason, "gpu_time.off_reason: expected a string, found number")
        def missing(d):
            del d["gpu_time"]["kernel_ns"]
        fail(missing, "gpu_time: missing \"kernel_ns\"")
        def row_not_object(d):
            d["gpu_time"]["by_kernel"][1] = 5
        fail(row_not_object, "gpu_time.by_kernel[1]: expected an object, found number")
        def row_negative(d):
            d["gpu_time"]["by_kernel"][0]["p95_ns"] = -1
        fail(row_negative, "gpu_time.by_kernel[0].p95_ns", "non-negative integer")
        def row_grid(d):
            d["gpu_time"]["by_kernel"][2]["grid"] = [2, 1]
        fail(row_grid, "gpu_time.by_kernel[2].grid: expected 3 numbers")
        def no_max(d):
            del d["gpu_time"]["by_kernel"][0]["max_ns"]
        fail(no_max, "gpu_time.by_kernel[0]: missing \"max_ns\"")
        def gpu_ns(d):
            d["kernels"]["list"][0]["gpu_ns"] = "x"
        fail(gpu_ns, "kernels.list[0].gpu_ns", "non-negative integer")
        def rounds_not_object(d):
            d["rounds"] = None
        fail(rounds_not_object, "rounds: expected an object, found null")
        def merged(d):
            del d["rounds"]["merged"]["busy_ns"]
        fail(merged, "rounds.merged: missing \"busy_ns\"")
        def no_memory(d):
            del d["rounds"]["list"][0]["memory"]
        fail(no_memory, "rounds.list[0]: missing \"memory\"")
        def gap_edge(d):
            d["rounds"]["list"][2]["gaps"][0]["after"] = 1
        fail(gap_edge, "rounds.list[2].gaps[0].after: expected a string, found number")
        def top_row(d):
            del d["rounds"]["list"][3]["top"][1]["median_ns"]
        fail(top_row, "rounds.list[3].top[1]: missing \"median_ns\"")
        def ended_by(d):
            d["rounds"]["list"][4]["ended_by"] = None
        fail(ended_by, "rounds.list[4].ended_by: expected a string, found null")
    check_findings_malformed()


# ---------------------------------------------------------------- drk report: findings, --compare
# Run from the registered report_* cases above (tests/tools/CMakeLists.txt names the cases).

FINDINGS = ("findings", "drk-profile_route-11.json")  # profile_route rounds: gpu_idle, kernel_slower
ALL_FINDINGS = ("findings", "drk-profile_route-12.json")  # a copy edited to hold all five kinds
IDLE = ("round 3: GPU busy 13.1% of 1.0 ms; largest gaps: idle 569 us after memset before (round end); idle 108 us "
        "after empty before hidden")
SLOWER = ("round 2: empty at grid (4,1,1) block (64,1,1) shared 0: median 8.0 us, its best of the last 20 rounds it "
          "ran in 4.0 us (+100%), 10 launches, 73% of the round's\u2026")


def section(out, start, end):
    """The lines of `out` from the line starting `start` to the blank one before `end`."""
    i = out.find("\n" + start)
    j = out.find("\n" + end, i + 1)
    return out[i + 1:j].splitlines() if 0 <= i < j else None


def check_findings_text():
    check(len(SLOWER) == 160, "the evidence column is 160 characters")
    p = drk("report", fixture(*FINDINGS))
    o = p.stdout
    check(p.returncode == 0 and not p.stderr, "drk report on a report with findings", p)
    i = [o.find(x) for x in ("\nrounds:", "\nfindings: 2\n", "\ncalls by family:")]
    check(0 <= i[0] < i[1] < i[2], "findings after the rounds table, before the calls", p)
    check(section(o, "findings:", "calls by family:") == [
        "findings: 2",
        "  finding        rounds          kernel-shape              evidence",
        "  gpu_idle       0\u20133 (4 rounds)  -                         " + IDLE,
        "  kernel_slower  2\u20133 (2 rounds)  empty 4x1x1 / 64x1x1 / 0  " + SLOWER,
    ], "one line a finding: rounds, kernel-shape, the evidence cut at 160 characters", p)

    p = drk("report", fixture(*ALL_FINDINGS))
    def line(name, rounds, kernel, evidence):  # columns as wide as their widest cell
        return f"  {name:<13}  {rounds:<14}  {kernel:<55}  {evidence}"
    check(p.returncode == 0 and section(p.stdout, "findings:", "calls by family:") == [
        "findings: 5",
        line("finding", "rounds", "kernel-shape", "evidence"),
        line("gpu_idle", "0\u20133 (4 rounds)", "-", IDLE),
        line("kernel_slower", "2\u20133 (2 rounds)", "empty 4x1x1 / 64x1x1 / 0", SLOWER),
        line("new_shape", "3 (1 round)", "_ZN7cutlass6KernelINS_4gemm6k... 8x1x1 / 128x1x1 / 4096",
             "round 3: _ZN7cutlass6KernelINS_4gemm6kernel4GemmIfEEEEvNT_6ParamsE first ran at grid (8,1,1) block "
             "(128,1,1) shared 4096, 6 launches, 25% of the round's kernel\u2026"),
        line("fragmentation", "2\u20134 (3 rounds)", "-",
             "round 3: 60% of reserved device memory holds no live allocation (live 40.0 MiB, reserved 100.0 MiB, "
             "12 pages moved so far); the best of the last 20 rounds was \u2026"),
        line("out_of_memory", "3 (1 round)", "-",
             "round 3: the device pool answered out of memory 2 times so far (0 before the round); live 40.0 MiB, "
             "reserved 100.0 MiB"),
    ], "all five kinds; a long kernel name cut as in the rounds table", p)

    p = drk("report", fixture("findings"))
    o = p.stdout
    combined = o[o.find("== combined: 2 processes =="):]
    check(p.returncode == 0 and o.count("\nfindings: 2\n") == 1 and o.count("\nfindings: 5\n") == 1,
          "a directory: each process's findings", p)
    lines = section(combined, "findings:", "calls by family:")
    check(lines is not None and lines[0] == "findings: 7 in 2 of 2 processes:"
          and re.match(r"  pid  finding\s+rounds\s+kernel-shape\s+evidence$", lines[1])
          and [tuple(l.split()[:2]) for l in lines[2:]] == [
              ("11", "gpu_idle"), ("11", "kernel_slower"), ("12", "gpu_idle"), ("12", "kernel_slower"),
              ("12", "new_shape"), ("12", "fragmentation"), ("12", "out_of_memory")]
          and lines[2].startswith("   11  gpu_idle       0\u20133 (4 rounds)  -  ") and lines[2].endswith(IDLE),
          f"combined: every process's findings with its pid: {lines}", p)

    # Reports of a drk before findings: no section, no error (and the combined section says whose are there).
    p = drk("report", fixture(*PROFILE))
    check(p.returncode == 0 and not p.stderr and "findings" not in p.stdout, "no findings array: no section", p)
    p = drk("report", fixture("single.json"))
    check(p.returncode == 0 and "findings" not in p.stdout, "an older report still: no section", p)
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(fixture(*PROFILE), tmp)
        shutil.copy(fixture(*FINDINGS), tmp)
        p = drk("report", tmp)
        combined = p.stdout[p.stdout.find("== combined"):]
        check(p.returncode == 0 and "\nfindings: 2 in 1 of 2 processes:\n" in combined
              and p.stdout.count("\nfindings:") == 2, "one report with findings, one without", p)
        d = json.load(open(fixture(*FINDINGS)))
        d["findings"] = []
        path = os.path.join(tmp, "drk-profile_route-11.json")
        with open(path, "w") as f:
            json.dump(d, f)
        p = drk("report", path)
        check(p.returncode == 0 and "\n\nfindings: none\n\ncalls by family:" in p.stdout,
              "times and no findings: 'findings: none'", p)
        d["gpu_time"].update(enabled=False, off_reason="DRK_PROFILE=0", by_kernel=[])
        d["rounds"].update(closed=0, kept=0, list=[])
        with open(path, "w") as f:
            json.dump(d, f)
        p = drk("report", path)
        check(p.returncode == 0 and "findings" not in p.stdout, "no times, no findings: nothing said", p)
    # A newer drk's by_kernel rows carry their occupancy (an object or null) and its findings occupancy_drop:
    # read as any other row and finding.
    with tempfile.TemporaryDirectory() as tmp:
        d = json.load(open(fixture(*FINDINGS)))
        rows = d["gpu_time"]["by_kernel"]
        rows[0]["occupancy"] = {"theoretical": 0.25, "blocks_per_sm": 2, "warps_per_block": 8, "max_warps_per_sm": 64,
                                "limited_by": "registers", "registers": 128, "static_shared_bytes": 0}
        rows[1]["occupancy"] = None
        evidence = ("round 3: empty at block (64,1,1), dyn smem 0: theoretical occupancy 25% (16 of 64 warps an SM, "
                    "limited by registers: 128 a thread), was 100% at block (64,1,1), dyn smem 0 in round 2")
        d["findings"].append({"name": "occupancy_drop", "first_round": 3, "last_round": 3, "rounds": 1,
                              "kernel": {"name": "empty", "grid": [4, 1, 1], "block": [64, 1, 1], "shared_bytes": 0},
                              "value": 0.25, "reference": 1, "evidence": evidence})
        path = os.path.join(tmp, "drk-profile_route-11.json")
        with open(path, "w") as f:
            json.dump(d, f)
        p = drk("report", path)
        lines = section(p.stdout, "findings:", "calls by family:") if p.returncode == 0 else None
        check(lines is not None and lines[0] == "findings: 3" and lines[4].startswith("  occupancy_drop  3 (1 round)")
              and "empty 4x1x1 / 64x1x1 / 0" in lines[4] and "theoretical occupancy 25%" in lines[4],
              "occupancy in by_kernel, and occupancy_drop, as any other row and finding", p)
        p = drk("report", "--json", path)
        check(p.returncode == 0 and json.loads(p.stdout)["processes"][0]["findings"][2]["evidence"] == evidence,
              "--json: occupancy_drop with its evidence whole", p)


def check_findings_json():
    p = drk("report", "--json", fixture("findings"))
    check(p.returncode == 0 and not p.stderr, "drk report --json with findings", p)
    procs = {x["pid"]: x for x in json.loads(p.stdout)["processes"]}
    for pid, name in ((11, FINDINGS), (12, ALL_FINDINGS)):
        want = json.load(open(fixture(*name)))["findings"]
        check(procs[pid]["findings"] == want, f"pid {pid}: its findings as in its report, evidence whole", p)
    check([x["name"] for x in procs[12]["findings"]] == ["gpu_idle", "kernel_slower", "new_shape", "fragmentation",
                                                         "out_of_memory"], "all five kinds", p)
    p = drk("report", "--json", fixture(*PROFILE))
    check(p.returncode == 0 and "findings" not in json.loads(p.stdout)["processes"][0],
          "--json: no findings key for a report without them", p)


def check_findings_malformed():
    base = json.load(open(fixture(*ALL_FINDINGS)))
    with tempfile.TemporaryDirectory() as tmp:
        def variant(edit):
            d = json.loads(json.dumps(base))
            edit(d)
            path = os.path.join(tmp, "r.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(d, f, indent=2)
            return path

        def fail(edit, *words):
            p = drk("report", variant(edit))
            check(p.returncode == 1 and all(w in p.stderr for w in words) and not p.stdout
                  and "Traceback" not in p.stderr, f"findings refused with {words}", p)
        def not_array(d):
            d["findings"] = {"gpu_idle": 1}
        fail(not_array, "findings: expected an array, found object")
        def not_object(d):
            d["findings"][1] = 3
        fail(not_object, "findings[1]: expected an object, found number")
        def no_evidence(d):
            del d["findings"][0]["evidence"]
        fail(no_evidence, "findings[0]: missing \"evidence\"")
        def no_kernel(d):
            del d["findings"][0]["kernel"]
        fail(no_kernel, "findings[0]: missing \"kernel\"")
        def value(d):
            d["findings"][2]["value"] = "25%"
        fail(value, "findings[2].value: expected a number, found string")
        def first(d):
            d["findings"][3]["first_round"] = -1
        fail(first, "findings[3].first_round", "non-negative integer")
        def kernel(d):
            d["findings"][1]["kernel"] = "empty"
        fail(kernel, "findings[1].kernel: expected an object or null, found string")
        def grid(d):
            d["findings"][2]["kernel"]["grid"] = [8, 1]
        fail(grid, "findings[2].kernel.grid: expected 3 numbers, found 2")
        def kernel_name(d):
            del d["findings"][1]["kernel"]["name"]
        fail(kernel_name, "findings[1].kernel: missing \"name\"")

        # A kind this drk does not know (a newer drk's) is shown as it is; values may be any number.
        def newer(d):
            d["findings"][4].update(name="future_kind", value=-0.5, reference=1e-3)
        p = drk("report", variant(newer))
        check(p.returncode == 0 and re.search(r"^  future_kind\s+3 \(1 round\)\s+-\s+round 3:", p.stdout, re.M),
              "an unknown finding name is printed", p)


def scaled(d, factor, rounds=None):
    """A copy of report `d` with every *_ns count times `factor`; `rounds`: a
    factor per round index for the rounds' kernel_ns instead."""
    def walk(x):
        if isinstance(x, dict):
            return {k: int(v * factor) if k.endswith("_ns") and isinstance(v, int) else walk(v)
                    for k, v in x.items()}
        return [walk(v) for v in x] if isinstance(x, list) else x
    out = walk(d)
    for r in out["rounds"]["list"] if rounds else []:
        r["kernel_ns"] = int(r["kernel_ns"] / factor * rounds[r["index"]])
    return out


def compare_inputs(tmp):
    """B: the profile fixture's times times 1.5; B2: its rounds' kernel time
    times 1, 1.5, 2 and 3, and a kernel A lacks; off: times off."""
    base = json.load(open(fixture(*PROFILE)))
    paths = {}
    def write(name, d):
        paths[name] = os.path.join(tmp, name + ".json")
        with open(paths[name], "w") as f:
            json.dump(d, f, indent=1)
    write("b", scaled(base, 1.5))
    b2 = scaled(base, 1.5, rounds=[1.0, 1.5, 2.0, 3.0, 1.0])
    b2["gpu_time"]["by_kernel"].append({"name": "newk", "grid": [1, 1, 1], "block": [1, 1, 1], "shared_bytes": 0,
                                        "launches": 2, "total_ns": 1000, "min_ns": 500, "median_ns": 500,
                                        "p95_ns": 500, "max_ns": 500})
    write("b2", b2)
    off = json.loads(json.dumps(base))
    off["gpu_time"].update(enabled=False, off_reason="DRK_PROFILE=0", source=None, kernels=0, kernel_ns=0, copies=0,
                           copy_ns=0, copy_bytes=0, by_kernel=[])
    off["rounds"].update(closed=0, kept=0, marked=0, list=[])
    write("off", off)
    return paths


def check_compare_text():
    a = fixture("profile")
    with tempfile.TemporaryDirectory() as tmp:
        paths = compare_inputs(tmp)
        p = drk("report", "--compare", a, paths["b"])
        o = p.stdout
        check(p.returncode == 0 and not p.stderr, "drk report --compare A B", p)
        check(o.startswith(
            "== compare: B against A ==\n"
            f"  A  {a} (1 process): GPU busy 444 {MICRO} of 4.01 ms (11.1%) over 5 rounds, kernel time 360 {MICRO}, "
            "80 launches\n"
            f"  B  {paths['b']} (1 process): GPU busy 666 {MICRO} of 6.01 ms (11.1%) over 5 rounds, kernel time 540 "
            f"{MICRO}, 80 launches\n"
            "  B/A: wall 1.500, busy 1.500, kernel time 1.500, launches 1.000\n\n"
            "kernels by GPU time (all shapes), B against A:\n"), "both sides: busy share, totals, ratios", p)
        check(row(o, "kernel", "A GPU time", "B GPU time", "B/A", "A launches", "B launches")
              and row(o, "empty", "320 " + MICRO, "480 " + MICRO, "1.500", "80", "80")
              and row(o, "hidden", "40.0 " + MICRO, "60.0 " + MICRO, "1.500", "4", "4")
              and o.find("  empty ") < o.find("  hidden "), "kernels merged over shapes, most time first", p)
        check("\nrounds both have (by index): 5; B against A:\n" in o
              and row(o, "round", "A wall", "B wall", "B/A", "A busy", "B busy", "B/A", "A kernel time",
                      "B kernel time", "B/A")
              and row(o, "0", "1.00 ms", "1.50 ms", "1.500", "91.0 " + MICRO, "136 " + MICRO, "1.500",
                      "70.0 " + MICRO, "105 " + MICRO, "1.500")
              and row(o, "3", "1.00 ms", "1.50 ms", "1.500", "131 " + MICRO, "196 " + MICRO, "1.500",
                      "110 " + MICRO, "165 " + MICRO, "1.500")
              and row(o, "4", "5.00 " + MICRO, "7.50 " + MICRO, "1.500", "0 ns", "0 ns", "-", "0 ns", "0 ns", "-"),
              "the rounds both have, with ratios; '-' where A has none", p)
        check(o.endswith("\n  kernel time B/A per round: median 1.500, range 1.500..1.500 over 4 rounds (1 without "
                         "kernel time in A left out): the noise of the rounds shown\n"), "the median ratio line", p)
        p = drk("report", a, paths["b"], "--compare")
        check(p.returncode == 0 and p.stdout == o, "--compare after the paths", p)

        p = drk("report", "--compare", a, paths["b2"])
        o = p.stdout
        check(p.returncode == 0 and row(o, "newk", "-", "1.00 " + MICRO, "(B only)", "-", "2")
              and "  kernel time B/A per round: median 1.750, range 1.000..3.000 over 4 rounds" in o,
              "a kernel on one side only; the median of an even count, the range", p)
        p = drk("report", "--compare", "--top", "2", a, paths["b2"])
        o = p.stdout
        check(p.returncode == 0 and "newk" not in o and f"  ... 1 more kernel: A 0 ns, B 1.00 {MICRO}\n" in o
              and "rounds both have (by index): 5, the last 2 listed; B against A:" in o
              and not re.search(r"^\s+[012]\s+\d", o, re.M)
              and "  kernel time B/A per round: median 3.000, range 3.000..3.000 over 1 round (1 without" in o,
              "--top: kernels, and the last rounds, the median of those shown", p)
        p = drk("report", "--compare", fixture("findings"), a)
        check(p.returncode == 0 and "  A  " + fixture("findings") + " (2 processes): " in p.stdout
              and row(p.stdout, "empty", "640 " + MICRO, "320 " + MICRO, "0.500", "160", "80")
              and "kernel time B/A per round: median 0.500, range 0.500..0.500 over 4 rounds" in p.stdout,
              "a directory: kernels and each round summed over its processes", p)

        # A side without times: launches, and said.
        p = drk("report", "--compare", a, paths["off"])
        o = p.stdout
        check(p.returncode == 0 and f"  B  {paths['off']} (1 process): no GPU times (off: DRK_PROFILE=0), 80 "
              "launches\n" in o and "  B has no GPU times: kernels compared by launches; B/A: launches 1.000\n" in o
              and "\nkernels by launches, B against A:\n" in o and row(o, "kernel", "A launches", "B launches", "B/A")
              and row(o, "empty", "80", "80", "1.000") and "hidden" not in o
              and o.endswith("\nrounds: not compared, without GPU times on both sides\n"), "B without times", p)
        p = drk("report", "--compare", fixture("single.json"), a)
        o = p.stdout
        check(p.returncode == 0 and "(1 process): no GPU times (no gpu_time: an older drk), 27000 launches" in o
              and "  A has no GPU times: kernels compared by launches; B/A: launches 0.003\n" in o
              and row(o, "ampere_sgemm_128x64_tn", "8000", "-", "(A only)") and row(o, "empty", "-", "80", "(B only)"),
              "A from an older drk", p)


def check_compare_json():
    a = fixture("profile")
    with tempfile.TemporaryDirectory() as tmp:
        paths = compare_inputs(tmp)
        p = drk("report", "--compare", "--json", a, paths["b"])
        check(p.returncode == 0 and not p.stderr, "drk report --compare --json", p)
        d = json.loads(p.stdout)
        check(d["schema"] == "drk-report-compare" and d["version"] == 1 and d["by"] == "gpu_time", "schema", p)
        check(d["a"] == {"path": a, "processes": 1, "timed_processes": 1, "launches": 80, "rounds": 5,
                         "wall_ns": 4006000, "busy_ns": 444000, "kernel_ns": 360000}
              and d["b"]["kernel_ns"] == 540000 and d["b"]["busy_ns"] == 666000, f"the sides: {d['a']}", p)
        check(d["distinct"] == 2 and d["kernels"] == [
            {"name": "empty", "a": {"gpu_ns": 320000, "launches": 80}, "b": {"gpu_ns": 480000, "launches": 80},
             "ratio": 1.5},
            {"name": "hidden", "a": {"gpu_ns": 40000, "launches": 4}, "b": {"gpu_ns": 60000, "launches": 4},
             "ratio": 1.5}], f"kernels: {d['kernels']}", p)
        r = d["rounds"]
        check(d["common_rounds"] == 5 and [x["index"] for x in r] == [0, 1, 2, 3, 4]
              and r[0] == {"index": 0, "a": {"wall_ns": 1001000, "busy_ns": 91000, "kernel_ns": 70000},
                           "b": {"wall_ns": 1501500, "busy_ns": 136500, "kernel_ns": 105000},
                           "wall_ratio": 1.5, "busy_ratio": 1.5, "kernel_ratio": 1.5}
              and r[4]["kernel_ratio"] is None and r[4]["busy_ratio"] is None, f"rounds: {r}", p)
        check(d["kernel_ratio"] == {"rounds": 4, "median": 1.5, "min": 1.5, "max": 1.5}, "the median ratio", p)
        p = drk("report", "--compare", "--json", "--top", "1", a, paths["b2"])
        d = json.loads(p.stdout)
        check(p.returncode == 0 and len(d["kernels"]) == 1 and d["distinct"] == 3 and len(d["rounds"]) == 1
              and d["rounds"][0]["index"] == 4 and d["kernel_ratio"] is None, "--json --top 1", p)
        p = drk("report", "--compare", "--json", a, paths["b2"])
        d = json.loads(p.stdout)
        check(d["kernel_ratio"] == {"rounds": 4, "median": 1.75, "min": 1, "max": 3}
              and {"name": "newk", "a": None, "b": {"gpu_ns": 1000, "launches": 2}, "ratio": None} in d["kernels"],
              "--json: a kernel on one side only", p)
        p = drk("report", "--compare", "--json", a, paths["off"])
        d = json.loads(p.stdout)
        check(p.returncode == 0 and d["by"] == "launches" and d["kernels"] == [
            {"name": "empty", "a": {"launches": 80}, "b": {"launches": 80}, "ratio": 1}]
              and d["rounds"] == [] and d["kernel_ratio"] is None and d["b"]["timed_processes"] == 0,
              "--json, a side without times: launches", p)


def check_compare_errors():
    a = fixture(*PROFILE)
    for argv in (["--compare"], ["--compare", a], ["--compare", a, a, a], ["--compare", "--html", "x.html", a, a],
                 ["--compare", "--top", "x", a, a]):
        p = drk("report", *argv)
        check(p.returncode == 2 and "usage: drk report" in p.stderr and "--compare" in p.stderr and not p.stdout,
              f"drk report {argv}: usage error", p)
    p = drk("report", "--compare", a)
    check("--compare needs two paths" in p.stderr, "one path: says two are needed", p)
    for b, words in ((fixture("no-such.json"), "No such file"), (fixture("dir", "notes.json"), "not a drk report"),
                     (fixture("malformed.json"), "malformed.json:5:3: malformed JSON"),
                     (fixture("future.json"), "version 2 is newer")):
        for argv in ((a, b), (b, a)):
            p = drk("report", "--compare", *argv)
            check(p.returncode == 1 and words in p.stderr and not p.stdout, f"--compare {argv}: exit 1, {words}", p)
    with tempfile.TemporaryDirectory() as tmp:
        p = drk("report", "--compare", a, tmp)
        check(p.returncode == 1 and "no drk reports" in p.stderr and not p.stdout, "--compare: an empty directory", p)


# ---------------------------------------------------------------- drk report: counters
# DRK_PROFILE=counters: gpu_time.counters and gpu_time.excluded. fixtures/counters: pids 21 and 22 with counters
# on (the big empty shape sampled in both), 23 with DRK_PROFILE=1 (counters not asked), 24 an older drk's report
# (neither key); all four otherwise the profile fixture.

COUNTERS = "counters"
COUNTERS_HEAD = ("kernel", "grid", "block", "shared", "DRAM %", "occupancy %", "ld sectors/req", "st sectors/req",
                 "round", "samples")


def counters_fixture(pid):
    return fixture(COUNTERS, f"drk-train-{pid}.json")


def counter_lines(out, end="rounds:"):
    """The lines of the counters block: its title (or its one line) to the blank line before `end`."""
    i = out.find("\ncounters")
    j = out.find("\n\n" + end, i)
    return out[i + 1:j].splitlines() if 0 <= i < j else None


def cells(line):
    """A table line's cells: columns are two or more blanks apart."""
    return re.split(r"\s{2,}", line.strip())


def case_report_counters():
    long_cut = LONG[:61] + "..."
    # One process: the table most GPU time first (the report lists hidden first, as first sampled), -1 as "-".
    p = drk("report", counters_fixture(21))
    o = p.stdout
    check(p.returncode == 0 and not p.stderr, "drk report on a report with counters", p)
    i = [o.find(x) for x in ("\ntop kernels by GPU time", "\ncounters by kernel-shape", "\nrounds:")]
    check(0 <= i[0] < i[1] < i[2], "the counters after the top kernels by GPU time, before the rounds", p)
    check("; 2 launches sampled for counters, not timed\n" in o, "gpu_time.excluded in the summary line", p)
    lines = counter_lines(o)
    check(lines is not None and lines[0] == "counters by kernel-shape (the latest sample of each):"
          and [cells(l) for l in lines[1:]] == [
              list(COUNTERS_HEAD),
              ["empty", "4x1x1", "64x1x1", "0", "42.5", "61.4", "4.00", "4.00", "2", "1"],
              ["hidden", "2x1x1", "128x1x1", "256", "3.2", "12.5", "16.50", "-", "0", "1"],
              [long_cut, "8x1x1", "128x1x1", "4096", "71.6", "33.3", "8.00", "2.50", "3", "1"],
              ["counters: 3 samples (1 given up), 3 passes each, 460 ms in sampled launches (budget 5%)"]]
          and lines[-1].startswith("  counters: "), f"the counters table and its line: {lines}", p)
    check(row(o, "hidden", "2x1x1", "128x1x1", "256", "3.2", "12.5", "16.50", "-", "0", "1"),
          "a row's cells, in their columns", p)

    p = drk("report", "--top", "1", counters_fixture(21))
    lines = counter_lines(p.stdout)
    check(p.returncode == 0 and len(lines) == 5 and cells(lines[2])[0] == "empty"
          and lines[3] == "  ... 2 more kernel-shapes", f"--top 1: one row and the rest counted: {lines}", p)

    # Counters not asked (DRK_PROFILE=1) and an older drk's report: nothing, and the text as it was.
    for pid in (23, 24):
        p = drk("report", counters_fixture(pid))
        check(p.returncode == 0 and not p.stderr and "\ncounters" not in p.stdout
              and "sampled for counters" not in p.stdout, f"pid {pid}: no counters lines", p)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "drk-train-23.json")
        d = json.load(open(counters_fixture(23)))
        outs = {}
        for kind in ("with", "without"):
            if kind == "without":
                del d["gpu_time"]["counters"], d["gpu_time"]["excluded"]
            with open(path, "w") as f:
                json.dump(d, f)
            outs[kind] = [drk("report", *argv, path) for argv in ([], ["--top", "2"], ["--html", "-"])]
            outs[kind].append(drk("report", "--json", path))
        for a, b in zip(outs["with"][:3], outs["without"][:3]):
            check(a.returncode == 0 and a.stdout == b.stdout and a.stdout, "counters not asked: byte for byte the "
                  "text and page of a report without the keys", a)
        g = [json.loads(x.stdout)["gpu_time"] for x in (outs["with"][3], outs["without"][3])]
        check(g[0]["excluded"] == 0 and g[0]["counters"]["enabled"] is False and "excluded" not in g[1]
              and "counters" not in g[1], "--json: the keys passed through where the report has them only",
              outs["with"][3])
        # The same for the profile fixture (older), and the combined section of a directory of such reports.
        p = drk("report", fixture(*PROFILE))
        check(p.returncode == 0 and "\ncounters" not in p.stdout and "sampled for counters" not in p.stdout,
              "an older report", p)

        # Asked for, but off: one line with the reason, no table.
        d = json.load(open(counters_fixture(21)))
        why = "cuptiRangeProfilerEnable failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"
        d["gpu_time"]["counters"].update(enabled=False, off_reason=why, samples=0, discarded=0, cost_ns=0,
                                         by_kernel=[])
        d["gpu_time"]["excluded"] = 0
        off = os.path.join(tmp, "off", "drk-train-31.json")
        os.mkdir(os.path.dirname(off))
        d["process"]["pid"] = 31
        with open(off, "w") as f:
            json.dump(d, f)
        p = drk("report", off)
        check(p.returncode == 0 and f"(4.02 MiB)\n\ncounters: off ({why})\n\nrounds:" in p.stdout
              and "counters by kernel-shape" not in p.stdout and "sampled for counters" not in p.stdout,
              "counters off: one line with off_reason", p)
        # ... and GPU times off with it (the reason is timing's).
        t = json.loads(json.dumps(d))
        t["gpu_time"].update(enabled=False, off_reason="CUPTI (libcupti.so) not found", source=None, by_kernel=[])
        t["gpu_time"]["counters"]["off_reason"] = "CUPTI (libcupti.so) not found"
        t["rounds"].update(closed=0, kept=0, marked=0, list=[])
        nocupti = os.path.join(tmp, "nocupti.json")
        with open(nocupti, "w") as f:
            json.dump(t, f)
        p = drk("report", nocupti)
        check(p.returncode == 0 and "\nGPU times: off (CUPTI (libcupti.so) not found)\ncounters: off (CUPTI "
              "(libcupti.so) not found)\n\ncalls by family:" in p.stdout, "GPU times off: the counters' line too", p)
        # On, but nothing sampled: the line alone.
        z = json.loads(json.dumps(json.load(open(counters_fixture(22)))))
        z["gpu_time"]["counters"].update(samples=0, discarded=2, cost_ns=1500000, by_kernel=[])
        zero = os.path.join(tmp, "zero.json")
        with open(zero, "w") as f:
            json.dump(z, f)
        p = drk("report", zero)
        check(p.returncode == 0 and f"\n\ncounters: 0 samples (2 given up), 3 passes each, 1.50 ms in sampled "
              "launches (budget 5%)\n\nrounds:" in p.stdout, "on, nothing sampled: the line, no table", p)

        # Combined: one off among the sampled.
        shutil.copy(counters_fixture(22), os.path.dirname(off))
        p = drk("report", os.path.dirname(off))
        combined = p.stdout[p.stdout.find("== combined"):]
        lines = counter_lines(combined, "calls by family:")
        check(p.returncode == 0 and lines[0].startswith("counters by kernel-shape (1 of 2 processes sampled;")
              and lines[-1] == "  counters: 3 samples (0 given up), 3 passes each, 690 ms in sampled launches "
              f"(budget 5%); off in 1 process (first reason: {why})", f"combined, one off: {lines}", p)
        os.unlink(os.path.join(os.path.dirname(off), "drk-train-22.json"))
        shutil.copy(off, os.path.join(os.path.dirname(off), "drk-train-32.json"))
        shutil.copy(counters_fixture(23), os.path.dirname(off))
        p = drk("report", os.path.dirname(off))
        combined = p.stdout[p.stdout.find("== combined"):]
        check(p.returncode == 0 and f"(sums over processes); kernel time" in combined
              and counter_lines(combined, "calls by family:") == [
                  f"counters: off in 2 of 3 processes (first reason: {why})"],
              "combined, none on: one line, the reason of one that asked", p)

    # Merged: rows of a kernel-shape from several processes, the mean of their values, samples summed, the
    # largest round; most GPU time first.
    p = drk("report", fixture(COUNTERS))
    o = p.stdout
    check(p.returncode == 0 and not p.stderr, "drk report on a directory with counters", p)
    heads = [o.find(f"== train (pid {pid}) ==") for pid in (21, 22, 23, 24)] + [o.find("== combined: 4 processes")]
    check(all(0 <= a < b for a, b in zip(heads, heads[1:])), "four processes, then combined", p)
    per = [o[a:b] for a, b in zip(heads, heads[1:])]
    combined = o[heads[4]:]
    check(counter_lines(per[0]) == counter_lines(drk("report", counters_fixture(21)).stdout)
          and "\ncounters" not in per[2] + per[3] and "sampled for counters" not in per[2] + per[3],
          "per process as alone; none for the one not asked and the older one", p)
    check([cells(l) for l in counter_lines(per[1])[2:4]] == [
        ["empty", "4x1x1", "64x1x1", "0", "37.3", "58.2", "4.50", "4.00", "5", "2"],
        ["empty", "1x1x1", "32x1x1", "0", "1.5", "20.1", "-", "8.00", "3", "1"]], "pid 22's rows", p)
    lines = counter_lines(combined, "calls by family:")
    check(lines is not None
          and lines[0] == "counters by kernel-shape (2 of 4 processes sampled; the mean of their latest samples):"
          and [cells(l) for l in lines[1:]] == [
              list(COUNTERS_HEAD),
              ["empty", "4x1x1", "64x1x1", "0", "39.9", "59.8", "4.25", "4.00", "5", "3"],
              ["empty", "1x1x1", "32x1x1", "0", "1.5", "20.1", "-", "8.00", "3", "1"],
              ["hidden", "2x1x1", "128x1x1", "256", "3.2", "12.5", "16.50", "-", "0", "1"],
              [long_cut, "8x1x1", "128x1x1", "4096", "71.6", "33.3", "8.00", "2.50", "3", "1"],
              ["counters: 6 samples (1 given up), 3 passes each, 1.15 s in sampled launches (budget 5%)"]],
          f"combined: {lines}", p)
    check("(sums over processes); kernel time 1.44 ms in 336 kernels, copy time 336 " + MICRO + " in 32 copies "
          "(16.1 MiB); 5 launches sampled for counters, not timed\n" in combined, "excluded summed", p)

    # --json: gpu_time.counters as in the report, with the sums' counts; merged as the text.
    p = drk("report", "--json", counters_fixture(21))
    check(p.returncode == 0 and not p.stderr, "drk report --json with counters", p)
    g = json.loads(p.stdout)["gpu_time"]
    want = json.load(open(counters_fixture(21)))["gpu_time"]["counters"]
    got = g["counters"]
    check(g["excluded"] == 2, "gpu_time.excluded passed through", p)
    check({k: v for k, v in got.items() if k not in ("by_kernel", "reports", "processes", "distinct")}
          == {k: v for k, v in want.items() if k != "by_kernel"}
          and (got["reports"], got["processes"], got["distinct"]) == (1, 1, 3), f"counters: {got}", p)
    by_gpu = [want["by_kernel"][i] for i in (1, 0, 2)]  # empty 240 us, hidden 40 us, the long one untimed
    check(got["by_kernel"] == by_gpu, f"the rows as in the report, most GPU time first: {got['by_kernel']}", p)
    p = drk("report", "--json", "--top", "1", counters_fixture(21))
    got = json.loads(p.stdout)["gpu_time"]["counters"]
    check(got["by_kernel"] == by_gpu[:1] and got["distinct"] == 3, "--json --top 1: one row", p)

    p = drk("report", "--json", fixture(COUNTERS))
    d = json.loads(p.stdout)
    got = d["gpu_time"]["counters"]
    check(d["gpu_time"]["excluded"] == 5 and {k: v for k, v in got.items() if k != "by_kernel"} == {
        "enabled": True, "reports": 3, "processes": 2, "off_reason": "DRK_PROFILE is not counters", "samples": 6,
        "discarded": 1, "cost_ns": 1150000000, "passes": 3, "budget": 0.05, "distinct": 4},
          f"combined sums: {got}", p)
    check(got["by_kernel"] == [
        {"name": "empty", "grid": [4, 1, 1], "block": [64, 1, 1], "shared_bytes": 0, "dram_pct": 39.9,
         "occupancy_pct": 59.8, "ld_sectors_per_request": 4.25, "st_sectors_per_request": 4, "samples": 3,
         "round": 5},
        {"name": "empty", "grid": [1, 1, 1], "block": [32, 1, 1], "shared_bytes": 0, "dram_pct": 1.5,
         "occupancy_pct": 20.1, "ld_sectors_per_request": -1, "st_sectors_per_request": 8, "samples": 1,
         "round": 3}] + by_gpu[1:], f"combined rows: {got['by_kernel']}", p)

    # The reader: optional, checked when there.
    base = json.load(open(counters_fixture(21)))
    with tempfile.TemporaryDirectory() as tmp:
        def fail(edit, *words):
            d = json.loads(json.dumps(base))
            edit(d)
            path = os.path.join(tmp, "r.json")
            with open(path, "w") as f:
                json.dump(d, f)
            p = drk("report", path)
            check(p.returncode == 1 and all(w in p.stderr for w in words) and not p.stdout,
                  f"counters refused with {words}", p)
        def not_object(d):
            d["gpu_time"]["counters"] = []
        fail(not_object, "gpu_time.counters: expected an object, found array")
        def enabled(d):
            d["gpu_time"]["counters"]["enabled"] = 1
        fail(enabled, "gpu_time.counters.enabled: expected true or false, found number")
        def budget(d):
            d["gpu_time"]["counters"]["budget"] = "5%"
        fail(budget, "gpu_time.counters.budget: expected a number, found string")
        def no_passes(d):
            del d["gpu_time"]["counters"]["passes"]
        fail(no_passes, "gpu_time.counters: missing \"passes\"")
        def rows(d):
            d["gpu_time"]["counters"]["by_kernel"] = {}
        fail(rows, "gpu_time.counters.by_kernel: expected an array, found object")
        def no_dram(d):
            del d["gpu_time"]["counters"]["by_kernel"][1]["dram_pct"]
        fail(no_dram, "gpu_time.counters.by_kernel[1]: missing \"dram_pct\"")
        def sectors(d):
            d["gpu_time"]["counters"]["by_kernel"][0]["st_sectors_per_request"] = None
        fail(sectors, "gpu_time.counters.by_kernel[0].st_sectors_per_request: expected a number, found null")
        def grid(d):
            d["gpu_time"]["counters"]["by_kernel"][2]["grid"] = [8, 1]
        fail(grid, "gpu_time.counters.by_kernel[2].grid: expected 3 numbers, found 2")
        def samples(d):
            d["gpu_time"]["counters"]["by_kernel"][0]["samples"] = -1
        fail(samples, "gpu_time.counters.by_kernel[0].samples", "non-negative integer")
        def excluded(d):
            d["gpu_time"]["excluded"] = 1.5
        fail(excluded, "gpu_time.excluded", "non-negative integer")


EVOLVE = "evolve"
EVOLVE_HEAD = ("kernel", "grid", "block", "shared", "state", "serving", "speedup", "tried / proven / rejected",
               "builds", "why")
EVOLVE_REFUSED = ("the original differs from itself between two runs of the same launch: its results are not "
                  "reproducible, so no variant can be proven equal")
EVOLVE_FAILED = "cuLaunchKernel of a trial failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
EVOLVE_OFF = "no GPU times (see gpu_time.off_reason)"
ALLOC_END = "  host             0       0    0 B      0\n"  # the last line of the fixtures' allocations table


def evolve_fixture(pid):
    return fixture(EVOLVE, f"drk-train-{pid}.json")


def evolve_lines(out):
    """The lines of the evolve block: its title (or its one line) to the blank line that ends a process's
    section, or to the end."""
    i = max(out.find("\nevolved kernels"), out.find("\nevolve: "))
    if i < 0:
        return None
    j = out.find("\n\n", i + 1)
    return out[i + 1:j if j >= 0 else len(out)].splitlines()


def case_report_evolve():
    long_cut = LONG[:61] + "..."
    # One process: after the allocations, the line of totals and a row per kernel-shape, most evolved first
    # (served, then failed, then refused; the report lists them refused, failed, served).
    p = drk("report", evolve_fixture(41))
    o = p.stdout
    check(p.returncode == 0 and not p.stderr, "drk report on a report with evolve", p)
    block = ("\nevolved kernels: 3 kernel-shapes looked at, 1 evolved, 1 refused, 1 failed; trials 5.40 " + MICRO
             + " of GPU time, 1.5% of the program's kernel time (360 " + MICRO + "), 3.00 GiB copied and compared, "
             "budget 2%; 12.5% of kernels "
             "re-searched per round (5 rounds)\n"
             "  kernel                                                            grid   block    shared  state    "
             "serving  speedup  tried / proven / rejected                         builds  why\n"
             "  empty                                                             4x1x1  64x1x1        0  settled  "
             "regs=32    2.00x                  6 / 4 / 2  6 (1.20 s in all, max 400 ms)  settled after 3 rounds\n"
             f"  {long_cut}  8x1x1  128x1x1    4096  failed   default        -                  2 / 0 / 1  "
             f"2 (311 ms in all, max 180 ms)  {EVOLVE_FAILED}\n"
             "  hidden                                                            2x1x1  128x1x1     256  refused  "
             f"default        -                  0 / 0 / 0                              0  {EVOLVE_REFUSED}\n")
    check(o.endswith(ALLOC_END + block), "the evolve block, exactly, after the allocations and last", p)
    check([cells(l) for l in evolve_lines(o)[1:]] == [
        list(EVOLVE_HEAD),
        ["empty", "4x1x1", "64x1x1", "0", "settled", "regs=32", "2.00x", "6 / 4 / 2", "6 (1.20 s in all, max 400 ms)",
         "settled after 3 rounds"],
        [long_cut, "8x1x1", "128x1x1", "4096", "failed", "default", "-", "2 / 0 / 1", "2 (311 ms in all, max 180 ms)",
         EVOLVE_FAILED],
        ["hidden", "2x1x1", "128x1x1", "256", "refused", "default", "-", "0 / 0 / 0", "0", EVOLVE_REFUSED]],
          "the rows' cells, in their columns", p)

    p = drk("report", "--top", "1", evolve_fixture(41))
    lines = evolve_lines(p.stdout)
    check(p.returncode == 0 and len(lines) == 4 and cells(lines[2])[0] == "empty"
          and lines[3] == "  ... 2 more kernel-shapes", f"--top 1: one row and the rest counted: {lines}", p)

    # drk's context for trials: its device memory on the totals' line (the largest of several processes').
    with tempfile.TemporaryDirectory() as tmp:
        d = json.load(open(evolve_fixture(41)))
        d["evolve"]["own_context_mib"] = 539
        d["evolve"]["saved_ns"] = 2500000
        path = os.path.join(tmp, "drk-train-41.json")
        with open(path, "w") as f:
            json.dump(d, f)
        p = drk("report", path)
        lines = evolve_lines(p.stdout)
        check(p.returncode == 0 and lines and lines[0].endswith(
            "re-searched per round (5 rounds); trials in a context of drk's own (539 MiB of device memory); "
            "GPU time saved by served variants ~2.50 ms (estimated)"),
            "own_context_mib and saved_ns: said on the totals' line", p)
        # Two processes: the savings add up, the context's memory is the largest.
        d["pid"] = 44
        d["evolve"]["own_context_mib"], d["evolve"]["saved_ns"] = 524, 1500000
        with open(os.path.join(tmp, "drk-train-44.json"), "w") as f:
            json.dump(d, f)
        p = drk("report", "--json", tmp)
        got = json.loads(p.stdout)["evolve"] if p.returncode == 0 else {}
        check(got.get("saved_ns") == 4000000 and got.get("own_context_mib") == 539,
              "two processes: saved_ns summed, own_context_mib the largest", p)
        # A process whose program ran out of device memory: drk gave its own back, said and counted.
        d["evolve"]["gave_back_memory"] = 1
        with open(os.path.join(tmp, "drk-train-44.json"), "w") as f:
            json.dump(d, f)
        p = drk("report", tmp)
        said = [ln for ln in p.stdout.splitlines() if ln.startswith("evolved kernels (2 of 2 processes)") and
                "trials ended where the program ran out of device memory, drk's given back (1 process)" in ln]
        check(p.returncode == 0 and len(said) == 1, "gave_back_memory: said on the combined totals' line", p)
        p = drk("report", "--json", tmp)
        got = json.loads(p.stdout)["evolve"] if p.returncode == 0 else {}
        check(got.get("gave_back_memory") == 1, "gave_back_memory: counted over processes", p)
        del d["evolve"]["gave_back_memory"]
        d["evolve"]["own_context_mib"] = "539"
        with open(path, "w") as f:
            json.dump(d, f)
        p = drk("report", path)
        check(p.returncode != 0 and "own_context_mib" in p.stderr, "own_context_mib: a string is refused", p)

    # Rows without a why ("" as the engine writes it) show "-". A report of an older drk (no run_speedup):
    # its speedup is the replays' estimate, marked so.
    p = drk("report", evolve_fixture(42))
    check(p.returncode == 0 and [cells(l) for l in evolve_lines(p.stdout)[2:]] == [
        ["empty", "1x1x1", "32x1x1", "0", "searching", "regs=64 cache=1", "1.25x (replays)", "3 / 2 / 1",
         "3 (450 ms in all, max 200 ms)", "regs=16 rejected: the outputs differ at byte 4096"],
        ["hidden", "2x1x1", "128x1x1", "256", "capturing", "default", "-", "0 / 0 / 0", "0", "-"]],
          "pid 42: served while searching first, no why as -", p)

    # Not asked (DRK_EVOLVE=0) and reports of an older drk (no evolve): nothing, the text as it was.
    for path in (evolve_fixture(43), fixture("single.json"), fixture(*PROFILE), counters_fixture(21),
                 fixture(COUNTERS), fixture(*FINDINGS)):
        p = drk("report", path)
        check(p.returncode == 0 and not p.stderr and "\nevolve" not in p.stdout, f"{path}: no evolve lines", p)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "drk-train-43.json")
        d = json.load(open(evolve_fixture(43)))
        outs = {}
        for kind in ("with", "without"):
            if kind == "without":
                del d["evolve"]
            with open(path, "w") as f:
                json.dump(d, f)
            outs[kind] = [drk("report", *argv, path) for argv in ([], ["--top", "2"], ["--html", "-"])]
            outs[kind].append(drk("report", "--json", path))
        for a, b in zip(outs["with"][:3], outs["without"][:3]):
            check(a.returncode == 0 and a.stdout == b.stdout and a.stdout, "evolve not asked: byte for byte the "
                  "text and page of a report without the key", a)
        j = [json.loads(x.stdout) for x in (outs["with"][3], outs["without"][3])]
        check(j[0]["evolve"]["enabled"] is False and j[0]["evolve"]["off_reason"] == "DRK_EVOLVE=0"
              and j[0]["processes"][0]["evolve"]["enabled"] is False
              and "evolve" not in j[1] and "evolve" not in j[1]["processes"][0],
              "--json: evolve passed through where the report has it only", outs["with"][3])

        # Asked for, but off: one line with the reason, no table.
        d = json.load(open(evolve_fixture(41)))
        d["evolve"].update(enabled=False, off_reason=EVOLVE_OFF, rounds=0, trial_ns=0, program_kernel_ns=0,
                           trial_share=0, researched_share=0, kernels=0, evolved=0, refused=0, failed=0, by_kernel=[])
        off = os.path.join(tmp, "off", "drk-train-51.json")
        os.mkdir(os.path.dirname(off))
        d["process"]["pid"] = 51
        with open(off, "w") as f:
            json.dump(d, f)
        p = drk("report", off)
        check(p.returncode == 0 and p.stdout.endswith(ALLOC_END + f"\nevolve: off ({EVOLVE_OFF})\n")
              and "evolved kernels" not in p.stdout, "evolve off: one line with off_reason, last", p)
        # On, nothing looked at: the line alone.
        z = json.load(open(evolve_fixture(42)))
        z["evolve"].update(kernels=0, evolved=0, trial_ns=0, by_kernel=[])
        zero = os.path.join(tmp, "zero.json")
        with open(zero, "w") as f:
            json.dump(z, f)
        p = drk("report", zero)
        check(p.returncode == 0 and p.stdout.endswith(
            ALLOC_END + "\nevolved kernels: 0 kernel-shapes looked at, 0 evolved, 0 refused, 0 failed; trials 0 ns of "
            "GPU time, 0.0% of the program's kernel time (360 " + MICRO + "), budget 2%; 25.0% of kernels re-searched "
            "per round (4 rounds)\n"), "on, nothing looked at: the line, no table", p)

        # Combined: one off among two on; then none on.
        shutil.copy(evolve_fixture(41), os.path.dirname(off))
        shutil.copy(evolve_fixture(42), os.path.dirname(off))
        p = drk("report", os.path.dirname(off))
        combined = p.stdout[p.stdout.find("== combined"):]
        lines = evolve_lines(combined)
        check(p.returncode == 0 and lines[0].startswith("evolved kernels (2 of 3 processes): 5 kernel-shapes")
              and lines[0].endswith(f"; off in 1 process (first reason: {EVOLVE_OFF})"), f"combined, one off: {lines}",
              p)
        for name in ("drk-train-41.json", "drk-train-42.json"):
            os.unlink(os.path.join(os.path.dirname(off), name))
        shutil.copy(off, os.path.join(os.path.dirname(off), "drk-train-52.json"))
        shutil.copy(evolve_fixture(43), os.path.dirname(off))
        p = drk("report", os.path.dirname(off))
        combined = p.stdout[p.stdout.find("== combined"):]
        check(p.returncode == 0 and combined.endswith(ALLOC_END + "\nevolve: off in 2 of 3 processes (first reason: "
                                                      f"{EVOLVE_OFF})\n"),
              "combined, none on: one line, the reason of one that asked", p)

    # The fixture's directory: each process as alone, then every process's rows with their pid, most evolved first.
    p = drk("report", fixture(EVOLVE))
    o = p.stdout
    check(p.returncode == 0 and not p.stderr, "drk report on a directory with evolve", p)
    heads = [o.find(f"== train (pid {pid}) ==") for pid in (41, 42, 43)] + [o.find("== combined: 3 processes")]
    check(all(0 <= a < b for a, b in zip(heads, heads[1:])), "three processes, then combined", p)
    per = [o[a:b] for a, b in zip(heads, heads[1:])]
    check(evolve_lines(per[0]) == evolve_lines(drk("report", evolve_fixture(41)).stdout)
          and evolve_lines(per[1]) == evolve_lines(drk("report", evolve_fixture(42)).stdout)
          and "\nevolve" not in per[2], "per process as alone; none for the one not asked", p)
    lines = evolve_lines(o[heads[3]:])
    check(lines is not None and lines[0] == "evolved kernels (2 of 3 processes): 5 kernel-shapes looked at, 2 evolved, "
          "1 refused, 1 failed; trials 9.40 " + MICRO + " of GPU time, 1.3% of the program's kernel time (720 " + MICRO
          + "), 3.00 GiB copied and compared, budget 2%; 18.1% of kernels re-searched per round (9 rounds)"
          and [cells(l) for l in lines[1:]] == [
              ["pid"] + list(EVOLVE_HEAD),
              ["41", "empty", "4x1x1", "64x1x1", "0", "settled", "regs=32", "2.00x", "6 / 4 / 2",
               "6 (1.20 s in all, max 400 ms)", "settled after 3 rounds"],
              ["42", "empty", "1x1x1", "32x1x1", "0", "searching", "regs=64 cache=1", "1.25x (replays)", "3 / 2 / 1",
               "3 (450 ms in all, max 200 ms)", "regs=16 rejected: the outputs differ at byte 4096"],
              ["42", "hidden", "2x1x1", "128x1x1", "256", "capturing", "default", "-", "0 / 0 / 0", "0", "-"],
              ["41", long_cut, "8x1x1", "128x1x1", "4096", "failed", "default", "-", "2 / 0 / 1",
               "2 (311 ms in all, max 180 ms)", EVOLVE_FAILED],
              ["41", "hidden", "2x1x1", "128x1x1", "256", "refused", "default", "-", "0 / 0 / 0", "0",
               EVOLVE_REFUSED]], f"combined: {lines}", p)

    # --json: evolve as in the report, with the sums' counts, rows most evolved first with their pid.
    p = drk("report", "--json", evolve_fixture(41))
    check(p.returncode == 0 and not p.stderr, "drk report --json with evolve", p)
    d = json.loads(p.stdout)
    got = d["evolve"]
    want = json.load(open(evolve_fixture(41)))["evolve"]
    # gave_back_memory: newer than the fixture, read as 0.
    check({k: v for k, v in got.items() if k not in ("by_kernel", "reports", "processes", "distinct", "gave_back_memory")}
          == {k: v for k, v in want.items() if k != "by_kernel"} and got.get("gave_back_memory") == 0
          and (got["reports"], got["processes"], got["distinct"]) == (1, 1, 3), f"evolve: {got}", p)
    check([{k: v for k, v in r.items() if k != "pid"} for r in got["by_kernel"]] == want["by_kernel"][::-1]
          and {r["pid"] for r in got["by_kernel"]} == {41}, f"the rows as in the report: {got['by_kernel']}", p)
    check(d["processes"][0]["evolve"] == {"enabled": True, "off_reason": None, "kernels": 3, "evolved": 1},
          f"the process's evolve: {d['processes'][0]}", p)
    p = drk("report", "--json", "--top", "1", evolve_fixture(41))
    got = json.loads(p.stdout)["evolve"]
    check(len(got["by_kernel"]) == 1 and got["by_kernel"][0]["serving"] == "regs=32" and got["distinct"] == 3,
          "--json --top 1: one row", p)

    p = drk("report", "--json", fixture(EVOLVE))
    got = json.loads(p.stdout)["evolve"]
    check({k: v for k, v in got.items() if k != "by_kernel"} == {
        "enabled": True, "reports": 3, "processes": 2, "off_reason": "DRK_EVOLVE=0", "budget": 0.02, "rounds": 9,
        "trial_ns": 9400, "trial_bytes": 3221225472, "program_kernel_ns": 720000, "own_context_mib": 0, "gave_back_memory": 0, "saved_ns": 0,
        "trial_share": 0.0130556, "researched_share": 0.180556,
        "kernels": 5, "evolved": 2, "refused": 1, "failed": 1,
        "captures": {"captured": 5, "snapped": 4, "moved": 1, "busy": 2, "mismatched": 0}, "distinct": 5},
          f"combined sums: {got}", p)
    check([(r["pid"], r["name"], r["state"]) for r in got["by_kernel"]] == [
        (41, "empty", "settled"), (42, "empty", "searching"), (42, "hidden", "capturing"), (41, LONG, "failed"),
        (41, "hidden", "refused")], f"combined rows: {got['by_kernel']}", p)

    # The reader: optional, checked when there.
    base = json.load(open(evolve_fixture(41)))
    with tempfile.TemporaryDirectory() as tmp:
        def fail(edit, *words):
            d = json.loads(json.dumps(base))
            edit(d)
            path = os.path.join(tmp, "r.json")
            with open(path, "w") as f:
                json.dump(d, f)
            p = drk("report", path)
            check(p.returncode == 1 and all(w in p.stderr for w in words) and not p.stdout,
                  f"evolve refused with {words}", p)
        def not_object(d):
            d["evolve"] = []
        fail(not_object, "evolve: expected an object, found array")
        def enabled(d):
            d["evolve"]["enabled"] = "yes"
        fail(enabled, "evolve.enabled: expected true or false, found string")
        def budget(d):
            d["evolve"]["budget"] = "2%"
        fail(budget, "evolve.budget: expected a number, found string")
        def no_captures(d):
            del d["evolve"]["captures"]
        fail(no_captures, "evolve: missing \"captures\"")
        def busy(d):
            d["evolve"]["captures"]["busy"] = -1
        fail(busy, "evolve.captures.busy", "non-negative integer")
        def rows(d):
            d["evolve"]["by_kernel"] = {}
        fail(rows, "evolve.by_kernel: expected an array, found object")
        def no_state(d):
            del d["evolve"]["by_kernel"][1]["state"]
        fail(no_state, "evolve.by_kernel[1]: missing \"state\"")
        def speedup(d):
            d["evolve"]["by_kernel"][2]["speedup"] = None
        fail(speedup, "evolve.by_kernel[2].speedup: expected a number, found null")
        def grid(d):
            d["evolve"]["by_kernel"][0]["block"] = [128, 1]
        fail(grid, "evolve.by_kernel[0].block: expected 3 numbers, found 2")
        def tried(d):
            d["evolve"]["by_kernel"][0]["tried"] = 1.5
        fail(tried, "evolve.by_kernel[0].tried", "non-negative integer")


# ---------------------------------------------------------------- drk inspect
# On the images committed as fuzzer seeds (built by nvcc 13 from
# tests/images/kernels.cu and rdc_b.cu), so these run without nvcc.

def seed(name):
    return os.path.join(ARGS.seeds, name)


def inspect_json(*argv, rc=0):
    p = drk("inspect", "--json", *argv)
    check(p.returncode == rc, f"drk inspect --json {argv} exits {rc}", p)
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        raise AssertionError(f"drk inspect --json {argv} prints no JSON: {e}\n{p.stdout[:2000]}")
    return doc, p


def case_inspect_usage():
    for argv, msg in (((), "no FILE"), (("--frob", "x"), "unknown option '--frob'"),
                      (("--arch",), "--arch needs"), (("--arch", "sm_x", "f"), "not an SM"),
                      (("--arch=90x", "f"), "not an SM"), (("--json",), "no FILE")):
        p = drk("inspect", *argv)
        check(p.returncode == 2 and msg in p.stderr and "usage: drk inspect" in p.stderr and not p.stdout,
              f"drk inspect {argv}: usage error (2) saying {msg!r}", p)
    for argv in (["inspect", "--help"], ["help", "inspect"]):
        p = drk(*argv)
        check(p.returncode == 0 and "usage: drk inspect" in p.stdout and "--arch" in p.stdout, f"drk {argv}", p)
    p = drk("--help")
    check("inspect" in p.stdout, "drk --help lists inspect", p)


def case_inspect_errors():
    with tempfile.TemporaryDirectory() as tmp:
        empty = os.path.join(tmp, "empty")
        open(empty, "w").close()
        junk = os.path.join(tmp, "junk.bin")
        with open(junk, "wb") as f:
            f.write(bytes(range(256)) * 8)
        missing = os.path.join(tmp, "missing.fatbin")
        wrapper = os.path.join(tmp, "wrapper.bin")
        with open(wrapper, "wb") as f:  # magic, version 1, a data pointer to nowhere
            f.write(bytes.fromhex("b1436246 01000000") + (0x1000).to_bytes(8, "little") + bytes(8))
        for path, msg in ((missing, "No such file"), (junk, "unknown format"), (empty, "empty file"),
                          (wrapper, "fatbin wrapper"),
                          (tmp, "directory"), (fixture("single.json"), "unknown format")):
            p = drk("inspect", path)
            check(p.returncode == 1 and f"drk inspect: {path}: " in p.stderr and msg in p.stderr,
                  f"drk inspect {path}: exit 1, the file named, {msg!r}", p)
        # A bad file does not stop the others.
        p = drk("inspect", missing, seed("tiny.ptx"), junk)
        check(p.returncode == 1 and "tiny.ptx: kernels 1," in p.stdout and p.stderr.count("drk inspect: ") == 2,
              "the good file between two bad ones is listed; exit 1", p)
        doc, p = inspect_json(missing, seed("tiny.ptx"), rc=1)
        f = doc["files"]
        check(len(f) == 2 and f[0]["error"] and f[0]["kernels"] == [] and f[0]["stats"] is None
              and f[1]["error"] is None and len(f[1]["kernels"]) == 1, "--json: the bad file has its error", p)
        # A program without device code is no error: it has no kernels.
        p = drk("inspect", "/bin/sh")
        check(p.returncode == 0 and "kernels 0," in p.stdout, "a host ELF without device code", p)


def case_inspect_table():
    p = drk("inspect", "--demangle", seed("zstd.fatbin"), seed("tiny.ptx"))
    check(p.returncode == 0 and not p.stderr, "drk inspect --demangle on two images", p)
    check(re.search(r"^  kernel\s+params\s+regs\s+shared\s+local\s+threads\s+from\s+SASS\s+PTX\s+words\s+evolve$",
                    p.stdout, re.M), "the table's header", p)
    check(re.search(r"^  odd_params\(char, short, double, __half, Gappy, char, double\*\)\s+7 \(64 B\)\s+\d+\s+0\s+0"
                    r"\s+-\s+sm_90\s+80,90\s+90\s+vvvv\[vvv\]vP\s+yes$", p.stdout, re.M), "a demangled row", p)
    check(re.search(r"^  plain_scale\s.*\s+Pvv\s+no: uses module global `coeffs`", p.stdout, re.M),
          "a kernel drk cannot evolve, and why", p)
    check(re.search(r"^  shared_reduce\(float const\*, float\*\)\s+2 \(16 B\)\s+\d+\s+[1-9]\d*\s+0\s+<=256\s", p.stdout,
                    re.M), "static shared memory and __launch_bounds__", p)
    check(re.search(r"zstd\.fatbin: kernels 11, containers 1, entries 3 \(SASS 2, PTX 1, other 0\), LZ4 0, ZSTD 3, "
                    r"errors 0$", p.stdout, re.M), "the summary line", p)
    check(re.search(r"^  k\s+3 \(33 B\)\s+-\s+-\s+-\s+<=128\s+compute_90\s+-\s+90\s+-\[---\]-\s+yes$", p.stdout, re.M),
          "a PTX kernel: no resources; its parameters unused", p)
    p = drk("inspect", "--arch", "sm_80", seed("lz4.fatbin"))
    check(p.returncode == 0 and "LZ4 3, ZSTD 0" in p.stdout and re.search(r"^  plain_scale .* sm_80 ", p.stdout, re.M),
          "--arch sm_80 takes the numbers from the sm_80 SASS", p)


def case_inspect_json():
    doc, p = inspect_json("--demangle", seed("lz4.fatbin"), seed("rdc_b_sm90.cubin"), seed("tiny.ptx"),
                          seed("ptx_compute90.fatbin"))
    check(doc.get("schema") == "drk-inspect" and doc.get("version") == 1 and doc.get("sm") == 0, "the header", p)
    fb, cubin, ptx, ptxfb = doc["files"]
    check(fb["format"] == "fatbin" and cubin["format"] == "cubin" and ptx["format"] == "ptx", "formats", p)
    st = fb["stats"]
    for key in ("kernels", "containers", "entries", "sass_entries", "ptx_entries", "other_entries", "lz4", "zstd",
                "entries_read", "errors", "stored_bytes", "decompressed_bytes", "first_error"):
        check(key in st, f"stats has {key}", p)
    check((st["kernels"], st["entries"], st["sass_entries"], st["ptx_entries"], st["lz4"], st["errors"])
          == (11, 3, 2, 1, 3, 0), f"lz4.fatbin's stats: {st}", p)
    ks = {k["name"]: k for k in fb["kernels"]}
    check(len(ks) == 11 and [k["name"] for k in fb["kernels"]] == sorted(ks), "11 kernels, sorted by name", p)
    odd = ks["_Z10odd_paramscsd6__half5GappycPd"]
    check(odd["demangled"] == "odd_params(char, short, double, __half, Gappy, char, double*)", "demangled", p)
    check(ks["plain_scale"]["demangled"] is None, "an extern \"C\" name has no demangled form", p)
    check([(q["offset"], q["size"]) for q in odd["params"]] == [(0, 1), (2, 2), (8, 8), (16, 2), (24, 24), (48, 1), (56, 8)]
          and odd["params_size"] == 64, f"odd_params' layout: {odd['params']}", p)
    check(all(q["kind"] in ("pointer", "scalar", "unknown") and (q["align"] is None or q["align"] >= 2) for q in odd["params"]),
          "parameter kinds and alignments", p)
    check(odd["source"] == "sass" and odd["source_arch"] == 90 and odd["sass"] == [80, 90]
          and odd["sass_targets"] == ["sm_80", "sm_90"]
          and odd["ptx"] == [{"arch": 90, "target": "compute_90", "isa": "9.0"}], f"archs: {odd}", p)
    big = ks["_Z10big_params3BigPfi"]
    check(big["params_size"] == 4412 and big["params"][0]["size"] == 4400, "over 4 KiB of parameters", p)
    red = ks["_Z13shared_reducePKfPf"]
    check(red["max_threads"] == 256 and red["reqntid"] is None and red["shared_bytes"] >= 4224
          and isinstance(red["registers"], int), f"shared_reduce: {red}", p)
    check(ks["_Z10uses_localPKiPf"]["local_bytes"] > 0, "a stack frame", p)
    ck = cubin["kernels"]
    check(len(ck) == 1 and ck[0]["name"] == "_Z12rdc_kernel_bPdxc" and ck[0]["sass"] == [90] and ck[0]["ptx"] == [],
          "the -rdc cubin has one kernel (not its device function)", p)
    pk = ptx["kernels"][0]
    check(pk["source"] == "ptx" and pk["registers"] is None and pk["shared_bytes"] is None and pk["max_threads"] == 128
          and [(q["offset"], q["size"], q["align"]) for q in pk["params"]] == [(0, 8, 8), (8, 24, 8), (32, 1, None)],
          f"PTX text: {pk}", p)
    check(all(k["source"] == "ptx" and k["sass"] == [] for k in ptxfb["kernels"]), "a PTX-only fatbin", p)
    # The flow of each kernel's PTX: word classes, flags, the verdict.
    fl = odd["flow"]
    check(fl["evolvable"] is True and fl["reason"] is None and fl["flags"] == []
          and [w["class"] for w in fl["words"]] == ["value"] * 8 + ["pointer"]
          and [(w["param"], w["offset"], w["size"]) for w in fl["words"][4:7]] == [(4, 24, 8), (4, 32, 8), (4, 40, 8)],
          f"odd_params' flow: {fl}", p)
    fl = ks["plain_scale"]["flow"]
    check(fl["evolvable"] is False and fl["flags"] == ["module_globals"] and "`coeffs`" in fl["reason"],
          f"plain_scale's flow: {fl}", p)
    check(ck[0]["flow"] is None, "a cubin has no flow", p)
    check([w["class"] for w in pk["flow"]["words"]] == ["unused"] * 5 and pk["flow"]["evolvable"] is True,
          f"tiny.ptx's flow: {pk['flow']}", p)

    doc, p = inspect_json("--arch", "sm_80", seed("lz4.fatbin"))
    check(doc["sm"] == 80 and all(k["source_arch"] == 80 for k in doc["files"][0]["kernels"]), "--arch sm_80", p)
    doc, p = inspect_json("--arch=sm_90", seed("ptx_compute90.fatbin"))
    check(all(k["source"] == "ptx" and k["source_arch"] == 90 for k in doc["files"][0]["kernels"]),
          "--arch sm_90 on PTX only: numbers from the PTX", p)


# ---------------------------------------------------------------- trace

def trace_fixture(name):
    return fixture("traces", name)


def replay_json(*argv, rc=0):
    p = drk("trace", "replay", "--json", *argv)
    check(p.returncode == rc, f"drk trace replay --json {argv} exits {rc}", p)
    try:
        return json.loads(p.stdout), p
    except ValueError as e:
        raise AssertionError(f"drk trace replay --json {argv} prints no JSON: {e}\n{p.stdout[:2000]}")


def models_of(trace):
    return {m["name"]: m for m in trace["models"]}


def expect_model(m, p, **want):
    for k, v in want.items():
        got = m[k]
        ok = abs(got - v) < 5e-7 if isinstance(v, float) else got == v
        check(ok, f"{m['name']}: {k} = {got}, expected {v}", p)


def case_trace_usage():
    for argv, msg in (((), "replay or synth"), (("frob",), "unknown subcommand 'frob'"),
                      (("replay",), "no FILE"), (("replay", "--frob", "x"), "unknown option '--frob'"),
                      (("replay", "--model", "nope", "x"), "no such model"),
                      (("replay", "--page-size", "1000", "x"), "--page-size 1000"),
                      (("replay", "--capacity", "lots", "x"), "--capacity lots"),
                      (("synth", "--kind", "bert"), "--kind bert"), (("synth", "--ops", "-1"), "--ops -1")):
        p = drk("trace", *argv)
        check(p.returncode == 2 and msg in p.stderr and "usage: drk trace" in p.stderr,
              f"drk trace {argv}: usage error (2) saying {msg!r}", p)
    for argv in (["trace", "--help"], ["help", "trace"], ["trace", "replay", "--help"]):
        p = drk(*argv)
        check(p.returncode == 0 and "usage: drk trace replay" in p.stdout and "first-fit" in p.stdout, f"drk {argv}", p)
    p = drk("--help")
    check("trace replay" in p.stdout, "drk --help lists trace", p)


def case_trace_replay_hole():
    """hole.trace, page size 1 MiB (its header): A, B 512 KiB; C 1 MiB; free A;
    D 768 KiB cannot use A's 512 KiB hole, so first-fit grows to 3 MiB with
    [0, 512K) and [2M+768K, 3M) free; free B merges with A's hole, where E
    (1 MiB) then fits: peak live C+D+E = 2.75 MiB."""
    doc, p = replay_json(trace_fixture("hole.trace"))
    t = doc["traces"][0]
    check(doc["schema"] == "drk-trace-replay" and t["error"] is None and t["page_size"] == 1 << 20
          and t["ops"] == 10 and t["allocs"] == 5 and t["frees"] == 5 and t["max_live_allocations"] == 3
          and t["peak_live_bytes"] == 2883584 and t["duration_ns"] == 1000
          and t["header"]["program"].startswith("hand-written"), f"trace totals: {t}", p)
    m = models_of(t)
    check(list(m) == ["ideal", "driver", "first-fit", "best-fit-per-stream", "drk-heap", "drk-heap-pages",
                      "drk-heap-grow", "drk-pool"],
          "every model, in order", p)
    for mm in m.values():
        expect_model(mm, p, peak_live_bytes=2883584, ooms=0, first_oom_line=None)
    expect_model(m["ideal"], p, peak_reserved_bytes=2883584, fragmentation=0.0, external_fragmentation=0.0,
                 final_reserved_bytes=0)
    # driver: every allocation its own 2 MiB: A+B+C, then C+D+E = 6 MiB
    expect_model(m["driver"], p, peak_reserved_bytes=6 << 20, fragmentation=1 - 2883584 / (6 << 20),
                 final_reserved_bytes=0)
    expect_model(m["first-fit"], p, peak_reserved_bytes=3 << 20, final_reserved_bytes=3 << 20,
                 fragmentation=1 - 2883584 / (3 << 20), free_bytes_at_peak=786432, largest_free_at_peak=524288,
                 external_fragmentation=1 / 3)
    # best-fit: 2 MiB small segments; D opens a second one (1.25 MiB of it left free)
    expect_model(m["best-fit-per-stream"], p, peak_reserved_bytes=4 << 20, fragmentation=1 - 2883584 / (4 << 20),
                 free_bytes_at_peak=1835008, largest_free_at_peak=1310720, external_fragmentation=1 - 1310720 / 1835008)
    # drk-heap: D needs a page of its own (A's half page is pinned by B); E
    # then fits A+B's hole on its idle page; no page is idle at the peak
    expect_model(m["drk-heap"], p, peak_reserved_bytes=3 << 20, fragmentation=1 - 2883584 / (3 << 20),
                 final_reserved_bytes=3 << 20, free_bytes_at_peak=0, external_fragmentation=0.0)
    # ... whose three pages the calls made: 52.5 us each at an H200's costs;
    # without a reserve the grower makes none.
    check(m["drk-heap"].get("calls") == {"pages_created": 3, "pages_moved": 0, "handles_created": 3,
                                         "handles_moved": 0, "unmap_calls": 0, "pages_made_ahead": 0,
                                         "pages_taken_ahead": 0, "waits": 0, "driver_ns": 3 * 52500},
          f"drk-heap calls {m['drk-heap'].get('calls')}", p)
    check(m["drk-heap-pages"].get("calls") == m["drk-heap"]["calls"], "drk-heap-pages: one page a request here", p)
    check(m["drk-heap-grow"].get("calls") == m["drk-heap"]["calls"] and
          m["drk-heap-grow"]["peak_reserved_bytes"] == 3 << 20, f"drk-heap-grow {m['drk-heap-grow']}", p)
    check("calls" not in m["first-fit"], "first-fit says nothing of calls", p)
    # drk-pool: A's free is batched, given back when D finds no page: the
    # pool reserves what drk-heap does
    check(m["drk-pool"]["peak_reserved_bytes"] == 3 << 20 and m["drk-pool"].get("calls") == m["drk-heap"]["calls"],
          f"drk-pool {m['drk-pool']}", p)

    # --page-size overrides the header: 2 MiB steps hold A, B and C, D grows to 4 MiB
    doc, p = replay_json("--page-size", "2M", "--model", "first-fit", trace_fixture("hole.trace"))
    t = doc["traces"][0]
    check(t["page_size"] == 2 << 20 and [x["name"] for x in t["models"]] == ["first-fit"], "--page-size, --model", p)
    expect_model(t["models"][0], p, peak_reserved_bytes=4 << 20)

    p = drk("trace", "replay", trace_fixture("hole.trace"))
    check(p.returncode == 0 and re.search(r"10 ops \(5 allocs, 5 frees\), at most 3 live, peak live 2\.75 MiB, "
                                          r"page size 1\.00 MiB", p.stdout)
          and row(p.stdout, "first-fit", "2.75 MiB", "3.00 MiB", "8.33%", "33.33%", "0")
          and row(p.stdout, "ideal", "2.75 MiB", "2.75 MiB", "0.00%", "0.00%", "0"), "the table", p)


def case_trace_replay_capacity():
    """--capacity 2M on hole.trace: D (line 8) would take every model but the
    driver past 2 MiB; the driver fails B (line 5), C and E. Failed
    allocations are dropped and their frees ignored."""
    doc, p = replay_json("--capacity", "2M", trace_fixture("hole.trace"))
    check(doc["capacity"] == 2 << 20, "capacity echoed", p)
    m = models_of(doc["traces"][0])
    for name in ("ideal", "first-fit", "best-fit-per-stream"):
        expect_model(m[name], p, ooms=1, first_oom_line=8, peak_live_bytes=2 << 20, peak_reserved_bytes=2 << 20)
    expect_model(m["driver"], p, ooms=3, first_oom_line=5, peak_live_bytes=786432, peak_reserved_bytes=2 << 20)


def case_trace_replay_streams():
    """4 MiB on stream 1, freed, then 4 MiB on stream 2: first-fit reuses the
    space; best-fit-per-stream opens a 20 MiB segment per stream."""
    doc, p = replay_json(trace_fixture("streams.trace"))
    m = models_of(doc["traces"][0])
    expect_model(m["first-fit"], p, peak_reserved_bytes=4 << 20, fragmentation=0.0)
    expect_model(m["driver"], p, peak_reserved_bytes=4 << 20)
    expect_model(m["best-fit-per-stream"], p, peak_reserved_bytes=40 << 20, fragmentation=0.9,
                 free_bytes_at_peak=36 << 20, largest_free_at_peak=20 << 20)


MALFORMED = [
    # (text, line, words in the message)
    ("100 a 1 5 -\n", 1, "not a drk allocation trace"),
    ("", 1, "not a drk allocation trace"),
    ("# drk-alloc-trace 2\n", 1, "version 2"),
    ("# drk-alloc-trace 1\n100 x 1 5 -\n", 2, "unknown op 'x'"),
    ("# drk-alloc-trace 1\n100 a 1 5 0\n", 2, "expected '-'"),
    ("# drk-alloc-trace 1\n100 A 1 5 -\n", 2, "stream number"),
    ("# drk-alloc-trace 1\n100 A 1 5 65536\n", 2, "stream number"),
    ("# drk-alloc-trace 1\n100 a 1 0 -\n", 2, "size 0"),
    ("# drk-alloc-trace 1\n100 a 1 5 - x\n", 2, "unexpected ' x'"),
    ("# drk-alloc-trace 1\n100  a 1 5 -\n", 2, "unknown op ' '"),
    ("# drk-alloc-trace 1\n100 a 1 99999999999999999999 -\n", 2, "size in bytes"),
    ("# drk-alloc-trace 1\nabc a 1 5 -\n", 2, "time in nanoseconds"),
    ("# drk-alloc-trace 1\n100 a 1 5 -\n\n", 3, "empty line"),
    ("# drk-alloc-trace 1\n100 a 1 5 -\n90 f 1 -\n", 3, "before the previous op"),
    ("# drk-alloc-trace 1\n100 a 1 5 -\n200 a 1 5 -\n", 3, "id 1 is allocated again while live"),
    ("# drk-alloc-trace 1\n100 a 1 5 -\n200 f 1 -\n300 F 1 0\n", 4, "id 1 is not live"),
    ("# drk-alloc-trace 1\n100 a 1 5 -\n# page_size 4096\n", 3, "after the first op"),
    ("# drk-alloc-trace 1\n100 a 1 5 -\n# drk-alloc-trace 1\n", 3, "concatenated"),
    ("# drk-alloc-trace 1\n# page_size 0\n", 2, "positive number"),
    ("# drk-alloc-trace 1\n100 a 1 5 -\n200 f 1", 3, "truncated"),
    ("# drk-alloc-trace 1\n100 a 1 5 -\r\n", 2, "unexpected"),
]


def case_trace_replay_malformed():
    with tempfile.TemporaryDirectory() as d:
        good = os.path.join(d, "good.trace")
        with open(good, "w") as f:  # ids may be reused once freed; comments anywhere
            f.write("# drk-alloc-trace 1\n# unknown_key 1\n5 a 1 10 -\n# note\n6 f 1 -\n7 A 1 20 3\n7 F 1 0\n")
        for i, (text, line, words) in enumerate(MALFORMED):
            path = os.path.join(d, f"bad{i}.trace")
            with open(path, "w", newline="") as f:
                f.write(text)
            p = drk("trace", "replay", path, good)
            check(p.returncode == 1 and f"drk trace replay: {path}: line {line}: " in p.stderr and words in p.stderr,
                  f"malformed {text!r}: exit 1, line {line}, {words!r}", p)
            check("good.trace: 4 ops" in p.stdout, "the next file is still replayed", p)
            doc, p = replay_json(path, rc=1)
            check(doc["traces"][0]["error"].startswith(f"line {line}: ") and doc["traces"][0]["models"] == [],
                  f"--json error for {text!r}", p)
    for name, line, words in (("unknown_free.trace", 5, "id 7 is not live"), ("truncated.trace", 3, "truncated")):
        p = drk("trace", "replay", trace_fixture(name))
        check(p.returncode == 1 and f"line {line}: " in p.stderr and words in p.stderr, name, p)
    p = drk("trace", "replay", "/nonexistent.trace")
    check(p.returncode == 1 and "/nonexistent.trace: No such file" in p.stderr, "a missing file", p)


def case_trace_synth():
    for kind in ("gpt", "random"):
        a = subprocess.run([ARGS.drk, "trace", "synth", "--kind", kind, "--seed", "7", "--ops", "20000"],
                           capture_output=True, timeout=60)
        b = subprocess.run([ARGS.drk, "trace", "synth", "--kind", kind, "--seed", "7", "--ops", "20000"],
                           capture_output=True, timeout=60)
        c = subprocess.run([ARGS.drk, "trace", "synth", "--kind", kind, "--seed", "8", "--ops", "20000"],
                           capture_output=True, timeout=60)
        check(a.returncode == 0 and a.stdout == b.stdout and a.stdout != c.stdout,
              f"{kind}: the same seed gives the same bytes, another seed others")
        lines = a.stdout.decode().splitlines()
        check(lines[0] == "# drk-alloc-trace 1" and sum(1 for x in lines if not x.startswith("#")) == 20000,
              f"{kind}: a header and exactly 20000 ops")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gpt.trace")
        with open(path, "wb") as f:
            f.write(subprocess.run([ARGS.drk, "trace", "synth", "--seed", "3", "--ops", "30000"],
                                   capture_output=True, timeout=60, check=True).stdout)
        doc, p = replay_json(path)
        t = doc["traces"][0]
        m = models_of(t)
        check(t["ops"] == 30000 and t["header"]["page_size"] == 2 << 20 and "gpt" in t["header"]["program"],
              "the synthesized trace reads back", p)
        for mm in m.values():
            expect_model(mm, p, peak_live_bytes=t["peak_live_bytes"], ooms=0)
        check(m["ideal"]["fragmentation"] == 0 and m["first-fit"]["fragmentation"] > m["ideal"]["fragmentation"]
              and m["best-fit-per-stream"]["fragmentation"] > m["first-fit"]["fragmentation"]
              and m["first-fit"]["peak_reserved_bytes"] > t["peak_live_bytes"],
              "gpt: first-fit fragments more than ideal, best-fit-per-stream more still", p)
        # random: synthesized with a capacity below its peak, every model reports OOMs and goes on
        rnd = os.path.join(d, "random.trace")
        with open(rnd, "wb") as f:
            f.write(subprocess.run([ARGS.drk, "trace", "synth", "--kind", "random", "--ops", "5000"],
                                   capture_output=True, timeout=60, check=True).stdout)
        doc, p = replay_json("--capacity", "1G", rnd)
        for mm in doc["traces"][0]["models"]:
            check(mm["ooms"] > 0 and mm["peak_reserved_bytes"] <= 1 << 30 and mm["first_oom_line"] > 1,
                  f"random under 1 GiB: {mm['name']} OOMs and stays under the capacity", p)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--drk", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--rel-libdir", default="")
    ap.add_argument("--options-source", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--seeds", help="device images for the inspect cases (tests/fuzz/seeds)")
    ap.add_argument("case", choices=sorted(CASES))
    ARGS = ap.parse_args()
    CASES[ARGS.case]()
    print(f"ok: {ARGS.case}")


if __name__ == "__main__":
    main()
