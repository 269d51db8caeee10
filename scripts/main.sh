#!/usr/bin/env bash
# The main job: build, then translate a batch with the paper's base model.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
./build/halformer demo "$@"
