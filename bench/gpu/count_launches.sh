#!/usr/bin/env bash
# Counts what one greedy decoding step of the base model asks of a CUDA
# device — kernel launches, copies to the device and to the host — with no
# GPU: `halformer bench --device cuda` runs on the fake CUDA driver
# (tests/cuda_limits/fake_cuda_driver.cpp), which runs no kernel, counts, and
# reads zeros back (so that decoding goes on). Two runs that differ only in
# the number of new tokens; the difference over the difference in steps is
# one step's count (`halformer bench` decodes three times: a warm-up, greedy
# and beam 1, all greedy steps).
#
#   bench/gpu/count_launches.sh [BUILD_DIR] [BATCH] [MODEL_DIR] [SRC_LEN]
#       (default: build, 8, the base model with random weights, 64; a model
#       directory: e.g. tests/fixtures/hf/llama_gqa 16)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
batch=${2:-8}
model=${3:-}
src_len=${4:-64}
if [ -n "$model" ]; then what=("$model"); label=$(basename "$model"); else what=(--config base); label="base model"; fi
lib="$build/tests/fake_cuda"
[ -f "$lib/libcuda.so.1" ] || { echo "count_launches: $lib/libcuda.so.1 missing (build the tests)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 1 9; do
  LD_LIBRARY_PATH="$lib" HALFORMER_FAKE_CUDA_ZERO_READS=1 HALFORMER_FAKE_CUDA_PTXAS=none \
    HALFORMER_FAKE_CUDA_REPORT="$tmp/$n.txt" "$build/halformer" bench "${what[@]}" --device cuda \
    --batch "$batch" --src-len "$src_len" --new-tokens $n --beam 1 --iters 1 --json > "$tmp/$n.log" 2>&1 ||
    { cat "$tmp/$n.log" >&2; exit 1; }
done
python3 - "$tmp" "$batch" "$label" <<'PY'
import sys
d, batch, label = sys.argv[1], sys.argv[2], sys.argv[3]
def read(n):
    r = {}
    for line in open(f"{d}/{n}.txt"):
        f = line.split()
        if f and f[0] in ("launches", "to_device", "to_host", "allocs", "frees"):
            r[f[0]] = [int(x) for x in f[1:]]
    return r
a, b = read(1), read(9)
steps = 8 * 3  # 8 more tokens, in each of bench's 3 generate calls
launch = (b["launches"][0] - a["launches"][0]) / steps
up, up_b = [(b["to_device"][i] - a["to_device"][i]) / steps for i in (0, 1)]
down, down_b = [(b["to_host"][i] - a["to_host"][i]) / steps for i in (0, 1)]
alloc, free = [(b[k][0] - a[k][0]) / steps for k in ("allocs", "frees")]
print(f"{label}, batch {batch}, one greedy step: {launch:.0f} kernel launches, "
      f"{up:.0f} copies to the device ({up_b:.0f} bytes), {down:.0f} copies to the host ({down_b:.0f} bytes), "
      f"{alloc:.0f} device allocations and {free:.0f} frees")
PY
