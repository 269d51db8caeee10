#!/usr/bin/env bash
# Counts what one greedy decoding step of the base model asks of a CUDA
# device — kernel launches, copies to the device and to the host — with no
# GPU: `halformer bench --device cuda` runs on the fake CUDA driver
# (tests/cuda_limits/fake_cuda_driver.cpp), which runs no kernel, counts, and
# reads zeros back (so that decoding goes on). Two runs that differ only in
# the number of new tokens; the difference over the difference in steps is
# one step's count (`halformer bench` decodes three times: a warm-up, greedy
# and beam 1, all greedy steps). With --sample, two more runs in which the
# second call samples (temperature 1, top-k 50, top-p 0.9): a sampled step's
# count is what those add over the greedy runs.
#
#   bench/gpu/count_launches.sh [--sample] [BUILD_DIR] [BATCH] [MODEL_DIR] [SRC_LEN]
#       (default: build, 8, the base model with random weights, 64; a model
#       directory: e.g. tests/fixtures/hf/llama_gqa 16)
set -euo pipefail
cd "$(dirname "$0")/../.."
sample=0
if [ "${1:-}" = "--sample" ]; then sample=1; shift; fi
build=${1:-build}
batch=${2:-8}
model=${3:-}
src_len=${4:-64}
if [ -n "$model" ]; then what=("$model"); label=$(basename "$model"); else what=(--config base); label="base model"; fi
lib="$build/tests/fake_cuda"
[ -f "$lib/libcuda.so.1" ] || { echo "count_launches: $lib/libcuda.so.1 missing (build the tests)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
runs=(1 9)
[ "$sample" = 1 ] && runs+=(s1 s9)
for run in "${runs[@]}"; do
  n=${run#s}
  flags=()
  [ "$run" != "$n" ] && flags=(--sample)
  LD_LIBRARY_PATH="$lib" HALFORMER_FAKE_CUDA_ZERO_READS=1 HALFORMER_FAKE_CUDA_PTXAS=none \
    HALFORMER_FAKE_CUDA_REPORT="$tmp/$run.txt" "$build/halformer" bench "${what[@]}" --device cuda \
    --batch "$batch" --src-len "$src_len" --new-tokens "$n" --beam 1 --iters 1 "${flags[@]}" --json > "$tmp/$run.log" 2>&1 ||
    { cat "$tmp/$run.log" >&2; exit 1; }
done
python3 - "$tmp" "$batch" "$label" "$sample" <<'PY'
import sys
d, batch, label, sample = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
def read(n):
    r = {}
    for line in open(f"{d}/{n}.txt"):
        f = line.split()
        if f and f[0] in ("launches", "to_device", "to_host", "allocs", "frees"):
            r[f[0]] = [int(x) for x in f[1:]]
    return r
def per_step(a, b, k, i=0):
    return (b[k][i] - a[k][i]) / (8 * 3)  # 8 more tokens, in each of bench's 3 generate calls
def report(kind, step):
    print(f"{label}, batch {batch}, one {kind} step: {step('launches'):.0f} kernel launches, "
          f"{step('to_device'):.0f} copies to the device ({step('to_device', 1):.0f} bytes), "
          f"{step('to_host'):.0f} copies to the host ({step('to_host', 1):.0f} bytes), "
          f"{step('allocs'):.0f} device allocations and {step('frees'):.0f} frees")
g1, g9 = read(1), read(9)
greedy = lambda k, i=0: per_step(g1, g9, k, i)
report("greedy", greedy)
if sample:
    # The sampled runs' second call samples; their other two are greedy.
    s1, s9 = read("s1"), read("s9")
    report("sampled", lambda k, i=0: 3 * per_step(s1, s9, k, i) - 2 * greedy(k, i))
PY
