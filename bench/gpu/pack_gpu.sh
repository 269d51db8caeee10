#!/usr/bin/env bash
# Packs what bench/gpu/run_gpu.sh runs on a GPU machine into one archive
# (xz: about a fifth of the binaries' size), so that a machine with no
# build tools runs it: the op and runtime test suites, halformer_bench_gpu,
# the halformer command, and the shared libraries they load other than the C
# library's (the GPU machine's glibc must be 2.36 or newer: Debian 12's).
#
#   bench/gpu/pack_gpu.sh [BUILD_DIR] [ARCHIVE]   (default: build, build/gpu-pack.tar.xz)
#
# On the GPU machine, in the repository root (bench/gpu/METHOD.md):
#   tar xJf build/gpu-pack.tar.xz && LD_LIBRARY_PATH=$PWD/build/gpu-libs bench/gpu/run_gpu.sh build
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
archive=${2:-$build/gpu-pack.tar.xz}
bins=("$build/tests/halformer_op_tests" "$build/tests/runtime/halformer_runtime_tests"
      "$build/bench/halformer_bench_gpu" "$build/halformer")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "pack_gpu: $b is missing: build first (scripts/build.sh)" >&2; exit 1; }
done
libs="$build/gpu-libs"
rm -rf "$libs"
mkdir -p "$libs"
for b in "${bins[@]}"; do
  ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;  # the C library's own
    *) cp -L "$lib" "$libs/" ;;
  esac
done
tar cJf "$archive" "${bins[@]}" "$libs"
echo "pack_gpu: $archive ($(du -h "$archive" | cut -f1)): ${#bins[@]} programs, $(ls "$libs" | wc -l) libraries"
