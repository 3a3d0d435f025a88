"""A CuPy ElementwiseKernel and a ReductionKernel, each called N times. CuPy
compiles them with NVRTC, loads them with cuModuleLoadData and names each
kernel after the name= argument (extern "C"), so the report's names are
known here. The elementwise kernel accumulates (y += a * x) and the
reduction sums y*y after each step, so the host check proves every launch
ran exactly once.

    cupy_ops.py [--n N]
"""
import argparse
import hashlib
import os
import sys

# CUB-backed reductions would replace the ReductionKernel's own kernel with
# differently named ones; keep CuPy's plain kernels.
os.environ["CUPY_ACCELERATORS"] = ""

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drk_workload import die, write_counts  # noqa: E402

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

AXPY, SUMSQ = "drk_axpy_acc", "drk_sumsq"
SIZE = (1 << 20) + 321
A = 3

axpy = cp.ElementwiseKernel("int32 x, int32 a", "int32 y", "y = y + a * x", AXPY)
sumsq = cp.ReductionKernel("int32 x", "int64 s", "(long long)x * x", "a + b", "s = a", "0", SUMSQ)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    x_h = rng.integers(-100, 100, SIZE, dtype=np.int32)
    x = cp.asarray(x_h)                     # a copy, no kernel
    y = cp.zeros(SIZE, dtype=cp.int32)      # a memset, no kernel
    total = 0
    for _ in range(args.n):
        axpy(x, np.int32(A), y)             # y is the output argument: updated in place
        total += int(sumsq(y))              # one reduction kernel, result to the host
    cp.cuda.runtime.deviceSynchronize()

    got = cp.asnumpy(y)
    want = x_h.astype(np.int64) * A * args.n
    if not np.array_equal(got.astype(np.int64), want):
        i = int(np.nonzero(got != want)[0][0])
        die("cupy_ops", f"y[{i}] = {got[i]}, expected {want[i]}")
    # sum over k of sum((k*A*x)^2) = A^2 * sum(x^2) * sum(k^2)
    sq = int((x_h.astype(np.int64) ** 2).sum())
    want_total = A * A * sq * sum(k * k for k in range(1, args.n + 1))
    if total != want_total:
        die("cupy_ops", f"sum of reductions = {total}, expected {want_total}")
    print(f"cupy_ops size {SIZE} calls {args.n}")
    print(f"reductions_total {total}")
    print(f"sha256 {hashlib.sha256(got.tobytes()).hexdigest()}")
    write_counts("cupy_ops", kernels={AXPY: args.n, SUMSQ: args.n})


if __name__ == "__main__":
    main()
