#!/usr/bin/env bash
# Fuzzes the parsers of what users hand Halformer (weights: safetensors and GGUF; config.json
# and tokenizer.json files; the JSON body of a `halformer serve` request) with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer, each target for SECONDS (default 60), starting
# from a copy of its seed corpus in tests/fuzz/corpus/ (the repository's
# corpus is never written). Any crash, sanitizer report or timeout fails.
#   ./scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
rt=/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a
if ! command -v clang++-14 >/dev/null || [ ! -f "$rt" ]; then
  echo "[fuzz] installing clang-14 and its runtime (libFuzzer, sanitizers) from Debian"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
fi
cmake -S tests/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null
# One target a core at a time (each fuzzer is single-threaded, and gets its
# whole SECONDS on a core of its own).
fuzz_one() {
  local t=$1 work
  work=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$t/." "$work/"
  echo "[fuzz] fuzz_$t: ${secs} s from $(ls "$work" | wc -l) seeds"
  if ! build-fuzz/fuzz_$t -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -dict=tests/fuzz/json.dict -artifact_prefix=build-fuzz/crash-$t- "$work" > "build-fuzz/fuzz_$t.log" 2>&1; then
    tail -40 "build-fuzz/fuzz_$t.log"
    echo "[fuzz] fuzz_$t FAILED (input saved as build-fuzz/crash-$t-*)"
    rm -rf "$work"
    return 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build-fuzz/fuzz_$t.log" | sed "s/^/[fuzz] fuzz_$t /"
  echo "[fuzz] fuzz_$t: corpus grew to $(ls "$work" | wc -l) inputs"
  rm -rf "$work"
}
cores=$(nproc)
failed=$(mktemp)
for t in safetensors gguf config request tokenizer_json; do
  while [ "$(jobs -rp | wc -l)" -ge "$cores" ]; do sleep 1; done
  { fuzz_one "$t" || echo "$t" >> "$failed"; } &
done
wait
if [ -s "$failed" ]; then
  echo "[fuzz] failed: $(tr '\n' ' ' < "$failed")"
  rm -f "$failed"
  exit 1
fi
rm -f "$failed"
