#!/usr/bin/env python3
"""Writes the allocation trace of tests/gpu/programs/alloc_frag.c as it runs
on an H200 (150,109,880,320 bytes of device memory): the same generator, the
same sizes, frees and order, so that what drk's heap does with it can be
replayed here (check_traces.py) with the driver's costs, no GPU needed.

Usage: frag_trace.py > alloc_frag.trace"""
import sys

PAGE = 2 << 20
DEVICE = 150109880320
CYCLES = 4


def trace(total=DEVICE):
    lcg = 20240613

    def rnd():
        nonlocal lcg
        lcg = (lcg * 1664525 + 1013904223) & 0xFFFFFFFF
        return lcg >> 8

    region = total // 100 * 53
    unit = max(region // PAGE // 800, 1)
    pin_pages = max(unit // 2, 1)
    g = [7, 3, 1, 1]
    lo, hi = [unit] * CYCLES, [2 * unit] * CYCLES
    for k in range(1, CYCLES):
        lo[k] = g[k - 1] * hi[k - 1] + 2
        hi[k] = lo[k] + lo[k] // 4 + 1
    lines = ["# drk-alloc-trace 1", f"# page_size {PAGE}", f"# device_bytes {total}",
             "# program tests/gpu/programs/alloc_frag.c (written by tests/traces/frag_trace.py)"]
    blocks = []  # [id, size, cycle, pin, live]

    def op(text):
        lines.append(f"{1000 * (len(lines) - 3)} {text}")

    def alloc(size, pin, cycle):
        b = [len(blocks) + 1, size, cycle, pin, True]
        blocks.append(b)
        op(f"a {b[0]} {size} -")
        return b

    def free(b):
        op(f"f {b[0]} -")
        b[4] = False

    for cycle in range(1, CYCLES + 1):
        k = cycle - 1
        for b in blocks:
            if b[4] and b[3] and b[2] <= cycle - 3:
                free(b)
        filled, first, full = 0, len(blocks), False
        while not full and filled + (pin_pages + 2 + lo[k]) * PAGE <= region:
            filled += alloc(pin_pages * PAGE, 1, cycle)[1]
            filled += alloc(1 + rnd() % (3 << 20), 0, cycle)[1]
            for _ in range(g[k]):
                if full:
                    break
                pages, left = lo[k] + rnd() % (hi[k] - lo[k] + 1), (region - filled) // PAGE
                if pages > left:
                    pages, full = left, True
                if pages >= lo[k]:
                    filled += alloc(pages * PAGE, 0, cycle)[1]
            free(alloc(1 + rnd() % (3 << 20), 0, cycle))
        for b in blocks[first:]:
            if b[4] and not b[3]:
                free(b)
    for b in blocks:
        if b[4]:
            free(b)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(trace())
