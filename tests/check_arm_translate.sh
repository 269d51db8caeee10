#!/usr/bin/env bash
# The translator on arm-64-linux: `translate` of the ARM build (under
# qemu-aarch64, Debian qemu-user) must write the same lines as the x86 build.
#   check_arm_translate.sh X86_HALFORMER ARM_HALFORMER MODEL_DIR QEMU_AARCH64 ARM64_LIB_DIR
set -euo pipefail
x86=$1 arm=$2 model=$3 qemu=$4 libs=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "Open the file" "The file could not be saved." "Show hidden files" > "$tmp/src"
"$x86" translate "$model" --beam 4 < "$tmp/src" > "$tmp/x86"
QEMU_LD_PREFIX=/usr/aarch64-linux-gnu LD_LIBRARY_PATH="$libs" \
  "$qemu" "$arm" translate "$model" --beam 4 < "$tmp/src" > "$tmp/arm"
QEMU_LD_PREFIX=/usr/aarch64-linux-gnu LD_LIBRARY_PATH="$libs" \
  "$qemu" "$arm" info "$model" > "$tmp/info"
paste -d '|' "$tmp/src" "$tmp/arm" | sed 's/|/  →  /'
if ! diff -u "$tmp/x86" "$tmp/arm"; then
  echo "translate.arm64: the ARM build's translations differ from the x86 build's" >&2
  exit 1
fi
[ "$(wc -l < "$tmp/arm")" -eq 3 ] || { echo "translate.arm64: expected 3 lines" >&2; exit 1; }
grep -q "kernel variant this CPU runs: arm64" "$tmp/info" || { cat "$tmp/info"; echo "translate.arm64: info does not name the ARM build" >&2; exit 1; }
echo "translate.arm64: 3 lines equal to the x86 build's"
