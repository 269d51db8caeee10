#!/usr/bin/env bash
# arm64-libs.sh DEST: Debian's arm64 build of the libraries the ARM runtime
# links (SentencePiece), unpacked under DEST (DEST/usr/lib/aarch64-linux-gnu).
# Debian's libsentencepiece0 is not Multi-Arch, so its arm64 package cannot be
# installed beside the amd64 one that the x86 build needs: it is downloaded
# from Debian's archive (scripts/install-deps.sh adds arm64's package lists)
# and unpacked, not installed. Does nothing when DEST already holds it.
set -euo pipefail
dest=$1
lib=$dest/usr/lib/aarch64-linux-gnu/libsentencepiece.so.0
[ -e "$lib" ] && exit 0
mkdir -p "$dest/debs"
cd "$dest/debs"
apt-get download libsentencepiece0:arm64 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
deb=$(ls libsentencepiece0_*_arm64.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "arm64-libs: could not download libsentencepiece0:arm64 (is arm64 in dpkg --print-foreign-architectures, and apt-get update run?)" >&2; exit 1; }
dpkg-deb -x "$deb" "$dest"
[ -e "$lib" ] || { echo "arm64-libs: $deb has no $lib" >&2; exit 1; }
echo "arm64-libs: $(basename "$deb") unpacked into $dest"
