#!/usr/bin/env python3
"""`drk report --html`: the page, rendered by a real headless browser.

    html_test.py --drk BIN --fixtures DIR [--keep DIR]

Writes pages for the profile fixture (4 rounds and exit), a generated
report of 64 rounds (many kernel-shapes, names full of < > & and quotes,
findings whose evidence holds markup, counters), one of a single round, a
directory of several processes (one without gpu_time, one with GPU times
off, one without rounds, one with counters off), the counters fixture
directory, and the evolve fixture directory (with one more process: evolve
asked for but off). Chromium's DOM after rendering must hold what the
fixture says: one <rect> per round and drawn kernel-shape, one busy point
per round, both memory lines, the findings with their text as written, the
top-kernels table, the counters table (rows in order, tooltips, numbers)
where counters were asked for and nothing where not, the evolved kernels'
table likewise; its console must stay quiet (the page's
Content-Security-Policy turns any load into a console error) and its
screenshots must be drawn. The page must never name http:// or https://.

Without chromium the test is skipped (exit 77), unless DRK_REQUIRE_CHROMIUM
is set (other than "" or "0"): then it fails. Standard library only.
"""
import argparse
import copy
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
SERIES = 8          # kernel-shapes with a colour of their own (report_html.c's STACK_SERIES)
BUSY_LOW = 0.80     # drk's gpu_idle threshold
PALETTE0 = (0x4e, 0x79, 0xa7)  # the first series' colour
WINDOW = (1280, 2200)

ARGS = None


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def drk(*argv):
    e = dict(os.environ)
    e.setdefault("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0")
    return subprocess.run([ARGS.drk, *argv], env=e, capture_output=True, text=True, errors="replace", timeout=60)


# ---- reports -----------------------------------------------------------------

EVIL = "<i>x</i> & \"q\" 'a' <script>alert(1)</script>"


def kernel_names():
    """Twelve kernel names, most of them with HTML's special characters."""
    names = [
        "void gemm_kernel<float, 128, 64>(float const*, float const*, float*) [with T = float & U = \"u\"]",
        "at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, std::array<char*, 3> >",
        "softmax_warp_forward<c10::Half, float, 10, false>",
        "layer_norm<'x'> & <b>bold</b>",
        "nccl<AllReduce>" + "_very_long_segment" * 20,
        "memset<int>",
        "reduce_kernel<512, 1>",
        "elementwise<&>",
        "conv2d_fprop<\"quoted\">",
        "tail_kernel_a",
        "tail_kernel_b",
        EVIL,
    ]
    return names


def row(name, grid, block, shared, launches, total, median=None, p95=None, with_max=False):
    median = median if median is not None else max(1, total // max(1, launches))
    r = {"name": name, "grid": list(grid), "block": list(block), "shared_bytes": shared, "launches": launches,
         "total_ns": total, "min_ns": median // 2, "median_ns": median, "p95_ns": p95 or median * 2}
    if with_max:
        r["max_ns"] = r["p95_ns"] * 2
    return r


def round_of(index, start, top, other_ns=0, wall=2_000_000, live=0, reserved=0, ended_by="cuProfilerStop"):
    kernel_ns = sum(r["total_ns"] for r in top) + other_ns
    busy = min(wall, kernel_ns + 10_000)
    return {"index": index, "ended_by": ended_by, "start_ns": start, "end_ns": start + wall, "wall_ns": wall,
            "busy_ns": busy, "kernel_ns": kernel_ns, "copy_ns": 10_000,
            "kernels": sum(r["launches"] for r in top), "copies": 1,
            "memory": {"live_bytes": live, "reserved_bytes": reserved, "pages_moved": 0, "out_of_memory": 0},
            "gaps": [{"ns": 1000, "after": top[0]["name"] if top else None, "before": None}],
            "top": top, "other": {"kernels": 3 if other_ns else 0, "ns": other_ns}}


def gpu_time(rounds):
    """gpu_time whose by_kernel adds the rounds' rows up by kernel-shape."""
    by = {}
    for r in rounds:
        for t in r["top"]:
            k = (t["name"], tuple(t["grid"]), tuple(t["block"]), t["shared_bytes"])
            a = by.setdefault(k, [0, 0])
            a[0] += t["launches"]
            a[1] += t["total_ns"]
    rows = [row(k[0], k[1], k[2], k[3], v[0], v[1], with_max=True) for k, v in by.items()]
    rows.sort(key=lambda x: -x["total_ns"])
    kernel_ns = sum(r["kernel_ns"] for r in rounds)
    return {"enabled": True, "off_reason": None, "source": "/usr/lib/libcupti.so.13", "stopped": None,
            "kernels": sum(r["kernels"] for r in rounds), "kernel_ns": kernel_ns, "copies": len(rounds),
            "copy_ns": 10_000 * len(rounds), "copy_bytes": 4096 * len(rounds), "dropped": 0, "untracked": 0,
            "late": 0, "by_kernel": rows}


def rounds_of(rounds, merged=0):
    return {"closed": len(rounds) + merged, "kept": len(rounds), "marked": len(rounds), "list": rounds,
            "merged": {"rounds": merged, "wall_ns": merged * 1000, "busy_ns": merged * 500, "kernel_ns": 0,
                       "copy_ns": 0, "kernels": 0, "copies": 0}}


def big_report(base, nrounds=64):
    """Many rounds, twelve kernel-shapes (one kernel at two shapes), rows that
    come and go, other time, memory into GiB, findings."""
    names = kernel_names()
    rounds = []
    for i in range(nrounds):
        top = []
        for j, name in enumerate(names):
            if j >= 9 and i % (j - 7):   # the tail kernels run in some rounds only
                continue
            launches = 1 + (j * 7 + i) % 5
            total = (len(names) - j) * 20_000 + ((i * 37 + j * 11) % 13) * 1500
            top.append(row(name, (64 >> (j % 4), 1, 1), (256, 1, 1), 1024 * (j % 3), launches, total))
        if i % 3 == 0:  # gemm at a second shape
            top.append(row(names[0], (128, 2, 1), (128, 1, 1), 0, 2, 90_000))
        top.sort(key=lambda x: -x["total_ns"])
        gib = 1 << 30
        live = int(gib * (0.5 + 1.5 * i / nrounds))
        rounds.append(round_of(100 + i, 1_000_000_000 + i * 3_000_000, top, other_ns=25_000 if i % 4 == 0 else 0,
                               wall=2_000_000 if i % 5 else 6_000_000, live=live,
                               reserved=live + int(gib * 0.2 * (i % 7)),
                               ended_by="exit" if i == nrounds - 1 else "cuProfilerStop"))
    d = copy.deepcopy(base)
    d["process"]["program"] = "train<i>.py & \"co\""
    d["process"]["pid"] = 4343
    d["gpu_time"] = gpu_time(rounds)
    d["rounds"] = rounds_of(rounds, merged=7)
    d["findings"] = [
        {"name": "gpu_idle", "first_round": 100, "last_round": 163, "rounds": 40, "kernel": None,
         "value": 0.12, "reference": 0.8,
         "evidence": "busy 12% of 6.00 ms; largest gaps: 900 us after <gemm> & before \"memset\""},
        {"name": "kernel_slower", "first_round": 110, "last_round": 120, "rounds": 11,
         "kernel": {"name": names[0], "grid": [64, 1, 1], "block": [256, 1, 1], "shared_bytes": 0},
         "value": 12000, "reference": 10000, "evidence": "median 12.0 us, its best 10.0 us: " + EVIL},
        {"name": "new_shape", "first_round": 102, "last_round": 102, "rounds": 1,
         "kernel": {"name": names[0], "grid": [128, 2, 1], "block": [128, 1, 1], "shared_bytes": 0},
         "value": 0, "reference": 0, "evidence": "gemm at 128x2x1 / 128x1x1 / 0, not seen before"},
        {"name": "fragmentation", "first_round": 130, "last_round": 150, "rounds": 21, "kernel": None,
         "value": 0.3, "reference": 0.1, "evidence": "reserved 2.1 GiB, live 1.4 GiB"},
    ]
    return d


def one_round_report(base):
    top = [row("only<1>", (1, 1, 1), (32, 1, 1), 0, 3, 300_000), row("second", (2, 1, 1), (64, 1, 1), 0, 1, 50_000)]
    rounds = [round_of(0, 1_000_000_000, top, wall=400_000, live=3 << 20, reserved=8 << 20, ended_by="exit")]
    d = copy.deepcopy(base)
    d["process"]["pid"] = 11
    d["gpu_time"] = gpu_time(rounds)
    d["rounds"] = rounds_of(rounds)
    d["findings"] = []
    return d


def off_report(base):
    d = copy.deepcopy(base)
    d["process"]["pid"] = 12
    g = gpu_time([])
    g.update(enabled=False, off_reason="DRK_PROFILE=0 <unset> & off", source=None)
    # DRK_PROFILE=counters asked for, off with the times: the counters' note too.
    g["counters"] = {"enabled": False, "off_reason": g["off_reason"], "samples": 0, "discarded": 0, "cost_ns": 0,
                     "passes": 0, "budget": 0.05, "by_kernel": []}
    d["gpu_time"] = g
    d.pop("rounds", None)
    return d


NOT_ASKED = "DRK_PROFILE is not counters"


def with_counters(d, n=4):
    """`d` with counters (DRK_PROFILE=counters) for its `n` hottest kernel-shapes but the first, sampled first,
    listed in the report after the others (the page lists them most GPU time first); no loads in one."""
    rows = []
    for i, r in enumerate(d["gpu_time"]["by_kernel"][:n]):
        rows.append({"name": r["name"], "grid": r["grid"], "block": r["block"], "shared_bytes": r["shared_bytes"],
                     "dram_pct": 10.25 + 7 * i, "occupancy_pct": 80.5 - 9 * i,
                     "ld_sectors_per_request": -1 if i == 1 else 4 + i, "st_sectors_per_request": 4.5,
                     "samples": 1 + i % 2, "round": 3 * i})
    d["gpu_time"]["excluded"] = len(rows)
    d["gpu_time"]["counters"] = {"enabled": True, "off_reason": None, "samples": 6, "discarded": 1,
                                 "cost_ns": 690_000_000, "passes": 3, "budget": 0.05, "by_kernel": rows[1:] + rows[:1]}
    return d


def counters_off_report(base, why="cuptiRangeProfilerEnable failed: <CUPTI_ERROR_INSUFFICIENT_PRIVILEGES> & co"):
    d = copy.deepcopy(base)
    d["process"]["pid"] = 14
    d["gpu_time"]["excluded"] = 0
    d["gpu_time"]["counters"] = {"enabled": False, "off_reason": why, "samples": 0, "discarded": 0, "cost_ns": 0,
                                 "passes": 0, "budget": 0.05, "by_kernel": []}
    return d


def no_rounds_report(base):
    d = copy.deepcopy(base)
    d["process"]["pid"] = 13
    d["gpu_time"] = gpu_time([round_of(0, 0, [row("k", (1, 1, 1), (1, 1, 1), 0, 1, 1000)])])
    d["rounds"] = rounds_of([])
    return d


# ---- what the page must show, from the report ---------------------------------

def shape_key(r):
    return (r["name"], tuple(r["grid"]), tuple(r["block"]), r["shared_bytes"])


def expected_stack(d):
    """Per round index: {series id: ns} as report_html.c draws them (the top
    SERIES kernel-shapes over the kept rounds, ties by first seen; the rest
    and the round's own other as "other0"); zero-height segments not drawn."""
    rounds = d["rounds"]["list"]
    total, first = {}, {}
    for r in rounds:
        for t in r["top"]:
            k = shape_key(t)
            first.setdefault(k, len(first))
            total[k] = total.get(k, 0) + t["total_ns"]
    order = sorted(total, key=lambda k: (-total[k], first[k]))[:SERIES]
    out = {}
    for r in rounds:
        segs, other = {}, r["other"]["ns"]
        for t in r["top"]:
            k = shape_key(t)
            if k in order:
                if t["total_ns"]:
                    segs["k%d" % order.index(k)] = t["total_ns"]
            else:
                other += t["total_ns"]
        if other:
            segs["other0"] = other
        out[r["index"]] = segs
    return out, order


# ---- the DOM -------------------------------------------------------------------

class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children, self.text = tag, dict(attrs), parent, [], []

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def all_text(self):
        return "".join(c if isinstance(c, str) else c.all_text() for c in self.text)

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def find(self, tag=None, cls=None):
        return [n for n in self.walk() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes())]


VOID = {"meta", "link", "br", "hr", "img", "input", "col", "area", "base", "wbr", "source"}


class Tree(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        self.cur.text.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_startendtag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        self.cur.text.append(n)

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.text.append(data)


def parse(text):
    t = Tree()
    t.feed(text)
    t.close()
    return t.root


# ---- chromium --------------------------------------------------------------------

def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def chromium(browser, url, tmp, *extra):
    """Runs headless chromium on `url`; returns (stdout, stderr)."""
    profile = tempfile.mkdtemp(dir=tmp, prefix="profile-")
    e = dict(os.environ, HOME=profile)
    argv = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-dev-shm-usage", "--user-data-dir=" + profile,
            "--enable-logging=stderr", "--v=0", *extra, url]
    p = subprocess.run(argv, env=e, capture_output=True, text=True, errors="replace", timeout=120)
    check(p.returncode == 0, "chromium failed (rc %d):\n%s" % (p.returncode, p.stderr[-4000:]))
    consoles = [line for line in p.stderr.splitlines() if "CONSOLE" in line]
    check(not consoles, "the page wrote to the console:\n" + "\n".join(consoles))
    return p.stdout, p.stderr


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "%s: not a PNG" % path)
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    check(depth == 8 and ctype in (2, 6) and not interlace, "%s: unexpected PNG format %r" % (path, ihdr))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xff
        elif f == 2:
            line = bytearray((a + b) & 0xff for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xff
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xff
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def check_screenshot(path):
    w, h, bpp, rows = png_pixels(path)
    check((w, h) == WINDOW, "%s: %dx%d, not the window's %dx%d" % (path, w, h, *WINDOW))
    colours, series0 = set(), 0
    for line in rows:
        for x in range(0, w * bpp, bpp):
            px = line[x:x + 3]
            colours.add(px)
            series0 += px == bytes(PALETTE0)
    check(len(colours) > 20, "%s: only %d colours: nothing drawn?" % (path, len(colours)))
    # The first series' bars (or the busy line): solid areas of its colour.
    check(series0 > 500, "%s: %d pixels of the first series' colour: no bars drawn?" % (path, series0))
    return os.path.getsize(path)


# ---- checks of one page ------------------------------------------------------------

def render(html_path, tmp, reports, top=20):
    """Checks the page written for `reports` (report dicts, in page order)."""
    text = open(html_path, encoding="utf-8").read()
    check("http://" not in text and "https://" not in text, "%s names http(s)://" % html_path)
    check("<script" not in text.lower(), "%s has a <script>" % html_path)
    check("Content-Security-Policy" in text, "%s has no Content-Security-Policy" % html_path)

    # The file as written, and the DOM chromium made of it, must agree.
    dom_text, _ = chromium(BROWSER, "file://" + html_path, tmp, "--dump-dom")
    for name, doc in (("file", text), ("DOM", dom_text)):
        root = parse(doc)
        check(not root.find("script") and not root.find("i") and not root.find("img"),
              "%s of %s: markup from the report got through" % (name, html_path))
        sections = root.find("section", "process")
        check(len(sections) == len(reports), "%s: %d process sections, want %d" % (name, len(sections), len(reports)))
        for sec, d in zip(sections, reports):
            check_section(sec, d, top, "%s of %s, pid %s" % (name, html_path, d["process"]["pid"]))
    return text


def check_section(sec, d, top, where):
    h2 = sec.find("h2")[0].all_text()
    check(h2.startswith(d["process"]["program"]), "%s: heading %r" % (where, h2))
    g = d.get("gpu_time")
    notes = " ".join(n.all_text() for n in sec.find("p", "note"))
    charts = sec.find("svg", "chart")
    if not g:
        check("no gpu_time" in notes and not charts, "%s: no note for a report without gpu_time" % where)
        return
    if not g["enabled"]:
        check(("off (%s)" % g["off_reason"]) in notes and not charts, "%s: no off_reason note: %r" % (where, notes))
        check_counters(sec, g, top, where)
        check_evolve(sec, d, top, where)
        return
    rounds = (d.get("rounds") or {}).get("list") or []
    if not rounds:
        check("No rounds" in notes and not charts, "%s: no note for a process without rounds" % where)
    else:
        check(len(charts) == 3, "%s: %d charts, want 3" % (where, len(charts)))
        check_stacked(sec, d, where)
        check_busy(sec, rounds, where)
        check_memory(sec, rounds, where)
    check_findings(sec, d, where)
    check_table(sec, g, top, where)
    check_counters(sec, g, top, where)
    check_evolve(sec, d, top, where)


def check_stacked(sec, d, where):
    want, order = expected_stack(d)
    svg = sec.find("svg", "stacked")[0]
    got = {}
    for r in svg.find("rect", "seg"):
        got.setdefault(int(r.attrs["data-round"]), {})[r.attrs["data-series"]] = float(r.attrs["height"])
        check(r.find("title"), "%s: a segment without a tooltip" % where)
        check(float(r.attrs["height"]) >= 0 and float(r.attrs["width"]) > 0, "%s: a bad rect" % where)
    nwant = sum(len(s) for s in want.values())
    nrects = len(svg.find("rect", "seg"))
    check(nrects == nwant, "%s: %d segments, want %d (one per round and kernel-shape)" % (where, nrects, nwant))
    want_drawn = {i: set(s) for i, s in want.items() if s}
    check({i: set(s) for i, s in got.items()} == want_drawn, "%s: segments per round differ" % where)
    # Heights follow the times: within a round, ratios of ns are ratios of height.
    for i, segs in want.items():
        if len(segs) < 2:
            continue
        a, b = sorted(segs, key=lambda s: -segs[s])[:2]
        if got[i][b] > 2:
            check(abs(got[i][a] / got[i][b] - segs[a] / segs[b]) < 0.1 * segs[a] / segs[b] + 0.05,
                  "%s: round %d: heights do not follow the times" % (where, i))
    legends = sec.find("svg", "legend")
    legend = legends[0].find("g", "legend-item") if legends else []
    has_other = any("other0" in s for s in want.values())
    check(len(legend) == len(order) + has_other, "%s: %d legend items, want %d" % (where, len(legend),
                                                                                 len(order) + has_other))
    for item, k in zip(legend, order):
        title = item.find("title")[0].all_text()
        check(title.startswith(k[0]), "%s: legend tooltip %r is not the full name %r" % (where, title, k[0]))
        label = item.find("text")[0].all_text()
        check(len(label) < 120, "%s: a legend label of %d characters" % (where, len(label)))


def points_of(poly):
    return [tuple(map(float, p.split(","))) for p in poly.attrs["points"].split()]


def check_busy(sec, rounds, where):
    svg = sec.find("svg", "busy")[0]
    line = svg.find("polyline", "busy-line")
    check(len(line) == 1, "%s: no busy line" % where)
    pts = points_of(line[0])
    check(len(pts) == len(rounds), "%s: busy line of %d points, want %d" % (where, len(pts), len(rounds)))
    dots = svg.find("circle", "busy-point")
    check(len(dots) == len(rounds), "%s: %d busy points, want %d" % (where, len(dots), len(rounds)))
    low = [r for r in rounds if not r["wall_ns"] or r["busy_ns"] / r["wall_ns"] < BUSY_LOW]
    check(len(svg.find("circle", "low")) == len(low), "%s: rounds under 80%% not marked" % where)
    th = svg.find("line", "threshold")
    check(len(th) == 1, "%s: no 80%% line" % where)
    labels = [t.all_text() for t in svg.find("text")]
    check("0%" in labels and "100%" in labels and any("80%" in t for t in labels), "%s: busy axis labels" % where)
    # The 80% line is at 80% of the way from the 0% to the 100% grid line.
    y80 = float(th[0].attrs["y1"])
    ys = sorted(float(g.attrs["y1"]) for g in svg.find("line", "grid"))
    check(abs((ys[-1] - y80) / (ys[-1] - ys[0]) - 0.8) < 0.01, "%s: the 80%% line is misplaced" % where)
    # x ascends with the rounds; busier rounds sit higher.
    check(all(a[0] < b[0] for a, b in zip(pts, pts[1:])), "%s: busy points out of order" % where)
    for (x1, y1), (x2, y2), r1, r2 in zip(pts, pts[1:], rounds, rounds[1:]):
        b1, b2 = r1["busy_ns"] / r1["wall_ns"], r2["busy_ns"] / r2["wall_ns"]
        if abs(b1 - b2) > 0.01:
            check((y1 > y2) == (b1 < b2), "%s: busy points not by busy share" % where)


def check_memory(sec, rounds, where):
    svg = sec.find("svg", "memory")[0]
    for what in ("live", "reserved"):
        line = svg.find("polyline", "mem-" + what)
        check(len(line) == 1, "%s: no %s memory line" % (where, what))
        check(len(points_of(line[0])) == len(rounds), "%s: %s line points" % (where, what))
    title = [t.all_text() for t in svg.find("text", "title")]
    top = max(max(r["memory"]["live_bytes"], r["memory"]["reserved_bytes"]) for r in rounds)
    unit = "GiB" if top >= 1 << 30 else "MiB"
    check(any(unit in t for t in title), "%s: memory axis not in %s: %r" % (where, unit, title))
    live, res = points_of(svg.find("polyline", "mem-live")[0]), points_of(svg.find("polyline", "mem-reserved")[0])
    for a, b, r in zip(live, res, rounds):
        if r["memory"]["reserved_bytes"] > r["memory"]["live_bytes"]:
            check(b[1] < a[1], "%s: reserved drawn below live" % where)


def check_findings(sec, d, where):
    fs = d.get("findings")
    items = sec.find("li", "finding")
    if fs is None:
        check(not items and any("no findings" in n.all_text() for n in sec.find("p", "note")),
              "%s: no note for a report without findings" % where)
        return
    check(len(items) == len(fs), "%s: %d findings, want %d" % (where, len(items), len(fs)))
    for li, f in zip(items, fs):
        check(li.find("span", "finding-name")[0].all_text() == f["name"], "%s: finding name" % where)
        check(li.find("div", "evidence")[0].all_text() == f["evidence"],
              "%s: evidence %r, want %r" % (where, li.find("div", "evidence")[0].all_text(), f["evidence"]))
        rounds = li.find("span", "finding-rounds")[0].all_text()
        check(str(f["first_round"]) in rounds and str(f["last_round"]) in rounds, "%s: finding rounds" % where)
        if f["kernel"]:
            check(li.find("div", "finding-kernel")[0].attrs["title"] == f["kernel"]["name"],
                  "%s: finding kernel" % where)


def check_table(sec, g, top, where):
    table = [t for t in sec.find("table", "kernels") if not {"counters", "evolve"} & set(t.classes())]
    rows = g["by_kernel"]
    if not rows:
        check(not table, "%s: a table without rows" % where)
        return
    body = table[0].find("tbody")[0].find("tr")
    want = min(top, len(rows)) if top else len(rows)
    check(len(body) == want, "%s: %d table rows, want %d" % (where, len(body), want))
    heads = [th.all_text() for th in table[0].find("th")]
    for h in ("kernel", "launches", "GPU time", "share", "median", "p95"):
        check(any(h in x for x in heads), "%s: no %s column" % (where, h))
    for tr, r in zip(body, sorted(rows, key=lambda x: -x["total_ns"])):
        cells = tr.find("td")
        check(cells[1].attrs["title"] == r["name"], "%s: table name %r" % (where, cells[1].attrs["title"]))
        check(cells[3].all_text() == str(r["launches"]), "%s: launches" % where)


def check_counters(sec, g, top, where):
    """gpu_time.counters: nothing unless asked for; off: a note with the reason; else a table of the rows, most
    GPU time first (then as in the report), the full name in a tooltip, the numbers as the text report's."""
    c = g.get("counters")
    asked = bool(c) and (c["enabled"] or c["off_reason"] not in (None, NOT_ASKED))
    tables = sec.find("table", "counters")
    heads = [h.all_text() for h in sec.find("h3") if "counters" in h.all_text()]
    if not asked:
        check(not tables and not heads, "%s: counters drawn, not asked for" % where)
        return
    check(len(heads) == 1, "%s: %d counters headings" % (where, len(heads)))
    if not c["enabled"]:
        notes = " ".join(n.all_text() for n in sec.find("p", "note"))
        check(not tables and ("Counters (DRK_PROFILE=counters): off (%s)" % c["off_reason"]) in notes,
              "%s: no note of the counters' off_reason: %r" % (where, notes))
        return
    captions = " ".join(n.all_text() for n in sec.find("p", "caption"))
    check("%d samples (%d given up), %d passes each" % (c["samples"], c["discarded"], c["passes"]) in captions,
          "%s: the counters' caption: %r" % (where, captions))
    rows = c["by_kernel"]
    if not rows:
        check(not tables, "%s: a counters table without rows" % where)
        return
    gpu = {shape_key(r): r["total_ns"] for r in g["by_kernel"]}
    order = sorted(range(len(rows)), key=lambda i: (-gpu.get(shape_key(rows[i]), 0), i))
    want = min(top, len(rows)) if top else len(rows)
    check(len(tables) == 1, "%s: %d counters tables" % (where, len(tables)))
    body = tables[0].find("tbody")[0].find("tr")
    check(len(body) == want, "%s: %d counters rows, want %d" % (where, len(body), want))
    heads = [th.all_text() for th in tables[0].find("th")]
    check(heads == ["GPU time", "kernel", "shape: grid / block / shared", "DRAM %", "occupancy %",
                    "ld sectors/request", "st sectors/request", "round", "samples"],
          "%s: counters columns %r" % (where, heads))
    sectors = lambda v: "-" if v < 0 else "%.2f" % v
    for tr, i in zip(body, order):
        r, cells = rows[i], tr.find("td")
        check(cells[1].attrs["title"] == r["name"], "%s: counters name %r" % (where, cells[1].attrs["title"]))
        got = [x.all_text() for x in cells[3:]]
        check(got == ["%.1f" % r["dram_pct"], "%.1f" % r["occupancy_pct"], sectors(r["ld_sectors_per_request"]),
                      sectors(r["st_sectors_per_request"]), str(r["round"]), str(r["samples"])],
              "%s: counters row %r for %r" % (where, got, r))


EVOLVE_NOT_ASKED = "DRK_EVOLVE=0"
EVOLVE_STATES = ("settled", "searching", "capturing", "failed", "refused")


def evolve_order(rows):
    """evolve.by_kernel most evolved first: serving a variant (fastest first), then by state, proven, tried."""
    def key(i):
        r = rows[i]
        served = r["serving"] != "default"
        state = EVOLVE_STATES.index(r["state"]) if r["state"] in EVOLVE_STATES else len(EVOLVE_STATES)
        return (not served, -r["speedup"] if served else 0, state, -r["proven"], -r["tried"], i)
    return sorted(range(len(rows)), key=key)


def check_evolve(sec, d, top, where):
    """evolve: nothing unless DRK_EVOLVE=1 was asked for; off: a note with the reason; else its totals and a
    table of the rows, most evolved first, the full name in a tooltip."""
    e = d.get("evolve")
    asked = bool(e) and (e["enabled"] or e["off_reason"] not in (None, EVOLVE_NOT_ASKED))
    tables = sec.find("table", "evolve")
    heads = [h.all_text() for h in sec.find("h3") if "Evolved kernels" in h.all_text()]
    if not asked:
        check(not tables and not heads, "%s: evolve drawn, not asked for" % where)
        return
    check(len(heads) == 1, "%s: %d evolve headings" % (where, len(heads)))
    if not e["enabled"]:
        notes = " ".join(n.all_text() for n in sec.find("p", "note"))
        check(not tables and ("Evolve (DRK_EVOLVE=1): off (%s)" % e["off_reason"]) in notes,
              "%s: no note of evolve's off_reason: %r" % (where, notes))
        return
    captions = " ".join(n.all_text() for n in sec.find("p", "caption"))
    check("Kernel-shapes drk looked at: %d, evolved %d, refused %d, failed %d" % (
        e["kernels"], e["evolved"], e["refused"], e["failed"]) in captions, "%s: evolve's caption: %r" % (where, captions))
    rows = e["by_kernel"]
    if not rows:
        check(not tables, "%s: an evolve table without rows" % where)
        return
    want = min(top, len(rows)) if top else len(rows)
    check(len(tables) == 1, "%s: %d evolve tables" % (where, len(tables)))
    body = tables[0].find("tbody")[0].find("tr")
    check(len(body) == want, "%s: %d evolve rows, want %d" % (where, len(body), want))
    heads = [th.all_text() for th in tables[0].find("th")]
    check(heads == ["speedup", "kernel", "shape: grid / block / shared", "state", "serving",
                    "tried / proven / rejected", "builds", "why"], "%s: evolve columns %r" % (where, heads))
    for tr, i in zip(body, evolve_order(rows)):
        r, cells = rows[i], tr.find("td")
        check(cells[1].attrs["title"] == r["name"], "%s: evolve name %r" % (where, cells[1].attrs["title"]))
        got = [cells[0].all_text()] + [x.all_text() for x in cells[3:6]] + [cells[7].all_text()]
        # A speedup not timed in the program (older reports: none) is the replays' estimate, marked so.
        x = "%.2fx" % r["speedup"] + ("" if r.get("run_speedup", 0) > 0 else " (replays)")
        check(got == ["-" if r["serving"] == "default" else x, r["state"], r["serving"],
                      "%d / %d / %d" % (r["tried"], r["proven"], r["rejected"]), r["why"] or "-"],
              "%s: evolve row %r for %r" % (where, got, r))


# ---- main ---------------------------------------------------------------------------

def write(path, d):
    with open(path, "w") as f:
        json.dump(d, f)
    return path


def html_of(tmp, name, path, *extra):
    out = os.path.join(tmp, name + ".html")
    p = drk("report", "--html", out, *extra, path)
    check(p.returncode == 0, "drk report --html %s: rc %d\n%s" % (path, p.returncode, p.stderr))
    return out


def main():
    global ARGS, BROWSER
    ap = argparse.ArgumentParser()
    ap.add_argument("--drk", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--keep", help="leave the pages and screenshots in this directory")
    ARGS = ap.parse_args()

    BROWSER = find_chromium()
    required = os.environ.get("DRK_REQUIRE_CHROMIUM", "") not in ("", "0")
    if not BROWSER:
        if required:
            print("FAIL: chromium is not installed and DRK_REQUIRE_CHROMIUM is set "
                  "(apt-get install -y chromium)", file=sys.stderr)
            return 1
        print("SKIP: chromium is not installed (apt-get install -y chromium); "
              "set DRK_REQUIRE_CHROMIUM=1 to fail instead", file=sys.stderr)
        return SKIP

    tmp = tempfile.mkdtemp(prefix="drk-html-")
    try:
        profile_fixture = os.path.join(ARGS.fixtures, "profile", "drk-profile_route-1.json")
        base = json.load(open(profile_fixture))
        older = json.load(open(os.path.join(ARGS.fixtures, "single.json")))

        # Usage and write errors: nothing half-written, the right status.
        for argv, rc in ((["--html"], 2), (["--json", "--html", os.path.join(tmp, "x.html")], 2),
                         (["--html", os.path.join(tmp, "no", "such", "dir.html")], 1)):
            p = drk("report", *argv, profile_fixture)
            check(p.returncode == rc, "drk report %s: rc %d, want %d\n%s" % (argv, p.returncode, rc, p.stderr))

        pages = {}
        # The profile fixture: 4 rounds and the exit one, no findings (older).
        pages["profile"] = html_of(tmp, "profile", profile_fixture)
        render(pages["profile"], tmp, [base])

        big = with_counters(big_report(base))
        pages["big"] = html_of(tmp, "big", write(os.path.join(tmp, "big.json"), big))
        render(pages["big"], tmp, [big])
        check(len(big["rounds"]["list"]) == 64, "the generator made %d rounds" % len(big["rounds"]["list"]))

        # --top 5: five table rows and the rest in a note.
        top5 = html_of(tmp, "big-top5", os.path.join(tmp, "big.json"), "--top", "5")
        text = render(top5, tmp, [big], top=5)
        check("more kernel-shapes" in text, "--top 5: no note of the rows left out")

        one = one_round_report(base)
        pages["one"] = html_of(tmp, "one", write(os.path.join(tmp, "one.json"), one))
        render(pages["one"], tmp, [one])

        # A directory: the page lists processes by start time, then pid.
        d = os.path.join(tmp, "dir")
        os.mkdir(d)
        procs = [older, off_report(base), no_rounds_report(base), one, big, counters_off_report(base)]
        for i, r in enumerate(procs):
            write(os.path.join(d, "drk-%d.json" % i), r)
        procs.sort(key=lambda r: (r["process"]["start_unix_ns"], r["process"]["pid"]))
        pages["dir"] = html_of(tmp, "dir", d)
        render(pages["dir"], tmp, procs)

        # The counters fixture: two processes with counters, one not asked, one older (neither key).
        cdir = os.path.join(ARGS.fixtures, "counters")
        creports = [json.load(open(os.path.join(cdir, f))) for f in sorted(os.listdir(cdir))]
        creports.sort(key=lambda r: (r["process"]["start_unix_ns"], r["process"]["pid"]))
        pages["counters"] = html_of(tmp, "counters", cdir)
        render(pages["counters"], tmp, creports)
        check(sum(bool(r["gpu_time"].get("counters", {}).get("by_kernel")) for r in creports) == 2,
              "the counters fixture has two processes with counters")

        # The evolve fixture (two processes with evolve on, one not asked), with one asked but off, and --top 2.
        edir = os.path.join(tmp, "evolve")
        shutil.copytree(os.path.join(ARGS.fixtures, "evolve"), edir)
        ereports = [json.load(open(os.path.join(edir, f))) for f in sorted(os.listdir(edir))]
        off = copy.deepcopy(ereports[0])
        off["process"]["pid"] = 44
        off["process"]["start_unix_ns"] += 100
        off["evolve"].update(enabled=False, off_reason="no GPU times <see gpu_time.off_reason> & co", by_kernel=[])
        write(os.path.join(edir, "drk-train-44.json"), off)
        ereports.append(off)
        ereports.sort(key=lambda r: (r["process"]["start_unix_ns"], r["process"]["pid"]))
        pages["evolve"] = html_of(tmp, "evolve", edir)
        render(pages["evolve"], tmp, ereports)
        render(html_of(tmp, "evolve-top2", edir, "--top", "2"), tmp, ereports, top=2)
        check(sum(bool(r.get("evolve", {}).get("by_kernel")) for r in ereports) == 2,
              "the evolve fixture has two processes with rows")

        # Screenshots: drawn, and different reports look different.
        sizes = {}
        for name in ("profile", "big", "one"):
            png = os.path.join(tmp, name + ".png")
            chromium(BROWSER, "file://" + pages[name], tmp, "--screenshot=" + png,
                     "--window-size=%d,%d" % WINDOW, "--hide-scrollbars")
            sizes[name] = check_screenshot(png)
        check(len({open(os.path.join(tmp, n + ".png"), "rb").read() for n in sizes}) == len(sizes),
              "screenshots of different reports are the same")
        print("ok: %d pages rendered; screenshots %s" % (len(pages) + 1,
                                                         ", ".join("%s %d B" % kv for kv in sizes.items())))
        return 0
    finally:
        if ARGS.keep:
            os.makedirs(ARGS.keep, exist_ok=True)
            for f in os.listdir(tmp):
                if f.endswith((".html", ".png", ".json")):
                    shutil.copy(os.path.join(tmp, f), ARGS.keep)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print("FAIL:", e, file=sys.stderr)
        sys.exit(1)
