#!/usr/bin/env bash
# Builds drk and runs its CPU tests, twice: a normal build and an
# AddressSanitizer+UndefinedBehaviorSanitizer build; then fuzzes the image
# reader for a bounded time (clang's libFuzzer) on the nvcc-built image
# fixtures. What CI runs.
# Usage: scripts/test.sh [--ci]   (--ci: apt-get always, warnings are errors,
#   cuobjdump required, fuzzing 120 s; otherwise 30 s, or DRK_FUZZ_SECONDS)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

if [ "${1:-}" = --ci ]; then
    scripts/setup.sh --always
    werror=ON ci=ON fuzz_seconds=${DRK_FUZZ_SECONDS:-120}
    # The HTML report's render test may not skip in CI for want of a browser.
    export DRK_REQUIRE_CHROMIUM=1
else
    scripts/setup.sh
    werror=OFF ci=OFF fuzz_seconds=${DRK_FUZZ_SECONDS:-30}
fi

cmake -S . -B build -DDRK_WERROR=$werror -DDRK_REQUIRE_CUOBJDUMP=$ci
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure -j "$jobs")

# The sanitizer build leaves out the CUDA programs of the GPU suite and the
# benchmarks (nvcc code; they run on a GPU machine, not here), and builds
# fewer image fixtures (tests/images/CMakeLists.txt).
cmake -S . -B build-sanitize -DDRK_SANITIZE=ON -DDRK_GPU_PROGRAMS=OFF -DDRK_WERROR=$werror -DDRK_REQUIRE_CUOBJDUMP=$ci
cmake --build build-sanitize -j "$jobs"
(cd build-sanitize && ctest --output-on-failure -j "$jobs")

# The fuzzer: a clang configure of its own, only its target built; seeds are
# the committed ones and the normal build's fixtures.
if [ "$ci" = ON ] || command -v clang >/dev/null 2>&1; then
    CC=clang cmake -S . -B build-fuzz -DDRK_FUZZ=ON -DDRK_GPU_PROGRAMS=OFF -DDRK_IMAGE_FIXTURES=OFF \
        -DDRK_WERROR=$werror
    cmake --build build-fuzz -j "$jobs" --target fuzz_image
    tests/fuzz/run.sh build-fuzz "$fuzz_seconds" build/tests/images/fixtures
else
    echo "test: clang not found; the image reader's fuzzer is skipped"
fi
echo "all tests passed (normal and sanitizer builds, fuzzing)"
