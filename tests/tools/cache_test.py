#!/usr/bin/env python3
"""CPU tests of `drk cache` (tools/cache_cmd.c): one named case per ctest test.

    cache_test.py --drk BIN CASE

The entries are written here, by this file's own reading of docs/cache.md's
format, so the cases check the document and the C reader against each other.
A case passes by returning; a failed check raises and exits non-zero.
"""
import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

ARGS = None
HEADER = 128


def drk(*argv, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DRK_")}
    e.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    e.update(env or {})
    return subprocess.run([ARGS.drk, *argv], env=e, capture_output=True, text=True, errors="replace", timeout=60)


def check(cond, what, proc=None):
    if not cond:
        detail = ""
        if proc is not None:
            detail = f"\n--- rc {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        raise AssertionError(what + detail)


def entry_bytes(key, kind, payload, meta="", created_ns=None):
    """An entry file as docs/cache.md lays it out."""
    created_ns = time.time_ns() if created_ns is None else created_ns
    text = meta.encode()
    area = (len(text) + 1 + 15) // 16 * 16
    meta_area = text + bytes(area - len(text))
    head = (b"drkcache" + struct.pack("<II", 1, HEADER) + kind.encode().ljust(16, b"\0") + key +
            struct.pack("<QqI", len(payload), created_ns, area) + bytes(12))
    assert len(head) == 96
    digest = hashlib.sha256(head + meta_area + payload).digest()
    return head + digest + meta_area + payload


def plant(root, n, kind, size, meta="", used=None):
    """Entry number n: its name under v1 and its key (hex)."""
    key = hashlib.sha256(b"key %d" % n).digest()
    hexkey = key.hex()
    fan = os.path.join(root, "v1", hexkey[:2])
    os.makedirs(fan, exist_ok=True)
    path = os.path.join(fan, f"{hexkey}.{kind}")
    with open(path, "wb") as f:
        f.write(entry_bytes(key, kind, bytes((i * 7 + n) & 255 for i in range(size)), meta))
    if used is not None:
        os.utime(path, (used, used))
    return path, hexkey


def write(path, data=b"not drk's"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def case_usage():
    for argv, msg in (((), "list, stats, clear or prune?"), (("frob",), "unknown subcommand 'frob'"),
                      (("list", "--frob"), "unknown option '--frob'"), (("list", "extra"), "unexpected argument"),
                      (("stats", "--verify"), "--verify is for list"), (("clear", "--json"), "--json is for"),
                      (("list", "--size", "1G"), "--size is for"), (("prune", "--size", "lots"), "--size lots"),
                      (("list", "--dir"), "needs a value")):
        p = drk("cache", *argv)
        check(p.returncode == 2 and msg in p.stderr and "usage: drk cache" in p.stderr,
              f"drk cache {argv}: usage error (2) saying {msg!r}", p)
    for argv in (["cache", "--help"], ["help", "cache"], ["cache", "list", "-h"]):
        p = drk(*argv)
        check(p.returncode == 0 and "usage: drk cache" in p.stdout and "prune" in p.stdout, f"drk {argv}", p)
    p = drk("--help")
    check("cache [--dir DIR] list|stats|clear|prune" in p.stdout, "drk --help lists cache", p)
    p = drk("cache", "stats", env={"HOME": "", "XDG_CACHE_HOME": ""})
    check(p.returncode == 2 and "no cache directory" in p.stderr, "no HOME, no DRK_CACHE_DIR: said", p)


def case_where():
    """--dir, else DRK_CACHE_DIR, else an absolute XDG_CACHE_HOME/drk, else HOME/.cache/drk."""
    with tempfile.TemporaryDirectory() as t:
        for env, want in (({"DRK_CACHE_DIR": f"{t}/d", "XDG_CACHE_HOME": f"{t}/x", "HOME": t}, f"{t}/d"),
                          ({"DRK_CACHE_DIR": "", "XDG_CACHE_HOME": f"{t}/x", "HOME": t}, f"{t}/x/drk"),
                          ({"XDG_CACHE_HOME": "relative", "HOME": t}, f"{t}/.cache/drk")):
            p = drk("cache", "stats", "--json", env=env)
            check(p.returncode == 0 and json.loads(p.stdout)["dir"] == want, f"{env}: {want}", p)
        p = drk("cache", "--dir", f"{t}/flag", "stats", "--json", env={"DRK_CACHE_DIR": f"{t}/d"})
        check(json.loads(p.stdout)["dir"] == f"{t}/flag", "--dir wins", p)
        p = drk("cache", "stats", f"--dir={t}/eq", "--json")
        check(json.loads(p.stdout)["dir"] == f"{t}/eq", "--dir=DIR", p)
        check(not os.path.exists(f"{t}/d") and not os.path.exists(f"{t}/flag"), "looking makes no directory")
        # The cap: --size, else DRK_CACHE_SIZE, else 1G; a refused DRK_CACHE_SIZE warns.
        for env, args, cap in (({}, [], 1 << 30), ({"DRK_CACHE_SIZE": "2G"}, [], 2 << 30),
                               ({"DRK_CACHE_SIZE": "2G"}, ["--size", "3M"], 3 << 20)):
            p = drk("cache", "--dir", t, "stats", "--json", *args, env=env)
            check(json.loads(p.stdout)["cap_bytes"] == cap, f"cap {cap}", p)
        p = drk("cache", "--dir", t, "stats", "--json", env={"DRK_CACHE_SIZE": "huge"})
        check(p.returncode == 0 and json.loads(p.stdout)["cap_bytes"] == 1 << 30
              and "DRK_CACHE_SIZE=huge" in p.stderr, "a refused DRK_CACHE_SIZE: said, default used", p)
        p = drk("cache", "--dir", t, "stats", "--json", "--size", "10%")
        st = os.statvfs(t)
        whole = st.f_blocks * st.f_frsize
        check(abs(json.loads(p.stdout)["cap_bytes"] - whole // 10) <= 1, "a share of the file system", p)


def case_list():
    with tempfile.TemporaryDirectory() as t:
        now = time.time()
        plant(t, 1, "cubin", 1000, "_Z6vecaddPfS_S_i", now - 3600)
        plant(t, 2, "cubin", 5000, "_Z4nbodyP6float4", now - 60)
        _, k3 = plant(t, 3, "result", 64, "vecadd: regs 64", now)
        write(os.path.join(t, "v1", "README"))
        p = drk("cache", "--dir", t, "list")
        check(p.returncode == 0, "list", p)
        lines = p.stdout.splitlines()
        rows = [l for l in lines if l.startswith("  ") and "kind" not in l]
        check(len(rows) == 3 and "result" in rows[0] and "_Z4nbody" in rows[1] and "_Z6vecadd" in rows[2],
              "three entries, most recently used first", p)
        check(k3[:16] in rows[0] and "60 min" in rows[2] and "<1 s" in rows[0], "key prefix and ages", p)
        check("3 entries" in lines[-1] and "1 file not drk's" in lines[-1], "the summary line", p)
        p = drk("cache", "--dir", t, "list", "--json")
        doc = json.loads(p.stdout)
        check(doc["schema"] == "drk-cache" and doc["command"] == "list" and doc["format"] == 1
              and doc["foreign_files"] == 1 and doc["temporary_files"] == 0, "list --json head", p)
        e = doc["entries"]
        check([x["kind"] for x in e] == ["result", "cubin", "cubin"] and e[0]["key"] == k3
              and e[0]["payload_bytes"] == 64 and e[0]["bytes"] == HEADER + 16 + 64 and e[0]["meta"] == "vecadd: regs 64"
              and all(x["valid"] and x["error"] is None for x in e), "list --json entries", p)
        check(doc["total_bytes"] == sum(x["bytes"] for x in e), "total_bytes", p)
        p = drk("cache", "--dir", t, "list", "--verify")
        check(p.returncode == 0 and p.stdout.count(" ok ") == 3, "list --verify: all ok", p)
        p = drk("cache", "--dir", os.path.join(t, "nothing"), "list")
        check(p.returncode == 0 and "0 entries" in p.stdout and "no cache there yet" in p.stdout, "an empty list", p)


def case_verify():
    with tempfile.TemporaryDirectory() as t:
        good, _ = plant(t, 1, "cubin", 1000, "good")
        bad, kbad = plant(t, 2, "cubin", 1000, "flipped")
        cut, _ = plant(t, 3, "cubin", 1000, "cut")
        data = bytearray(open(bad, "rb").read())
        data[HEADER + 16 + 500] ^= 1
        open(bad, "wb").write(data)
        data = open(cut, "rb").read()
        open(cut, "wb").write(data[:HEADER + 20])
        p = drk("cache", "--dir", t, "list")
        check(p.returncode == 0 and "flipped" in p.stdout, "without --verify only headers are read", p)
        p = drk("cache", "--dir", t, "list", "--verify")
        check(p.returncode == 1 and "bad checksum" in p.stdout and "truncated" in p.stdout and " ok " in p.stdout,
              "list --verify names what is wrong, exits 1", p)
        doc = json.loads(drk("cache", "--dir", t, "list", "--verify", "--json").stdout)
        by = {x["key"]: x for x in doc["entries"]}
        check(by[kbad]["valid"] is False and "checksum" in by[kbad]["error"] and by[kbad]["meta"] is None,
              "list --verify --json", doc)
        check(sum(x["valid"] for x in doc["entries"]) == 1, "one valid")


def case_stats():
    with tempfile.TemporaryDirectory() as t:
        now = time.time()
        for n in range(4):
            plant(t, n, "cubin", 1000, used=now - 100 * n)
        plant(t, 9, "result", 10, used=now)
        write(os.path.join(t, "v1", "stats"),
              b"drk cache counters 1\nhits 12\nmisses 3\ninvalid 1\nputs 5\nput_failures 0\nevicted 2\n"
              b"evicted_bytes 2288\n")
        write(os.path.join(t, "v1", "ab", "notes"))
        p = drk("cache", "--dir", t, "stats")
        check(p.returncode == 0 and "5, " in p.stdout and "cubin" in p.stdout and "result" in p.stdout
              and "12 hits, 3 misses, 1 invalid, 5 stored" in p.stdout and "not drk's  1 file" in p.stdout,
              "stats text", p)
        doc = json.loads(drk("cache", "--dir", t, "stats", "--json").stdout)
        check(doc["entries"] == 5 and doc["kinds"]["cubin"] == {"entries": 4, "bytes": 4 * (HEADER + 16 + 1000)}
              and doc["kinds"]["result"]["entries"] == 1 and doc["counters"]["hits"] == 12
              and doc["counters"]["evicted_bytes"] == 2288 and doc["foreign_files"] == 1 and doc["exists"]
              and doc["oldest_use_unix_ns"] < doc["newest_use_unix_ns"], "stats --json", doc)


def case_clear():
    """clear removes drk's entries, temporary files and own files; never anything else."""
    with tempfile.TemporaryDirectory() as t:
        paths = [plant(t, n, "cubin" if n % 2 else "result", 300)[0] for n in range(5)]
        fan = os.path.basename(os.path.dirname(paths[0]))
        name = os.path.basename(paths[0])
        temp = paths[0] + ".tmp.42.7"
        write(temp, b"half")
        write(os.path.join(t, "v1", "stats"), b"drk cache counters 1\nhits 1\n")
        write(os.path.join(t, "v1", "lock"), b"")
        foreign = [os.path.join(t, "photos", "cat.jpg"), os.path.join(t, "notes.txt"),
                   os.path.join(t, "v1", "mine"), os.path.join(t, "v1", fan, name.upper()),
                   os.path.join(t, "v1", fan, name + ".bak"), os.path.join(t, "v1", "zz", "x"),
                   os.path.join(t, "v2", "whatever")]
        for f in foreign:
            write(f)
        os.makedirs(os.path.join(t, "v1", "emptydir"))
        p = drk("cache", "--dir", t, "clear")
        check(p.returncode == 0 and "removed 6 files" in p.stdout, "clear: 5 entries and the temporary file", p)
        check("left 5 files that are not drk's" in p.stdout, "clear counts what it leaves in v1 (emptydir and zz too)", p)
        check(all(not os.path.exists(x) for x in paths + [temp]), "entries gone")
        check(all(os.path.exists(f) for f in foreign), "every foreign file stays")
        check(os.path.isdir(os.path.join(t, "v1", "emptydir")), "a directory not drk's stays")
        check(not os.path.exists(os.path.join(t, "v1", "stats")) and not os.path.exists(os.path.join(t, "v1", "lock")),
              "drk's own files go")
        check(os.path.isdir(os.path.join(t, "v1", fan)), "a fan-out directory holding a foreign file stays")
        # A cache of drk's files only goes whole, but DIR stays.
        plant(t + "/only", 1, "cubin", 10)
        p = drk("cache", "--dir", t + "/only", "clear")
        check(p.returncode == 0 and "removed 1 file " in p.stdout and os.listdir(t + "/only") == [], "only drk's", p)
        p = drk("cache", "--dir", t + "/never", "clear")
        check(p.returncode == 0 and "removed 0 files" in p.stdout and not os.path.exists(t + "/never"), "nothing", p)


def case_prune():
    with tempfile.TemporaryDirectory() as t:
        now = time.time()
        entry = HEADER + 16 + 1000
        paths = [plant(t, n, "cubin", 1000, used=now - 1000 + n)[0] for n in range(10)]
        stale, fresh = paths[0] + ".tmp.1.0", paths[1] + ".tmp.2.0"
        write(stale, b"x" * 10)
        os.utime(stale, (now - 7200, now - 7200))
        write(fresh, b"y" * 10)
        write(os.path.join(t, "v1", "foreign"))
        p = drk("cache", "--dir", t, "prune", "--size", str(6 * entry))
        check(p.returncode == 0 and "removed 5 files" in p.stdout, "prune: four oldest and the stale temp", p)
        check([os.path.exists(x) for x in paths] == [False] * 4 + [True] * 6, "the least recently used went", p)
        check(not os.path.exists(stale) and os.path.exists(fresh) and os.path.exists(os.path.join(t, "v1", "foreign")),
              "a stale temporary file goes; a fresh one and foreign files stay")
        # DRK_CACHE_SIZE when no --size; already under: nothing.
        p = drk("cache", "--dir", t, "prune", env={"DRK_CACHE_SIZE": str(3 * entry)})
        check(p.returncode == 0 and "removed 3 files" in p.stdout, "prune to DRK_CACHE_SIZE", p)
        p = drk("cache", "--dir", t, "prune")
        check(p.returncode == 0 and "removed 0 files" in p.stdout, "under the default cap: nothing", p)
        doc = json.loads(drk("cache", "--dir", t, "stats", "--json").stdout)
        check(doc["entries"] == 3 and doc["bytes"] == 3 * entry, "three left", doc)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--drk", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    ARGS = ap.parse_args()
    CASES[ARGS.case]()
    print(f"ok: {ARGS.case}")


if __name__ == "__main__":
    main()
