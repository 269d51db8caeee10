#!/usr/bin/env bash
# Configures and builds Halformer into build/ (Release). Extra arguments go
# to CMake's configure step, e.g. -DHALFORMER_EMIT_STMT=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j"$(nproc)"
