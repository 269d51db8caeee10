#!/usr/bin/env bash
# arm64-libs.sh DEST: Debian's arm64 build of the libraries the ARM runtime
# links (SentencePiece, ICU), unpacked under DEST (DEST/usr/lib/aarch64-linux-gnu).
# Debian's libsentencepiece0 is not Multi-Arch, so its arm64 package cannot be
# installed beside the amd64 one that the x86 build needs: it is downloaded
# from Debian's archive (scripts/install-deps.sh adds arm64's package lists)
# and unpacked, not installed. ICU (libicu72) is handled the same way, so
# that the build machine's package set does not change: the arm64 package of
# the same ICU as the build machine's libicu-dev, whose headers the ARM build
# compiles against (ICU's symbols carry its major version: u_charType_72),
# plus unversioned libicuuc.so and libicui18n.so links for the linker, as
# libicu-dev has.
# Does nothing for a library DEST already holds.
set -euo pipefail
dest=$1
libdir=$dest/usr/lib/aarch64-linux-gnu
mkdir -p "$dest/debs"

# fetch PACKAGE LIBRARY: PACKAGE:arm64 unpacked into DEST unless it holds LIBRARY.
fetch() {
  local pkg=$1 lib=$libdir/$2 deb
  [ -e "$lib" ] && return 0
  (cd "$dest/debs" && apt-get download "$pkg:arm64" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
  deb=$(ls "$dest/debs/${pkg}_"*_arm64.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || { echo "arm64-libs: could not download $pkg:arm64 (is arm64 in dpkg --print-foreign-architectures, and apt-get update run?)" >&2; exit 1; }
  dpkg-deb -x "$deb" "$dest"
  [ -e "$lib" ] || { echo "arm64-libs: $deb has no $lib" >&2; exit 1; }
  echo "arm64-libs: $(basename "$deb") unpacked into $dest"
}

fetch libsentencepiece0 libsentencepiece.so.0

icu=$(dpkg-query -W -f='${Depends}' libicu-dev 2>/dev/null | grep -o 'libicu[0-9][0-9]*' | head -1 || true)
[ -n "$icu" ] || { echo "arm64-libs: libicu-dev is not installed (scripts/install-deps.sh)" >&2; exit 1; }
fetch "$icu" "libicuuc.so.${icu#libicu}"
ln -sfn "libicuuc.so.${icu#libicu}" "$libdir/libicuuc.so"
ln -sfn "libicui18n.so.${icu#libicu}" "$libdir/libicui18n.so"  # (the same package: the regular expressions)
