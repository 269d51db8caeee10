#!/usr/bin/env bash
# The runtime, the server and the tests under sanitizers (clang-14), with the
# generated kernels of build/ as they are (run scripts/build.sh first):
#   ./scripts/sanitize.sh address   # AddressSanitizer + UndefinedBehaviorSanitizer: the runtime, server,
#                                   # text and training suites
#   ./scripts/sanitize.sh thread    # ThreadSanitizer: the thread, fault and server tests
# Any report fails (-fno-sanitize-recover, halt_on_error).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-address}
if ! command -v clang++-14 >/dev/null; then
  echo "[sanitize] installing clang-14 from Debian"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
fi
case "$kind" in
  address) flags="address,undefined"; dir=build-asan ;;
  thread) flags="thread"; dir=build-tsan ;;
  *) echo "usage: $0 address|thread" >&2; exit 2 ;;
esac
cmake -S tests/sanitize -B "$dir" -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
      -DCMAKE_BUILD_TYPE=Sanitize -DSANITIZE="$flags" -DHALFORMER_BUILD="$PWD/build" >/dev/null
cmake --build "$dir" -j"$(nproc)" >/dev/null
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$PWD/tests/sanitize/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitize/tsan.supp"
# The load test at a quarter of its size: sanitized code runs slower.
export HALFORMER_LOAD_CLIENTS=16 HALFORMER_LOAD_REQUESTS=10
run() {
  echo "[sanitize:$kind] $*"
  "$@" --gtest_brief=1
}
if [ "$kind" = thread ]; then
  run "$dir/runtime_tests" --gtest_filter='Threads.*:Faults.*:Generate.*:DecodingControls.*'
  run "$dir/server_tests"
else
  # Devices.*: what a build without GPU kernels cannot test (the sanitized
  # build links the CPU kernels only).
  run "$dir/runtime_tests" --gtest_filter='-Devices.*'
  run "$dir/server_tests"
  run "$dir/text_tests"
  run "$dir/train_tests"
fi
echo "[sanitize:$kind] clean"
