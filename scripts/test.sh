#!/usr/bin/env bash
# Builds everything and runs every test (the op suite once per x86 variant).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --test-dir build --output-on-failure
