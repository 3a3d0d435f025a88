#!/usr/bin/env bash
# Installs what building and testing drk needs (Debian/Ubuntu packages), and
# checks for the CUDA toolkit's headers, which drk compiles against.
# Usage: scripts/setup.sh [--always]
#   --always  run apt-get even when everything seems present (what CI does)
set -euo pipefail

packages=(build-essential cmake lld python3 binutils)
missing=()
for tool in cc make cmake ld.lld python3 nm readelf; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done

if [ "${1:-}" = --always ] || [ ${#missing[@]} -gt 0 ]; then
    [ ${#missing[@]} -gt 0 ] && echo "setup: missing ${missing[*]}; installing ${packages[*]}"
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends "${packages[@]}"
fi

# cuda.h comes with the CUDA toolkit, which is not a Debian package here.
if ! command -v nvcc >/dev/null 2>&1 && [ ! -f /usr/local/cuda/include/cuda.h ] && [ -z "${CUDAToolkit_ROOT:-}" ]; then
    echo "setup: the CUDA toolkit (nvcc, cuda.h) was not found: install it, or set CUDAToolkit_ROOT" >&2
    exit 1
fi
