#!/usr/bin/env bash
# Installs what building and testing drk needs (Debian/Ubuntu packages, and
# cuobjdump from PyPI for the image cross-check), and checks for the CUDA
# toolkit's headers, which drk compiles against.
# Usage: scripts/setup.sh [--always]
#   --always  run apt-get even when everything seems present (what CI does)
set -euo pipefail

# libelf, liblz4, libzstd: the image reader's (headers to build, libraries
# opened at run time); clang and its runtime: the fuzzer (tests/fuzz);
# valgrind: the launch path's instruction count; chromium: rendering
# `drk report --html` in a real browser (tests/tools/html_test.py).
packages=(build-essential cmake lld python3 python3-pip binutils libelf-dev liblz4-dev libzstd-dev clang libjemalloc-dev
          libclang-rt-14-dev valgrind chromium)
missing=()
for tool in cc make cmake ld.lld python3 nm readelf clang valgrind chromium; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
for header in /usr/include/libelf.h /usr/include/lz4.h /usr/include/zstd.h /usr/include/jemalloc/jemalloc.h; do
    [ -f "$header" ] || missing+=("$header")
done

if [ "${1:-}" = --always ] || [ ${#missing[@]} -gt 0 ]; then
    [ ${#missing[@]} -gt 0 ] && echo "setup: missing ${missing[*]}; installing ${packages[*]}"
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends "${packages[@]}"
fi

# cuobjdump, the ground truth of tests/images (not in every toolkit install):
# NVIDIA's PyPI package puts it in site-packages/nvidia/cu13/bin.
if [ "${1:-}" = --always ] || ! python3 -c "import importlib.metadata as m; m.version('nvidia-cuda-cuobjdump')" 2>/dev/null; then
    pip=(python3 -m pip install --quiet --disable-pip-version-check "nvidia-cuda-cuobjdump>=13,<14")
    # A Debian-managed python3 refuses plain installs (PEP 668).
    if ! "${pip[@]}" 2>/dev/null && ! "${pip[@]}" --break-system-packages; then
        [ "${1:-}" = --always ] && exit 1
        echo "setup: could not install nvidia-cuda-cuobjdump; the cuobjdump cross-check will be skipped" >&2
    fi
fi

# cuda.h comes with the CUDA toolkit, which is not a Debian package here.
if ! command -v nvcc >/dev/null 2>&1 && [ ! -f /usr/local/cuda/include/cuda.h ] && [ -z "${CUDAToolkit_ROOT:-}" ]; then
    echo "setup: the CUDA toolkit (nvcc, cuda.h) was not found: install it, or set CUDAToolkit_ROOT" >&2
    exit 1
fi
