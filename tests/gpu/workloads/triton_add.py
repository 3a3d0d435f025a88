"""A Triton kernel launched N times: out += x + y on int32, so the result
proves every launch ran exactly once (out == N * (x + y), checked on the
host). Prints a checksum; its own count of its kernel's launches goes to
$DRK_TEST_COUNTS. Triton resolves cuLaunchKernel[Ex] with dlsym on its
libcuda handle: the dlsym route.

    triton_add.py [--n N]
"""
import argparse
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drk_workload import die, write_counts  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

KERNEL = "drk_add_kernel"  # Triton names the compiled kernel after the function
SIZE = (1 << 20) + 123     # not a multiple of BLOCK: the mask matters
BLOCK = 1024


@triton.jit
def drk_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    o = tl.load(out_ptr + offs, mask=m)
    tl.store(out_ptr + offs, o + x + y, mask=m)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        die("triton_add", "CUDA is not available to PyTorch")
    g = torch.Generator().manual_seed(99)  # inputs drawn on the CPU: no extra launches
    x_h = torch.randint(-1000, 1000, (SIZE,), dtype=torch.int32, generator=g)
    y_h = torch.randint(-1000, 1000, (SIZE,), dtype=torch.int32, generator=g)
    x, y = x_h.cuda(), y_h.cuda()
    out = torch.zeros(SIZE, dtype=torch.int32, device="cuda")

    grid = (triton.cdiv(SIZE, BLOCK),)
    for _ in range(args.n):
        drk_add_kernel[grid](x, y, out, SIZE, BLOCK=BLOCK)
    torch.cuda.synchronize()

    got = out.cpu()
    want = (x_h + y_h) * args.n
    bad = int((got != want).sum())
    if bad:
        i = int((got != want).nonzero()[0])
        die("triton_add", f"{bad} wrong elements; out[{i}] = {int(got[i])}, expected {int(want[i])}")
    print(f"triton_add size {SIZE} launches {args.n}")
    print(f"sum {int(got.sum(dtype=torch.int64))}")
    print(f"sha256 {hashlib.sha256(got.numpy().tobytes()).hexdigest()}")
    write_counts("triton_add", kernels={KERNEL: args.n})


if __name__ == "__main__":
    main()
