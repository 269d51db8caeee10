#!/bin/bash
# pip install . as a user does it, offline: into a fresh virtual environment
# (Debian's python3-venv; --system-site-packages for numpy and pytest) with
# --no-build-isolation (Debian's setuptools and wheel), reusing this build
# (HALFORMER_BUILD_DIR: nothing up to date is rebuilt). Then the package is
# imported from the environment, `python -m halformer` runs the command, and
# the pytest suite runs against the installed package.
#   check_pip.sh SOURCE_DIR BUILD_DIR
# Without python3-setuptools, python3-wheel or python3-venv: skipped (77).
set -euo pipefail
src=$1 build=$2
py=/usr/bin/python3
if ! $py -c "import setuptools, wheel, ensurepip" 2>/dev/null; then
    echo "SKIPPED: pip install . needs python3-setuptools, python3-wheel and python3-venv"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$py -m venv --system-site-packages "$tmp/venv"
before=$(git -C "$src" status --porcelain --ignored=no 2>/dev/null || true)
HALFORMER_BUILD_DIR="$build" "$tmp/venv/bin/pip" install --no-build-isolation --no-deps --no-index -q "$src"
after=$(git -C "$src" status --porcelain --ignored=no 2>/dev/null || true)
[ "$before" = "$after" ] || { echo "FAIL: pip install changed the source tree:"; diff <(echo "$before") <(echo "$after"); exit 1; }
cd "$tmp"
"$tmp/venv/bin/python" - "$tmp/venv" <<'PY'
import sys
import halformer
assert halformer.__file__.startswith(sys.argv[1]), "imported from " + halformer.__file__
assert hasattr(halformer, "Model") and hasattr(halformer, "Tokenizer")
print("[pip] import halformer:", halformer.__file__)
PY
out=$("$tmp/venv/bin/python" -m halformer info "$src/models/en-de")
grep -q "encoder-decoder" <<<"$out" || { echo "FAIL: python -m halformer info:"; echo "$out"; exit 1; }
echo "[pip] python -m halformer info: ok"
HALFORMER_SOURCE_DIR="$src" "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$src/python/tests"
