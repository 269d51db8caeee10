#!/usr/bin/env bash
# Installs the build into a scratch prefix, builds examples/ against it with
# find_package(Halformer), and runs the example on a fixture model.
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")
prefix=$build/_test_install example=$build/_test_example
rm -rf "$prefix" "$example"
cmake --install "$build" --prefix "$prefix" > /dev/null
cmake -S "$src/examples" -B "$example" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$example" > /dev/null
out=$("$example/translate" "$src/tests/fixtures/ed_post_relu" 5,6,7)
echo "$out"
grep -q "logits: \[1, 40\] and \[1, 40\]" <<< "$out"
[ "$(grep -c $'\t' <<< "$out")" = 2 ]   # two n-best lines
# The installed CLI runs too.
"$prefix/bin/halformer" info "$src/tests/fixtures/dec_pre_gelu" | grep -q "kernel variant this CPU runs"
echo "install + find_package example: OK"
