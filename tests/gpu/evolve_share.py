"""Where a program's GPU time goes, by what drk's evolution made of each
kernel-shape, from one drk report (gpu_time.by_kernel joined with
evolve.by_kernel on name, grid and block). Shared by check.py --evolve and
evolve_check.py.

shares(rep) -> {
  "rows": [(share, kernel_shapes, what)], largest first, what being a state
          ("settled", "searching", ...), "refused: <reason's first words>"
          or, for a kernel drk never chose (no round had it hottest, or
          the program ended before a round closed), "not a target: " and
          what its image says: "no image facts", "SASS only" or "PTX for
          the device";
  "could": the share of GPU time in kernel-shapes drk evolved or is evolving,
  "ptx": the share in kernels whose image has PTX the device can JIT (what
         the PTX source could work on, were they hot and their pointers
         found: an upper bound),
  "served": [(name, share, speedup)] for kernel-shapes a variant serves,
  "speedup": the program's kernel time at steady state over what it would be
             with every served variant at its measured speedup (an estimate:
             1.0 when nothing is served)}
"""
import collections
import re


def _key(r):
    return (r["name"], tuple(r["grid"]), tuple(r["block"]))


def _what(r):
    if r["state"] != "refused":
        return r["state"]
    return "refused: " + re.sub(r"`[^`]*`", "`...`", r["why"]).split(":")[0]


def _image_says(kernel):
    im = (kernel or {}).get("image")
    if not im:
        return "no image facts"
    return "PTX for the device" if im.get("ptx_for_device") else "SASS only"


def shares(rep):
    ev = rep.get("evolve") or {}
    rows = {_key(r): r for r in ev.get("by_kernel", [])}
    kernels = {k["name"]: k for k in (rep.get("kernels") or {}).get("list", [])}
    ptx = 0
    times, shapes = collections.Counter(), collections.Counter()
    served, after = [], 0.0
    gt = (rep.get("gpu_time") or {}).get("by_kernel", [])
    total = sum(r["total_ns"] for r in gt) or 1
    for g in gt:
        r = rows.get(_key(g))
        says = _image_says(kernels.get(g["name"]))
        ptx += g["total_ns"] if says == "PTX for the device" else 0
        what = _what(r) if r else "not a target: " + says
        times[what] += g["total_ns"]
        shapes[what] += 1
        share = g["total_ns"] / total
        if r and r.get("serving") not in (None, "", "default") and r.get("speedup", 0) > 0:
            served.append((g["name"], share, r["speedup"]))
            after += share / r["speedup"]
        else:
            after += share
    could = sum(ns for w, ns in times.items() if not w.startswith(("refused", "not a target")))
    return {"rows": [(ns / total, shapes[w], w) for w, ns in times.most_common()],
            "could": could / total if gt else 0.0, "ptx": ptx / total if gt else 0.0, "served": served,
            "speedup": 1.0 / after if gt and after > 0 else 1.0}
