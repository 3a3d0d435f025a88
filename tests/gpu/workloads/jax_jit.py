"""A jitted JAX function called N times, chaining its state: an integer
hash step (uint32, wrapping) and a running sum, both checked exactly against
NumPy doing the same on the host, so a dropped or repeated launch shows.
XLA resolves cuLaunchKernel with dlsym on its libcuda handle and uses many
streams; its kernel names are XLA's own, so the program claims no
per-kernel counts (drk is held against CUPTI instead).

    jax_jit.py [--n N]
"""
import argparse
import hashlib
import os
import sys

# Take GPU memory as needed rather than 75% of it up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drk_workload import die, write_counts  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

SIZE = (1 << 18) + 5
MUL, ADD, SHIFT = 1664525, 1013904223, 13


@jax.jit
def step(state, acc):
    state = state * jnp.uint32(MUL) + jnp.uint32(ADD)
    state = state ^ (state >> jnp.uint32(SHIFT))
    return state, acc + jnp.sum(state, dtype=jnp.uint32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    dev = jax.devices()[0]
    if dev.platform != "gpu":
        die("jax_jit", f"JAX runs on {dev.platform}, not on a GPU")
    init = np.arange(SIZE, dtype=np.uint32) * np.uint32(2654435761)
    state = jax.device_put(init, dev)
    acc = jax.device_put(np.uint32(0), dev)
    for _ in range(args.n):
        state, acc = step(state, acc)
    state = np.asarray(jax.block_until_ready(state))
    acc = int(acc)

    s, a = init.copy(), np.uint32(0)
    with np.errstate(over="ignore"):
        for _ in range(args.n):
            s = s * np.uint32(MUL) + np.uint32(ADD)
            s = s ^ (s >> np.uint32(SHIFT))
            a = np.uint32(a + s.sum(dtype=np.uint32))
    if not np.array_equal(state, s):
        i = int(np.nonzero(state != s)[0][0])
        die("jax_jit", f"state[{i}] = {state[i]}, expected {s[i]}")
    if acc != int(a):
        die("jax_jit", f"acc = {acc:#x}, expected {int(a):#x}")
    print(f"jax_jit size {SIZE} calls {args.n}")
    print(f"acc {acc:#010x}")
    print(f"sha256 {hashlib.sha256(state.tobytes()).hexdigest()}")
    write_counts("jax_jit", calls=args.n)


if __name__ == "__main__":
    main()
