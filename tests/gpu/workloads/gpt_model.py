"""The small GPT-style model and training step that the GPU suite's trainer
(gpt_train.py) and the allocation benchmarks (tests/bench/torch_alloc_step.py,
torch_ab.py) share: token and position embeddings, transformer blocks, AdamW, and a
sequence length drawn anew every step (32 to 512, in steps of 32) from a
seeded CPU generator -- the allocation pattern that fragments a caching pool.
Importing it sets nothing in the environment."""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, MAX_LEN, HEADS = 4096, 512, 8


class Block(nn.Module):
    def __init__(self, dim, heads=HEADS):
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


def train_step(model, opt, gen, batch, dev):
    """One step on fresh tokens of a freshly drawn length: (loss, length)."""
    t = 32 * int(torch.randint(1, MAX_LEN // 32 + 1, (1,), generator=gen))
    idx = torch.randint(0, VOCAB, (batch, t + 1), generator=gen).to(dev)
    logits = model(idx[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), idx[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss, t


def bench_trainer(dim, layers, batch, seed, warmup):
    """The benchmarks' trainer on the GPU (seeded model, AdamW, token
    generator), after `warmup` untimed steps: a function of no arguments
    that runs one step and returns its loss. Its `reseed(n)` restarts the
    token generator at stream n, so two phases can draw the same lengths."""
    dev = torch.device("cuda")
    torch.manual_seed(seed)
    model = GPT(dim, layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)

    def step():
        return train_step(model, opt, gen, batch, dev)[0]

    step.reseed = lambda n: gen.manual_seed(seed + 1 + 7919 * (n + 1))

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    return step
