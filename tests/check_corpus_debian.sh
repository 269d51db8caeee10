#!/usr/bin/env bash
# scripts/debian_po_corpus.py on a real, small Debian package: `build`
# fetches GNU hello with apt-get download (no install) and must find its
# German catalog's pairs. Skipped (exit 77) when Debian's archive cannot be
# reached; everything else is tested offline by check_corpus.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
echo hello > "$tmp/list"
"$py" "$here/scripts/debian_po_corpus.py" build --out "$tmp/out" --list "$tmp/list" --only-catalogs \
  > "$tmp/summary" 2> "$tmp/err" || { cat "$tmp/summary" "$tmp/err"; fail "build failed"; }
if ! grep -q "1 unpacked" "$tmp/summary"; then
  echo "skipped: could not download the hello package from Debian's archive:"
  cat "$tmp/err"
  exit 77
fi
pairs=$(cat "$tmp/out"/{train,dev,test}.en | wc -l)
[ "$pairs" -ge 15 ] || fail "hello: only $pairs pairs"
paste "$tmp/out"/train.en "$tmp/out"/train.de | grep -q $'^Hello, world!\tHallo, Welt!$' || fail "hello: the greeting's pair is missing"
# The same package again: nothing downloaded twice, the same corpus.
cp "$tmp/out/train.en" "$tmp/first.en"
"$py" "$here/scripts/debian_po_corpus.py" build --out "$tmp/out" --list "$tmp/list" --only-catalogs > "$tmp/summary2"
grep -q "already downloaded hello_" "$tmp/summary2" || fail "hello was downloaded twice"
cmp -s "$tmp/first.en" "$tmp/out/train.en" || fail "a second build changed the corpus"
echo "check_corpus_debian: $pairs pairs from hello"
