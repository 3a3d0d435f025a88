"""A GPT-style training loop in PyTorch with a sequence length that varies
from step to step: the allocation pattern that fragments a caching pool.
Run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 every tensor reaches the driver
(cuMemAlloc/cuMemFree); with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,
cuMemAllocAsync/cuMemFreeAsync. Under drk with DRK_ALLOC_TRACE set, that is
an allocation trace of a real training run.

    gpt_train.py [--steps K] [--layers L] [--dim D] [--seed S] [--nvtx]

Prints the loss every 10 steps and at the end as float.hex(); deterministic
for a given seed (fixed seeds, deterministic algorithms).
"""
import argparse
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

from gpt_model import GPT, train_step  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nvtx", action="store_true", help="each step an NVTX range named 'round' (drk's rounds)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpt_train.py: no CUDA device")
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda")
    model = GPT(a.dim, a.layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator(device="cpu").manual_seed(a.seed + 1)
    loss = None
    for step in range(a.steps):
        if a.nvtx:
            torch.cuda.nvtx.range_push("round")
        loss, t = train_step(model, opt, gen, 8, dev)
        if a.nvtx:
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
        if step % 10 == 0:
            print(f"step {step} seq {t} loss {loss.item().hex()}")
    torch.cuda.synchronize()
    print(f"final loss {loss.item().hex()}")


if __name__ == "__main__":
    main()
