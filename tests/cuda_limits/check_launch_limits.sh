#!/usr/bin/env bash
# ctest's ops.cuda_limits: the op suite's CUDA builds launched on the fake
# CUDA driver (fake_cuda_driver.cpp), which checks every launch against a
# real device's limits (threads, block and grid dimensions, shared memory,
# registers from ptxas where it is installed) and runs nothing; the suite
# computes its values on the CPU meanwhile (tests/kernels.h,
# cuda_launch_check), so any failure is a launch a GPU would refuse, or the
# suite's own. Fails, too, when fewer kernels than expected were launched
# (the fake driver was not the one loaded, or the suite ran nothing).
#
#   check_launch_limits.sh FAKE_DRIVER_DIR OP_TESTS CACHE_DIR MIN_KERNELS [gtest args...]
set -uo pipefail
dir=$1 tests=$2 cache=$3 min=$4
shift 4
report=$(mktemp)
trap 'rm -f "$report"' EXIT
LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HALFORMER_DEVICE=cuda HALFORMER_CUDA_LAUNCH_CHECK=1 \
  HALFORMER_FAKE_CUDA_CACHE="$cache" HALFORMER_FAKE_CUDA_REPORT="$report" "$tests" --gtest_brief=1 "$@"
rc=$?
kernels=$(awk '$1 == "kernels" {print $2}' "$report" 2>/dev/null)
refused=$(awk '$1 == "refused" {print $2}' "$report" 2>/dev/null)
regs=$(awk '$1 == "registers" {print $2}' "$report" 2>/dev/null)
echo "launch check: ${kernels:-no} CUDA kernels launched, ${refused:-?} launches refused, registers ${regs:-?}"
if [ -z "$kernels" ] || [ "$kernels" -lt "$min" ]; then
  echo "launch check: expected at least $min kernels launched on the fake driver" >&2
  exit 1
fi
[ "${refused:-1}" -eq 0 ] || rc=1
exit $rc
