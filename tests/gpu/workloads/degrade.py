"""A planted degradation for drk's findings: one CuPy kernel launched at one
launch shape, 20 times a round for 10 rounds (each ended by cudaProfilerStop),
whose per-thread loop runs twice as long from round 5 on: the same kernel
and shape, slower, as when a kernel's input grows or its registers shrink.

    degrade.py [--rounds 10] [--from 5]

Prints the rounds it ran and the kernel's name.
"""
import argparse

import cupy

SRC = r"""
extern "C" __global__ void drk_spin(float *x, int iters)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    for (int k = 0; k < iters; k++)
        v = v * 0.999f + 0.001f;
    x[i] = v;
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--from", dest="start", type=int, default=5)
    a = ap.parse_args()
    spin = cupy.RawKernel(SRC, "drk_spin")
    x = cupy.ones(128 * 256, dtype=cupy.float32)
    for r in range(a.rounds):
        iters = 20000 if r >= a.start else 10000
        for _ in range(20):
            spin((128,), (256,), (x, cupy.int32(iters)))
        cupy.cuda.runtime.deviceSynchronize()
        cupy.cuda.runtime.profilerStop()  # a round's end, for drk
    print(f"degrade: {a.rounds} rounds, slower from round {a.start}, kernel drk_spin, sum {float(x.sum()):.3f}")


if __name__ == "__main__":
    main()
