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
grep -q "kernel variant this CPU runs" <<< "$("$prefix/bin/halformer" info "$src/tests/fixtures/dec_pre_gelu")"
# The installed tuner runs from the package, away from the source tree: a
# short search writes a record that names this CPU.
(cd "$prefix" && "$prefix/bin/halformer" tune --ops layer_norm --budget 6s --no-adams \
     --out "$prefix/tuned-here" --work "$prefix/tune-work" > /dev/null 2> "$prefix/tune.err") \
    || { cat "$prefix/tune.err"; echo "the installed tuner failed"; exit 1; }
grep -q '"cpu": {"key": "' "$prefix/tuned-here/record.json"
[ -e "$prefix/share/halformer/plot_tuning.py" ]
# info says which record this CPU's kernels use, made on which CPU.
info=$("$prefix/bin/halformer" info)
grep -q "^schedules this CPU runs: " <<< "$info"
grep -q "^this CPU: " <<< "$info"
# The installed Python module (when the build made it) loads a model.
if [ -e "$build/python/halformer/__init__.py" ]; then
  PYTHONPATH="$prefix/lib/python3/dist-packages" /usr/bin/python3 -c "
import sys, halformer
assert halformer.__file__.startswith('$prefix'), halformer.__file__
m = halformer.Model.load(sys.argv[1])
print('installed python module:', m, m.logits([[5, 6, 7]], [[1, 9, 4]])[0].shape)
" "$src/tests/fixtures/ed_post_relu"
fi
echo "install + find_package example + installed tuner + python module: OK"
