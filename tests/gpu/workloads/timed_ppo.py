"""The suite's PPO trainer (ppo.py) for GPU-time checks: K steps, each ended
by cudaProfilerStop or an NVTX range (drk ends a round there), optionally under PyTorch's own
profiler, whose per-kernel device times are the independent measurement drk's
are held against.

    timed_ppo.py [--steps K] [--profile OUT.json] [--nvtx]

Prints the final losses as float.hex() (so runs can be compared bit for bit)
and, with --profile, writes {"kernels": {name: {"count", "total_ns"}}} of
every CUDA kernel torch.profiler saw, names demangled as PyTorch gives them.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ppo  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch initializes CUDA)
from drk_workload import die  # noqa: E402

import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--profile", help="run under torch.profiler and write its kernel times here")
    ap.add_argument("--nvtx", action="store_true", help="each step an NVTX range named 'round' instead")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        die("timed_ppo", "CUDA is not available to PyTorch")
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cudart = torch.cuda.cudart()

    prof = None
    if a.profile:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
        prof.__enter__()
    t = ppo.Trainer(torch.device("cuda"))
    for _ in range(a.steps):
        if a.nvtx:
            torch.cuda.nvtx.range_push("round")
        pl, vl = t.step()
        torch.cuda.synchronize()
        if a.nvtx:
            torch.cuda.nvtx.range_pop()  # a round's end, for drk
        else:
            cudart.cudaProfilerStop()
    torch.cuda.synchronize()
    print(f"final policy_loss {pl.item().hex()}")
    print(f"final value_loss {vl.item().hex()}")
    if prof is not None:
        prof.__exit__(None, None, None)
        # The trace's kernel events: the device's own start and duration (us).
        trace = a.profile + ".trace.json"
        prof.export_chrome_trace(trace)
        kernels = {}
        for e in json.load(open(trace)).get("traceEvents", []):
            if e.get("cat") != "kernel":
                continue
            k = kernels.setdefault(e["name"], {"count": 0, "total_ns": 0})
            k["count"] += 1
            k["total_ns"] += int(round(float(e.get("dur", 0)) * 1000))
        with open(a.profile, "w") as f:
            json.dump({"kernels": kernels}, f)
        print(f"profiled {sum(k['count'] for k in kernels.values())} kernel events of {len(kernels)} kernels")


if __name__ == "__main__":
    main()
