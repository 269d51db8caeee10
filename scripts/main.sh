#!/usr/bin/env bash
# The main job: build, then run every kernel at Transformer-base shapes.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
./build/bench/halformer_kernel_report
