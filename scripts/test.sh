#!/usr/bin/env bash
# Builds everything and runs every test (the op suite once per x86 variant).
# The autoscheduled builds are made for this machine's variant and for the
# avx2 and sse41 targets as well, so ops.avx2 and ops.sse41 test what an
# AVX2-only or an SSE4.1 host builds, whatever CPU runs this (docs/targets.md,
# "Every host"). Adams2019 searches greedily here (one pass at width 1,
# seconds a kernel instead of minutes): the tests check its kernels are
# right at every shape, not how fast they are; the benchmarks want
# scripts/build.sh's default, -DHALFORMER_ADAMS2019_SEARCH=beam.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh "-DHALFORMER_AUTOSCHEDULE_TARGET=host;x86-64-linux-avx-avx2-f16c-fma-sse41;x86-64-linux-sse41" \
  -DHALFORMER_ADAMS2019_SEARCH=greedy
ctest --test-dir build --output-on-failure -j"$(nproc)"
