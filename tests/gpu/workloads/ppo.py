"""A PPO-style trainer in PyTorch: policy and value MLPs, one Adam, K steps of
a clipped-surrogate + value + entropy loss on synthetic rollouts generated on
the GPU. Deterministic (fixed seeds, torch.use_deterministic_algorithms), so
its output is compared byte for byte between a native run and runs under drk.

    ppo.py [--steps K] [--bench] [--warmup W]

Prints the losses every 10 steps and at the end as float.hex(), and a sha256
of all final parameters. --bench: W untimed warm-up steps first, then K steps
each timed between torch.cuda.synchronize() calls; the last line printed is
{"steps", "step_ms_median", "step_ms_mean", "step_ms_min"} as JSON.
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import time

# cuBLAS needs this before CUDA is initialized to be deterministic.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drk_workload import die, write_counts  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

OBS, ACT, HID = 64, 16, 256
BATCH, MINI, EPOCHS = 4096, 1024, 2
CLIP, ENT_COEF, VF_COEF, MAX_GRAD = 0.2, 0.01, 0.5, 0.5


def mlp(n_in, n_out):
    return torch.nn.Sequential(
        torch.nn.Linear(n_in, HID), torch.nn.Tanh(),
        torch.nn.Linear(HID, HID), torch.nn.Tanh(),
        torch.nn.Linear(HID, n_out))


class Trainer:
    def __init__(self, dev):
        torch.manual_seed(1234)  # initial weights, drawn on the CPU
        self.policy = mlp(OBS, ACT).to(dev)
        self.value = mlp(OBS, 1).to(dev)
        self.params = list(self.policy.parameters()) + list(self.value.parameters())
        self.opt = torch.optim.Adam(self.params, lr=3e-4)
        self.gen = torch.Generator(device=dev)
        self.gen.manual_seed(4321)  # rollouts, drawn on the GPU
        self.actions = torch.arange(ACT, device=dev)
        self.dev = dev

    @torch.no_grad()
    def rollout(self):
        g, dev = self.gen, self.dev
        obs = torch.randn(BATCH, OBS, generator=g, device=dev)
        logits = self.policy(obs)
        # Gumbel-max sampling: elementwise ops and an argmax, all deterministic.
        u = torch.rand(BATCH, ACT, generator=g, device=dev)
        act = torch.argmax(logits - torch.log(-torch.log(u * 0.999998 + 1e-6)), dim=-1)
        onehot = (act.unsqueeze(-1) == self.actions).float()  # no scatter: deterministic
        old_logp = (F.log_softmax(logits, dim=-1) * onehot).sum(-1)
        reward = (obs[:, :ACT] * onehot).sum(-1) + 0.1 * torch.randn(BATCH, generator=g, device=dev)
        ret = reward
        adv = ret - self.value(obs).squeeze(-1)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        return obs, onehot, old_logp, adv, ret

    def update(self, obs, onehot, old_logp, adv, ret):
        for _ in range(EPOCHS):
            for s in range(0, BATCH, MINI):
                sl = slice(s, s + MINI)
                logp_all = F.log_softmax(self.policy(obs[sl]), dim=-1)
                logp = (logp_all * onehot[sl]).sum(-1)
                ratio = torch.exp(logp - old_logp[sl])
                surr = torch.min(ratio * adv[sl], torch.clamp(ratio, 1 - CLIP, 1 + CLIP) * adv[sl])
                policy_loss = -surr.mean()
                entropy = -(torch.exp(logp_all) * logp_all).sum(-1).mean()
                value_loss = ((self.value(obs[sl]).squeeze(-1) - ret[sl]) ** 2).mean()
                loss = policy_loss - ENT_COEF * entropy + VF_COEF * value_loss
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.params, MAX_GRAD)
                self.opt.step()
        return policy_loss.detach(), value_loss.detach()

    def step(self):
        return self.update(*self.rollout())

    def params_sha256(self):
        flat = torch.cat([p.detach().reshape(-1) for p in self.params]).cpu()
        return hashlib.sha256(flat.numpy().tobytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    if args.steps < 1:
        die("ppo", "--steps must be at least 1")
    if not torch.cuda.is_available():
        die("ppo", "CUDA is not available to PyTorch")
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    t = Trainer(torch.device("cuda"))
    times = []
    if args.bench:
        for _ in range(args.warmup):
            t.step()
    for k in range(1, args.steps + 1):
        if args.bench:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            pl, vl = t.step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        else:
            pl, vl = t.step()
        if k % 10 == 0 or k == args.steps:
            print(f"step {k} policy_loss {pl.item().hex()} value_loss {vl.item().hex()}")
    torch.cuda.synchronize()  # surfaces any asynchronous CUDA error here

    print(f"ppo steps {args.steps} warmup {args.warmup if args.bench else 0}")
    print(f"final policy_loss {pl.item().hex()}")
    print(f"final value_loss {vl.item().hex()}")
    print(f"params_sha256 {t.params_sha256()}")
    steps_total = args.steps + (args.warmup if args.bench else 0)
    write_counts("ppo", steps=steps_total, optimizer_steps=steps_total * EPOCHS * (BATCH // MINI))
    if args.bench:
        print(json.dumps({
            "steps": len(times),
            "step_ms_median": statistics.median(times),
            "step_ms_mean": statistics.fmean(times),
            "step_ms_min": min(times),
        }), flush=True)


if __name__ == "__main__":
    main()
