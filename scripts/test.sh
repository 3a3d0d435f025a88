#!/usr/bin/env bash
# Builds drk and runs its CPU tests, twice: a normal build and an
# AddressSanitizer+UndefinedBehaviorSanitizer build. What CI runs.
# Usage: scripts/test.sh [--ci]   (--ci: apt-get always, warnings are errors)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

if [ "${1:-}" = --ci ]; then
    scripts/setup.sh --always
    werror=ON
else
    scripts/setup.sh
    werror=OFF
fi

cmake -S . -B build -DDRK_WERROR=$werror
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure -j "$jobs")

# The sanitizer build leaves out the CUDA programs of the GPU suite and the
# benchmarks (nvcc code; they run on a GPU machine, not here).
cmake -S . -B build-sanitize -DDRK_SANITIZE=ON -DDRK_GPU_PROGRAMS=OFF -DDRK_WERROR=$werror
cmake --build build-sanitize -j "$jobs"
(cd build-sanitize && ctest --output-on-failure -j "$jobs")
echo "all tests passed (normal and sanitizer builds)"
