#!/usr/bin/env python3
"""Cross-checks `drk inspect --json` with NVIDIA's cuobjdump on device images.

    check_cuobjdump.py --drk BIN --cuobjdump PATH --fixtures LIST [--skip-missing]
    check_cuobjdump.py --drk BIN --cuobjdump PATH --counts-only LIB...

For every fixture (one path a line in LIST):
  - the SASS archs (--list-elf) and PTX archs (--list-ptx) equal drk's entry
    counts and each kernel's sass/ptx lists;
  - per SASS arch NN, `drk inspect --json --arch sm_NN` against that arch's
    ELF: kernel names (ENTRY symbols, --dump-elf-symbols), registers, shared,
    stack, constant bank 0 (--dump-resource-usage), parameter offsets and
    sizes, CBANK_PARAM_SIZE, MAX_THREADS and REQNTID (.nv.info, --dump-elf);
  - the kernels of each PTX entry (--dump-ptx, .entry) equal drk's;
  - where drk's numbers come from PTX, its parameter layout equals the
    cubins' (KPARAM_INFO) for the same kernel.
PTX text files, which cuobjdump does not read, are checked against their own
.entry lines and the cubins' layouts. With --counts-only, libraries are
compared by ELF and PTX entry counts and distinct kernel names only.
Exit 0 when all agree; 1 with a diff per mismatch; 77 (skipped) when
cuobjdump is missing and --skip-missing is given; 2 when it is missing
otherwise (CI must not pass silently).
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys

ARGS = None
FAILS = []


def fail(path, what):
    FAILS.append(f"{os.path.basename(path)}: {what}")


def run(argv, ok_codes=(0,)):
    p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=600)
    if p.returncode not in ok_codes:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stderr.strip()}")
    return p


def cuobjdump(*args):
    # "does not contain device code" (a PTX-less file under --list-ptx) exits 255.
    p = run([ARGS.cuobjdump, *args], ok_codes=(0, 255))
    if p.returncode == 255 and "does not contain" not in p.stderr:
        raise RuntimeError(f"cuobjdump {' '.join(args)} exited 255:\n{p.stderr.strip()}")
    return p.stdout


def drk_json(path, sm=None):
    argv = [ARGS.drk, "inspect", "--json"] + (["--arch", f"sm_{sm}"] if sm else []) + [path]
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=600, env=env)
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        raise RuntimeError(f"{' '.join(argv)}: not JSON ({e}); rc {p.returncode}\n{p.stderr[-2000:]}")
    f = doc["files"][0]
    if p.returncode != 0 or f["error"]:
        raise RuntimeError(f"{' '.join(argv)}: rc {p.returncode}, error {f['error']!r}\n{p.stderr[-2000:]}")
    return f


def arch_num(s):
    """'sm_90a' / 'sm_90' / '90' -> 90."""
    m = re.search(r"(\d+)", s)
    return int(m.group(1))


# ------------------------------------------------------------ cuobjdump parsing

def blocks(text, kind="elf"):
    """Splits cuobjdump output into its per-entry blocks of `kind` ('elf' or
    'ptx'): a list of (arch string, lines). A cubin's output has no header:
    one block, arch None."""
    out, cur, cur_kind = [], None, None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Fatbin elf code:") or line.startswith("Fatbin ptx code:"):
            cur_kind = "elf" if "elf" in line else "ptx"
            cur = [None, []]
            if cur_kind == kind:
                out.append(cur)
            continue
        if cur is None:  # no header: a bare cubin
            cur_kind = "elf"
            cur = [None, []]
            if kind == "elf":
                out.append(cur)
        m = re.match(r"^arch = (\S+)", line)
        if m and cur[0] is None:
            cur[0] = m.group(1)
            continue
        cur[1].append(line)
    return [(a, ls) for a, ls in out if a is not None or any(l.strip() for l in ls)]


def parse_resources(lines):
    """{function: {REG, STACK, SHARED, LOCAL, CONSTANT[0]}} of one ELF block."""
    res, name = {}, None
    for line in lines:
        m = re.match(r"^ Function (.+):$", line)
        if m:
            name = m.group(1)
            continue
        if name and line.startswith("  REG:"):
            res[name] = {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line)}
            name = None
    return res


def parse_entries(lines):
    """The ENTRY (kernel) symbols of one ELF block of --dump-elf-symbols."""
    return {l.split()[-1] for l in lines if re.match(r"^FUNC\s+\S+\s+\S+\s+ENTRY\s", l)}


def parse_elf(lines):
    """From one ELF block of --dump-elf: its sm, and per kernel .nv.info
    section the KPARAM records, CBANK_PARAM_SIZE, MAX_THREADS, REQNTID."""
    sm, info, cur, attr, rec = None, {}, None, None, None
    for line in lines:
        m = re.match(r"^64-bit ELF: .*\bsm=(\d+)", line)
        if m:
            sm = int(m.group(1))
            continue
        m = re.match(r"^\.nv\.info\.(\S+)$", line)
        if m:
            cur = info.setdefault(m.group(1), {"params": {}, "cbank_param_size": None, "max_threads": None,
                                                "reqntid": None})
            attr = None
            continue
        if re.match(r"^\.(section|nv\.|text|rel)", line) or line.startswith(".nv.info\n"):
            if not line.startswith(".nv.info."):
                cur = None
            continue
        if cur is None:
            continue
        m = re.match(r"^\tAttribute:\t(\w+)", line)
        if m:
            attr = m.group(1)
            continue
        m = re.match(r"^\tValue:\t(.*)$", line)
        if not m:
            continue
        v = m.group(1)
        if attr in ("EIATTR_KPARAM_INFO", "EIATTR_KPARAM_INFO_V2"):
            f = dict(re.findall(r"(\w+)\s*:\s*(0x[0-9a-fA-F]+)", v))
            cur["params"][int(f["Ordinal"], 16)] = (int(f["Offset"], 16), int(f["Size"], 16))
        elif attr == "EIATTR_CBANK_PARAM_SIZE":
            cur["cbank_param_size"] = int(v.split()[0], 16)
        elif attr in ("EIATTR_MAX_THREADS", "EIATTR_REQNTID"):
            xyz = [int(x, 16) for x in v.split()[:3]]
            if attr == "EIATTR_MAX_THREADS":
                cur["max_threads"] = xyz[0] * xyz[1] * xyz[2]
            else:
                cur["reqntid"] = xyz
    return sm, info


def ptx_entries(text):
    return set(re.findall(r"\.entry\s+([\w$.]+)", text))


# ------------------------------------------------------------------ checks

LAYOUTS = {}  # kernel -> [(offset, size)] from the cubins, for PTX-sourced kernels
COMPARED = {"sass": 0, "ptx_layout": 0}


def layout_of(info):
    ps = info["params"]
    return [ps[i] for i in sorted(ps)]


def compare(path, arch, name, k, res, info):
    """One kernel: drk's (from --arch) against one ELF's numbers."""
    where = f"sm_{arch} {name}"
    diffs = []
    COMPARED["sass"] += 1
    if k["source"] != "sass" or k["source_arch"] != arch:
        diffs.append(f"numbers from {k['source']} {k['source_arch']}, expected sass {arch}")
    for key, theirs in (("registers", "REG"), ("shared_bytes", "SHARED"), ("local_bytes", "STACK"),
                        ("const_bytes", "CONSTANT[0]")):
        if theirs in res and k[key] != res[theirs]:
            diffs.append(f"{key}: drk {k[key]}, cuobjdump {theirs}:{res[theirs]}")
    if info is not None:
        ours = [(p["offset"], p["size"]) for p in k["params"]]
        want = layout_of(info)
        if ours != want:
            diffs.append(f"params (offset, size): drk {ours}, .nv.info KPARAM {want}")
        if info["cbank_param_size"] is not None and k["params_size"] != info["cbank_param_size"]:
            diffs.append(f"params_size: drk {k['params_size']}, CBANK_PARAM_SIZE {info['cbank_param_size']}")
        if info["cbank_param_size"] is None and want and k["params_size"] != want[-1][0] + want[-1][1]:
            diffs.append(f"params_size: drk {k['params_size']}, end of last KPARAM {want[-1][0] + want[-1][1]}")
        if k["max_threads"] != info["max_threads"]:
            diffs.append(f"max_threads: drk {k['max_threads']}, MAX_THREADS {info['max_threads']}")
        if (k["reqntid"] or None) != info["reqntid"]:
            diffs.append(f"reqntid: drk {k['reqntid']}, REQNTID {info['reqntid']}")
    for d in diffs:
        fail(path, f"{where}: {d}")


def check_ptx_layout(path, k):
    want = LAYOUTS.get(k["name"])
    if want is None:
        return
    COMPARED["ptx_layout"] += 1
    ours = [(p["offset"], p["size"]) for p in k["params"]]
    if ours != want:
        fail(path, f"{k['name']} (from PTX {k['source_arch']}): params drk {ours}, cubin KPARAM {want}")
    end = want[-1][0] + want[-1][1] if want else 0
    if k["params_size"] != end:
        fail(path, f"{k['name']} (from PTX): params_size drk {k['params_size']}, cubin layout ends at {end}")


def fatbin_codecs(path):
    """(LZ4, ZSTD) entry counts of a fatbin file, from its entry headers."""
    d = open(path, "rb").read()
    lz4 = zstd = off = 0
    while off + 16 <= len(d):
        magic, _, hsize, fsize = struct.unpack_from("<IHHQ", d, off)
        if magic != 0xBA55ED50:
            break
        e, end = off + hsize, off + hsize + fsize
        while e + 0x40 <= end:
            ehsize, size = struct.unpack_from("<IQ", d, e + 4)
            flags = struct.unpack_from("<Q", d, e + 0x28)[0]
            lz4 += bool(flags & 0x2000)
            zstd += bool(flags & 0x8000)
            e += ehsize + size
        off = end
    return lz4, zstd


def check_fixture(path):
    elf_list = [arch_num(m) for m in re.findall(r"^ELF file\s+\d+:.*\.(sm_\w+)\.cubin$",
                                                   cuobjdump("--list-elf", path), re.M)]
    ptx_list = [arch_num(m) for m in re.findall(r"^PTX file\s+\d+:.*\.(sm_\w+)\.ptx$",
                                                   cuobjdump("--list-ptx", path), re.M)]
    res_blocks = blocks(cuobjdump("--dump-resource-usage", path))
    sym_blocks = blocks(cuobjdump("--dump-elf-symbols", path))
    elf_blocks = blocks(cuobjdump("--dump-elf", path))
    ptx_blocks = blocks(cuobjdump("--dump-ptx", path), "ptx")
    if not (len(res_blocks) == len(sym_blocks) == len(elf_blocks) == len(elf_list)):
        raise RuntimeError(f"{path}: cuobjdump's outputs disagree: {len(elf_list)} ELFs listed, "
                           f"{len(res_blocks)}/{len(sym_blocks)}/{len(elf_blocks)} blocks")

    # Per SASS arch: kernel -> (resources, .nv.info), and the ENTRY names.
    per_arch = {}
    for (_, rl), (_, sl), (_, el), listed in zip(res_blocks, sym_blocks, elf_blocks, elf_list):
        sm, info = parse_elf(el)
        arch = sm if sm is not None else listed
        res = parse_resources(rl)
        entries = parse_entries(sl)
        a = per_arch.setdefault(arch, {})
        for name in entries:
            a[name] = (res.get(name, {}), info.get(name))
            if info.get(name) is not None:
                LAYOUTS.setdefault(name, layout_of(info[name]))

    full = drk_json(path)
    st = full["stats"]
    if st["sass_entries"] != len(elf_list):
        fail(path, f"SASS entries: drk {st['sass_entries']}, cuobjdump --list-elf {len(elf_list)}")
    if st["ptx_entries"] != len(ptx_list):
        fail(path, f"PTX entries: drk {st['ptx_entries']}, cuobjdump --list-ptx {len(ptx_list)}")
    if st["errors"]:
        fail(path, f"drk counted {st['errors']} entry errors: {st['first_error']}")
    if path.endswith(".fatbin"):
        want = fatbin_codecs(path)
        if (st["lz4"], st["zstd"]) != want:
            fail(path, f"(LZ4, ZSTD) entries: drk {(st['lz4'], st['zstd'])}, entry flags {want}")
        name = os.path.basename(path)
        if name.startswith(("lz4", "zstd")) and want[name.startswith("zstd")] != st["entries"]:
            fail(path, f"fixture not compressed as its name says: (LZ4, ZSTD) {want} of {st['entries']} entries")
    kernels = {k["name"]: k for k in full["kernels"]}

    for arch, want in sorted(per_arch.items()):
        ours = {n for n, k in kernels.items() if arch in k["sass"]}
        for n in sorted(set(want) - ours):
            fail(path, f"sm_{arch}: kernel {n} in cuobjdump, not in drk's sass list")
        for n in sorted(ours - set(want)):
            fail(path, f"sm_{arch}: drk lists kernel {n}, cuobjdump has no such ENTRY")
        at = {k["name"]: k for k in drk_json(path, arch)["kernels"]}
        for n in sorted(set(want) & set(at)):
            compare(path, arch, n, at[n], *want[n])

    ptx_want = {}
    for (a, lines) in ptx_blocks:
        ptx_want.setdefault(arch_num(a), set()).update(ptx_entries("\n".join(lines)))
    for arch, want in sorted(ptx_want.items()):
        ours = {n for n, k in kernels.items() if any(p["arch"] == arch for p in k["ptx"])}
        if ours != want:
            fail(path, f"compute_{arch} PTX kernels: only drk {sorted(ours - want)}, only cuobjdump {sorted(want - ours)}")
    listed = set(ptx_list)
    if set(ptx_want) != listed:
        fail(path, f"PTX archs: --dump-ptx {sorted(ptx_want)}, --list-ptx {sorted(listed)}")
    for k in kernels.values():
        if k["source"] == "ptx":
            check_ptx_layout(path, k)
    return len(kernels), len(elf_list), len(ptx_list)


def check_ptx_text(path):
    text = open(path, errors="replace").read()
    want = ptx_entries(text)
    target = re.search(r"^\s*\.target\s+sm_(\d+)", text, re.M)
    f = drk_json(path)
    ours = {k["name"] for k in f["kernels"]}
    if ours != want:
        fail(path, f"kernels: only drk {sorted(ours - want)}, only the text {sorted(want - ours)}")
    for k in f["kernels"]:
        if k["source"] != "ptx" or [p["arch"] for p in k["ptx"]] != [int(target.group(1))]:
            fail(path, f"{k['name']}: source {k['source']}, ptx {k['ptx']}, .target sm_{target.group(1)}")
        check_ptx_layout(path, k)
    return len(ours), 0, 1


def check_counts(path):
    elf_n = len(re.findall(r"^ELF file", cuobjdump("--list-elf", path), re.M))
    ptx_n = len(re.findall(r"^PTX file", cuobjdump("--list-ptx", path), re.M))
    names = set()
    for _, lines in blocks(cuobjdump("--dump-elf-symbols", path)):
        names |= parse_entries(lines)
    for _, lines in blocks(cuobjdump("--dump-ptx", path), "ptx"):
        names |= ptx_entries("\n".join(lines))
    f = drk_json(path)
    st = f["stats"]
    ours = {k["name"] for k in f["kernels"]}
    if st["sass_entries"] != elf_n:
        fail(path, f"SASS entries: drk {st['sass_entries']}, cuobjdump {elf_n}")
    if st["ptx_entries"] != ptx_n:
        fail(path, f"PTX entries: drk {st['ptx_entries']}, cuobjdump {ptx_n}")
    if ours != names:
        a, b = sorted(ours - names), sorted(names - ours)
        fail(path, f"distinct kernels: drk {len(ours)}, cuobjdump {len(names)}; only drk {a[:5]}"
                   f"{'...' if len(a) > 5 else ''}, only cuobjdump {b[:5]}{'...' if len(b) > 5 else ''}")
    if st["errors"]:
        fail(path, f"drk counted {st['errors']} entry errors: {st['first_error']}")
    return len(ours), elf_n, ptx_n


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drk", required=True)
    ap.add_argument("--cuobjdump", default="")
    ap.add_argument("--fixtures", help="file listing the fixtures, one path a line")
    ap.add_argument("--skip-missing", action="store_true")
    ap.add_argument("--counts-only", action="store_true", help="the FILEs are libraries: compare counts only")
    ap.add_argument("files", nargs="*")
    ARGS = ap.parse_args()
    if not ARGS.cuobjdump or not os.access(ARGS.cuobjdump, os.X_OK):
        msg = ("cuobjdump not found: install it (pip install nvidia-cuda-cuobjdump) and reconfigure; "
               "the cross-check of drk inspect cannot run")
        print(("SKIP: " if ARGS.skip_missing else "FAIL: ") + msg)
        return 77 if ARGS.skip_missing else 2
    files = list(ARGS.files)
    if ARGS.fixtures:
        files += [l.strip() for l in open(ARGS.fixtures) if l.strip()]
    if not files:
        print("FAIL: no files to check")
        return 2
    # Cubins first: their layouts are the reference for PTX-sourced kernels.
    files.sort(key=lambda p: (not p.endswith(".cubin"), p.endswith(".ptx"), p))
    for path in files:
        before = len(FAILS)
        try:
            if ARGS.counts_only:
                n = check_counts(path)
            elif path.endswith(".ptx"):
                n = check_ptx_text(path)
            else:
                n = check_fixture(path)
            status = "ok" if len(FAILS) == before else f"{len(FAILS) - before} mismatches"
            print(f"{os.path.basename(path)}: {n[0]} kernels, {n[1]} ELF, {n[2]} PTX: {status}")
        except (RuntimeError, KeyError, IndexError, ValueError, OSError, subprocess.TimeoutExpired) as e:
            fail(path, f"check failed: {type(e).__name__}: {e}")
            print(f"{os.path.basename(path)}: check failed")
    for f in FAILS:
        print("FAIL:", f)
    print(f"{len(files)} files; compared {COMPARED['sass']} kernels per SASS arch and {COMPARED['ptx_layout']} "
          f"PTX parameter layouts; {len(FAILS)} mismatches")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
