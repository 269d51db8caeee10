#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, in one short pass (about 6 minutes at
# most: each step has its own time limit): every op and the runtime on CUDA
# against their references, the CUDA kernels timed beside PyTorch fp32 on the
# same GPU, and a report against PyTorch and the machine's limits. Builds
# nothing: copy the repository with its build/ folder from the CPU machine
# (the CUDA kernels are PTX inside the binaries; bench/gpu/METHOD.md).
#
#   bench/gpu/run_gpu.sh [BUILD_DIR]        (default: build)
#
# Needs the NVIDIA driver (libcuda.so.1); PyTorch with CUDA for the
# baselines (skipped, and said so, without it). Writes
# bench/results/gpu-<device>-<date>/{report.md, *.json, *.log, gpu.png}.
# FMA_TFLOPS: the GPU's fp32 peak without tensor cores (default 67, an H100 SXM).
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
start=$SECONDS
# step LIMIT_S LOG COMMAND...: runs with a time limit, the log kept, its tail shown.
step() {
  local limit=$1 log=$2
  shift 2
  echo "== [$((SECONDS - start)) s] $log: $*"
  timeout --signal=TERM "$limit" "$@" > "$out/$log" 2>&1
  local rc=$?
  tail -3 "$out/$log"
  [ $rc -eq 124 ] && echo "   (stopped at its limit of $limit s)"
  return $rc
}

# Correctness: every op's CUDA build against the double-precision references;
# the whole runtime (models against PyTorch goldens, decoding, training) on CUDA.
HALFORMER_DEVICE=cuda step 120 ops_cuda.log "$build/tests/halformer_op_tests" --gtest_brief=1 || status=1
HALFORMER_DEVICE=cuda step 120 runtime_cuda.log "$build/tests/runtime/halformer_runtime_tests" --gtest_brief=1 || status=1
# Timing: the kernels (small shapes checked whole against the CPU build, the
# timed ones on samples), then the base model.
step 150 halformer_kernels.json "$build/bench/halformer_bench_gpu" --device cuda --iters 10 --repeats 5 || status=1
step 45 halformer_model.json "$build/halformer" bench --config base --device cuda --batch 8 --src-len 64 \
    --new-tokens 32 --beam 1 --json || status=1
if "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  step 90 torch.json "$py" bench/gpu/torch_gpu.py --iters 10 --repeats 5 --batch 8 --src-len 64 --new-tokens 32 || status=1
else
  echo "PyTorch with CUDA not found: no baselines" | tee "$out/torch.json"
fi

"$py" bench/gpu/report_gpu.py "$out" --commit "$commit" --fma-tflops "${FMA_TFLOPS:-67}" || status=1
echo "results: $out ($((SECONDS - start)) s)"
exit $status
