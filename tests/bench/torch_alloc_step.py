"""Step time of a small GPT-style PyTorch trainer whose sequence length varies
from step to step, for tests/bench/alloc.sh: with PYTORCH_NO_CUDA_MEMORY_CACHING=1
every tensor is a cuMemAlloc/cuMemFree, with
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync a cuMemAllocAsync/cuMemFreeAsync,
so the step time is mostly the allocator's (drk's pool or the driver's).

    torch_alloc_step.py [--steps 30] [--warmup 5] [--layers 4] [--dim 512] [--batch 8] [--seed 0]

Embedding, --layers transformer blocks, AdamW; each step draws its sequence
length (32..512, a multiple of 32) and tokens from a seeded CPU generator, so
every run sees the same shapes in the same order. --warmup untimed steps, then
--steps steps, each timed between torch.cuda.synchronize() calls. The last line
printed is one JSON object: steps, step_ms_mean, step_ms_median, final_loss and
the allocator settings in effect.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu", "workloads"))
from gpt_model import bench_trainer  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0:
        sys.exit("torch_alloc_step.py: --steps must be >= 1 and --warmup >= 0")
    if not torch.cuda.is_available():
        sys.exit("torch_alloc_step.py: no CUDA device")
    step = bench_trainer(a.dim, a.layers, a.batch, a.seed, a.warmup)
    times, loss = [], None
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    final = loss.item()
    try:
        backend = torch.cuda.get_allocator_backend()
    except (AttributeError, RuntimeError):
        backend = None
    print(json.dumps({
        "steps": a.steps, "warmup": a.warmup, "layers": a.layers, "dim": a.dim, "batch": a.batch, "seed": a.seed,
        "step_ms_mean": statistics.fmean(times), "step_ms_median": statistics.median(times),
        "step_ms_min": min(times), "final_loss": final,
        "allocator_backend": backend,
        "no_caching": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING"),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
    }), flush=True)


if __name__ == "__main__":
    main()
