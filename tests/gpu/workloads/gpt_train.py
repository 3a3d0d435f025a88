"""A GPT-style training loop in PyTorch with a sequence length that varies
from step to step: the allocation pattern that fragments a caching pool.
Run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 every tensor reaches the driver
(cuMemAlloc/cuMemFree); with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,
cuMemAllocAsync/cuMemFreeAsync. Under drk with DRK_ALLOC_TRACE set, that is
an allocation trace of a real training run.

    gpt_train.py [--steps K] [--layers L] [--dim D] [--seed S]

Prints the loss every 10 steps and at the end as float.hex(); deterministic
for a given seed (fixed seeds, deterministic algorithms).
"""
import argparse
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, dim, layers, heads, max_len):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpt_train.py: no CUDA device")
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    vocab, max_len, batch = 4096, 512, 8
    dev = torch.device("cuda")
    model = GPT(vocab, a.dim, a.layers, 8, max_len).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator(device="cpu").manual_seed(a.seed + 1)
    loss = None
    for step in range(a.steps):
        # Lengths from 32 to 512 in steps of 32, drawn anew each step.
        t = 32 * int(torch.randint(1, max_len // 32 + 1, (1,), generator=gen))
        idx = torch.randint(0, vocab, (batch, t + 1), generator=gen).to(dev)
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} seq {t} loss {loss.item().hex()}")
    torch.cuda.synchronize()
    print(f"final loss {loss.item().hex()}")


if __name__ == "__main__":
    main()
