"""A planted degradation for drk's findings: one CuPy kernel launched at one
launch shape, 20 times a round for 10 rounds (each ended by cudaProfilerStop),
whose per-thread loop runs twice as long from round 5 on: the same kernel
and shape, slower, as when a kernel's input grows or its registers shrink.

    degrade.py [--rounds 10] [--from 5] [--occupancy]

With --occupancy the loop stays as it is and the kernel is launched from
round 5 with 40 KiB of dynamic shared memory it does not use: its theoretical
occupancy falls from 100% to 62.5% of an H200 SM's warps (five blocks of 256
threads fit in the SM's shared memory), the occupancy-drop finding's case.
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
    ap.add_argument("--occupancy", action="store_true")
    a = ap.parse_args()
    spin = cupy.RawKernel(SRC, "drk_spin")
    x = cupy.ones(128 * 256, dtype=cupy.float32)
    for r in range(a.rounds):
        late = r >= a.start
        iters = 20000 if late and not a.occupancy else 10000
        shared = 40960 if late and a.occupancy else 0
        for _ in range(20):
            spin((128,), (256,), (x, cupy.int32(iters)), shared_mem=shared)
        cupy.cuda.runtime.deviceSynchronize()
        cupy.cuda.runtime.profilerStop()  # a round's end, for drk
    what = "40 KiB of shared memory" if a.occupancy else "slower"
    print(f"degrade: {a.rounds} rounds, {what} from round {a.start}, kernel drk_spin, sum {float(x.sum()):.3f}")


if __name__ == "__main__":
    main()
