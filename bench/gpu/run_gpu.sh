#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: checks the prebuilt CUDA kernels against
# the CPU and PyTorch, then times them beside PyTorch fp32 on the same GPU in
# one run. Builds nothing: copy (or mount) the repository with its build/
# folder from the CPU machine, where the CUDA kernels were compiled to PTX.
#
#   bench/gpu/run_gpu.sh [BUILD_DIR]        (default: build)
#
# Needs the NVIDIA driver (libcuda.so.1); PyTorch with CUDA for the
# baselines (skipped, and said so, without it). Writes
# bench/results/gpu-<device>-<date>/{report.md, *.json, *.log, gpu.png}.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
# Halide's CUDA runtime caps kernels at 64 registers per thread unless told;
# the register-blocked matmul wants more (Halide's own cuda_mat_mul app: 256).
export HL_CUDA_JIT_MAX_REGISTERS=${HL_CUDA_JIT_MAX_REGISTERS:-256}
py=${PYTHON:-python3}

name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' /' '__')
[ -n "$name" ] || name=unknown-gpu
out=bench/results/gpu-${name}-$(date +%Y-%m-%d)
mkdir -p "$out"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
status=0
step() { echo "== $*"; }

step "correctness: every op, the CUDA build against double-precision references"
HALFORMER_DEVICE=cuda "$build/tests/halformer_op_tests" --gtest_brief=1 > "$out/ops_cuda.log" 2>&1
rc=$?; tail -3 "$out/ops_cuda.log"; [ $rc -eq 0 ] || status=1
step "correctness: whole models on CUDA against PyTorch goldens and the CPU's tokens"
HALFORMER_DEVICE=cuda "$build/tests/runtime/halformer_runtime_tests" --gtest_brief=1 > "$out/runtime_cuda.log" 2>&1
rc=$?; tail -3 "$out/runtime_cuda.log"; [ $rc -eq 0 ] || status=1

step "timing: halformer CUDA kernels"
"$build/bench/halformer_bench_gpu" --device cuda | tee "$out/halformer_kernels.json"
step "timing: the base model on CUDA (halformer bench)"
"$build/halformer" bench --config base --device cuda --batch 8 --src-len 64 --new-tokens 32 --beam 1 --json \
    | tee "$out/halformer_model.json"
step "timing: PyTorch fp32 (cuBLAS TF32 off, SDPA, eager model)"
if "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  "$py" bench/gpu/torch_gpu.py --batch 8 --src-len 64 --new-tokens 32 | tee "$out/torch.json"
else
  echo "PyTorch with CUDA not found: no baselines" | tee "$out/torch.json"
fi

"$py" bench/gpu/report_gpu.py "$out" --commit "$commit" || status=1
echo "results: $out"
exit $status
