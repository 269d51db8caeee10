#!/usr/bin/env bash
# Builds one of examples/kernels and examples/custom_op against a fresh
# install of this build (find_package(Halformer), as an application would)
# and runs it.
#   check_examples.sh BUILD_DIR SOURCE_DIR kernels|custom_op
# kernels:    the kernels called on their own buffers, checked against loops.
# custom_op:  a user's generator built by halformer_add_kernel into every x86
#             variant, its test run once per variant this CPU runs
#             (HALFORMER_ISA caps the package's and the user's kernels alike).
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") example=$3
work=$build/_test_$example
prefix=$work/prefix
rm -rf "$work"
cmake --install "$build" --prefix "$prefix" > /dev/null
cmake -S "$src/examples/$example" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j2 > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
case $example in
kernels)
  "$work/build/kernels"
  ;;
custom_op)
  # One object per variant and the wrapper that picks among them.
  variants=$(ls "$work/build" | grep -c '^hf_rotary-x86-64-linux-.*\.o$')
  [ "$variants" -ge 4 ] || { echo "hf_rotary has $variants x86 variants, expected 4"; exit 1; }
  [ -e "$work/build/hf_rotary_wrapper.o" ]
  "$work/build/test_rotary"
  for isa in avx2 sse41; do
    echo "--- HALFORMER_ISA=$isa"
    out=$(HALFORMER_ISA=$isa "$work/build/test_rotary")
    echo "$out"
    grep -q "^kernel variant: $isa\$" <<< "$out"
  done
  ;;
*)
  echo "unknown example '$example' (kernels or custom_op)"; exit 2
  ;;
esac
