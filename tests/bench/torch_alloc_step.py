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
import torch.nn as nn
import torch.nn.functional as F

VOCAB, MAX_LEN, HEADS = 4096, 512, 8


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, d // HEADS).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, dim, layers):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, dim), nn.Embedding(MAX_LEN, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, VOCAB, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


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
    dev = torch.device("cuda")
    torch.manual_seed(a.seed)
    model = GPT(a.dim, a.layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator(device="cpu").manual_seed(a.seed + 1)

    def step():
        t = 32 * int(torch.randint(1, MAX_LEN // 32 + 1, (1,), generator=gen))
        idx = torch.randint(0, VOCAB, (a.batch, t + 1), generator=gen).to(dev)
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
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
