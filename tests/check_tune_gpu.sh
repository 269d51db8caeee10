#!/usr/bin/env bash
# `halformer tune --target cuda` without a GPU: on the fake CUDA driver
# (tests/cuda_limits/fake_cuda_driver.cpp: it checks every launch against a
# real device's limits and runs nothing), --launch-only compiles every
# candidate of the GPU tasks' spaces with libHalide's JIT for CUDA, uploads
# its inputs and launches it at every shape of its task. None may be refused.
# And --target opencl on PoCL is refused with its reason (PoCL's LLVM and
# libHalide's crash in one process).
set -euo pipefail
hf=$1 fake=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

# Halide's JIT opens libcuda.so, the runtime libcuda.so.1: both the fake.
ln -s "$fake/libcuda.so.1" "$tmp/libcuda.so"
ln -s "$fake/libcuda.so.1" "$tmp/libcuda.so.1"
LD_LIBRARY_PATH="$tmp" HALFORMER_FAKE_CUDA_PTXAS=none HALFORMER_FAKE_CUDA_REPORT="$tmp/report" \
    "$hf" tune --target cuda --launch-only --ops attention,linear/decode,layer_norm,log_softmax \
    > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/out" "$tmp/err"; fail "a GPU candidate failed to launch"; }
grep -q 'launch-only: [0-9]* candidates of 5 tasks compiled for .*cuda.* 0 failed' "$tmp/out" \
    || { cat "$tmp/out"; fail "the launch-only summary"; }
n=$(sed -n 's/^launch-only: \([0-9]*\) candidates.*/\1/p' "$tmp/out")
[ "$n" -ge 25 ] || fail "only $n GPU candidates launched"
grep -q '^launches [1-9]' "$tmp/report" || { cat "$tmp/report"; fail "the fake driver saw no launch"; }
grep -q '^refused 0' "$tmp/report" || { cat "$tmp/report"; fail "the fake driver refused a launch"; }
# Their inputs reached the device (a GPU candidate reading device memory
# never written was the tuner's first GPU bug).
up=$(sed -n 's/^to_device [0-9]* \([0-9]*\).*/\1/p' "$tmp/report")
[ "${up:-0}" -gt 1000000 ] || { cat "$tmp/report"; fail "the candidates' inputs were not copied to the device"; }
echo "check_tune_gpu: $n GPU candidates launched on the fake driver, none refused"

if "$hf" info 2>&1 | grep -q '^device opencl: OpenCL: Portable Computing Language'; then
    expect_error "this OpenCL is PoCL" "$hf" tune --target opencl --ops attention/decode --budget 5s \
        --out "$tmp/rec" --work "$tmp/work"
fi
