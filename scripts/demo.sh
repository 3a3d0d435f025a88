#!/usr/bin/env bash
# drk's demo: installs what it needs, builds, runs a small PPO-style trainer
# under drk and prints drk's report of it. On a machine without a usable GPU
# it says so and runs drk against its CPU stand-in driver instead.
# Usage: scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

scripts/setup.sh
# A build directory made before keeps its own build type (a developer's
# RelWithDebInfo for callgrind's line tables); a new one is Release.
if [ -f build/CMakeCache.txt ]; then
    cmake -S . -B build >/dev/null
else
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build build -j "$jobs" >/dev/null
drk=build/bin/drk
out=$(mktemp -d "${TMPDIR:-/tmp}/drk-demo.XXXXXX")

have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }
have_torch() { python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; }

if have_gpu && have_torch; then
    echo "== GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
    echo "== running a PPO-style PyTorch trainer (100 steps) under drk"
    "$drk" run --report "$out/" -- python3 tests/gpu/workloads/ppo.py --steps 100
elif have_gpu && [ -x build/tests/gpu/drv_vecadd ]; then
    echo "== GPU found, but no PyTorch with CUDA: running the driver-API vector add under drk instead"
    "$drk" run --report "$out/" -- build/tests/gpu/drv_vecadd
else
    cat <<'MSG'
== No usable GPU on this machine.
== What follows is drk against its CPU stand-in driver (tests/fakecuda: a test
== fixture whose "kernels" are host functions), running a program that reaches
== the driver the way cudart does. The report is real drk output, but the
== kernels, launches and memory are the stand-in's, not a GPU's.
MSG
    # ROUTE_POOL, ROUTE_HOST_POOL, ROUTE_DRK: the program's check of the
    # stand-in's call counts knows drk's pools serve its memory calls and
    # drk retains primary contexts of its own.
    DRK_CUDA_LIBRARY="$PWD/build/tests/fakecuda/libcuda.so.1" LD_LIBRARY_PATH=build/tests/fakecuda \
        ROUTE_POOL=1 ROUTE_HOST_POOL=1 ROUTE_DRK=1 \
        "$drk" run --report "$out/" -- build/tests/routes/route_procaddr 3
fi
echo
echo "== drk report $out"
"$drk" report "$out"
