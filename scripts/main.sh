#!/usr/bin/env bash
# The main job: English → German with the translator Halformer trained
# (models/en-de). Builds only what it needs (the runtime, the CLI, and for
# this CPU's variant the float32 encoder-decoder kernels the translator
# runs, cmake/translator_kernels.txt: no tests, benchmarks, training, ARM,
# GPU, autoscheduled, rotary, bf16/int8 or sampling kernels;
# ./scripts/test.sh builds those), then translates a few sentences and UI
# strings.
#
#   ./scripts/main.sh                    # the built-in examples
#   ./scripts/main.sh "Save the file"    # your own text
#   echo "Open a new window" | ./build-main/halformer translate models/en-de
#                                        # (./build/halformer after ./scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
elapsed() { echo "$SECONDS"; }

./scripts/install-deps.sh --runtime

# Where ./scripts/test.sh has already built everything (build/, as in CI,
# which runs it first), the main job uses that build: its halformer target
# is up to date and holds every variant. Otherwise (a fresh clone) it builds
# only this CPU's kernel variant into build-main/: HALFORMER_X86_TARGETS=host
# is the first of the four x86 variants whose features Halide's own CPU
# detection (get_host_target, the rules the kernels' wrappers use) finds here.
# HALFORMER_MAIN_BUILD=build-main forces the small build.
dir=${HALFORMER_MAIN_BUILD:-}
if [ -z "$dir" ]; then
  if [ -f build/CMakeCache.txt ] && [ -x build/halformer ]; then dir=build; else dir=build-main; fi
fi
case "$dir" in
  build|build-main) ;;
  *) echo "main: HALFORMER_MAIN_BUILD is '$dir'; it may be build or build-main" >&2; exit 2 ;;
esac
mkdir -p "$dir"
log=$dir/main-build.log
if [ "$dir" = build-main ]; then
  echo "main: building the runtime and inference kernels for this CPU's variant"
  # A unity build (CMake's, batches of 16 files): the C++ of the runtime, server and CLI
  # compiles in 48 s instead of 132 on 2 cores, most of that time each file's
  # copy of the same headers (CLI11's alone takes 3 s a file at -O1). With
  # CMAKE_OPTIMIZE_DEPENDENCIES the server compiles beside the runtime.
  cmake -S . -B build-main -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
    -DCMAKE_OPTIMIZE_DEPENDENCIES=ON \
    -DHALFORMER_TESTS=OFF -DHALFORMER_BENCH=OFF \
    -DHALFORMER_TRAINING=OFF -DHALFORMER_GPU=OFF -DHALFORMER_ARM=OFF -DHALFORMER_AUTOSCHEDULED=OFF \
    -DHALFORMER_X86_TARGETS=host -DHALFORMER_KERNEL_SET=cmake/translator_kernels.txt > "$log" 2>&1 \
    || { cat "$log"; exit 1; }
  grep -o "hand-scheduled kernels for .*\|[0-9]* kernels compiled .*" "$log" | sed "s/^/main: /" || true
else
  echo "main: using $dir/ (the test command's build), bringing its halformer target up to date"
  : > "$log"
fi
cmake --build "$dir" --target halformer -j"$(nproc)" >> "$log" 2>&1 || { tail -50 "$log"; exit 1; }
echo "main: built in $(elapsed) s (log: $log)"

model=models/en-de
[ -f "$model/model.safetensors" ] || { echo "main: $model/model.safetensors is missing" >&2; exit 1; }
if [ $# -gt 0 ]; then
  inputs=("$@")
else
  inputs=(
    "Open the file"
    "The file could not be saved."
    "Do you want to save the changes to this document?"
    "Show hidden files"
    "Print the current page"
    "The connection to the server was lost."
    "Delete the selected items permanently?"
    "Search for files and folders"
    "No such file or directory"
    "Copy the link address"
  )
fi
src=$(mktemp) out=$(mktemp)
trap 'rm -f "$src" "$out"' EXIT
printf '%s\n' "${inputs[@]}" > "$src"
echo "main: translating ${#inputs[@]} lines with $model (beam 4)"
status=0
"./$dir/halformer" translate "$model" --beam 4 < "$src" > "$out" || status=$?
# Every input line has its output line, unless translate could not start.
[ "$(wc -l < "$out")" -eq "$(wc -l < "$src")" ] || exit $(( status ? status : 1 ))
while IFS= read -r en <&3 && IFS= read -r de <&4; do
  printf '  %s\n    → %s\n' "$en" "$de"
done 3< "$src" 4< "$out"
echo "main: first translation $(elapsed) s after the start"
exit "$status"
