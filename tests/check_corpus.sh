#!/usr/bin/env bash
# scripts/debian_po_corpus.py on hand-made catalogs (no network): parsing of
# .po and .mo (both byte orders, a Latin-1 charset), the filters, accelerator
# and markup cleaning, dedup, and the hash split (deterministic, no English
# sentence in two splits).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
corpus="$py $here/scripts/debian_po_corpus.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Writes a .mo from a Python literal list of (msgid, msgstr) byte strings.
write_mo() {  # write_mo OUT ORDER('<' or '>') PYTHON_LIST
  "$py" - "$1" "$2" "$3" <<'EOF'
import struct, sys
out, order, entries = sys.argv[1], sys.argv[2], eval(sys.argv[3])
entries.sort(key=lambda e: e[0])
n = len(entries); o_orig = 28; o_trans = o_orig + 8 * n; pos = o_trans + 8 * n
head = struct.pack(order + "7I", 0x950412de, 0, n, o_orig, o_trans, 0, 0)
t1 = t2 = b""; blob = b""
for k, v in entries:
    t1 += struct.pack(order + "2I", len(k), pos + len(blob)); blob += k + b"\0"
for k, v in entries:
    t2 += struct.pack(order + "2I", len(v), pos + len(blob)); blob += v + b"\0"
open(out, "wb").write(head + t1 + t2 + blob)
EOF
}

root=$tmp/root
mkdir -p "$root/pkgpo/usr/share/foo/po" "$root/pkgmo/usr/share/locale/de/LC_MESSAGES" \
         "$root/pkgbe/usr/share/locale/de_DE/LC_MESSAGES" \
         "$root/pkgother/usr/share/locale/fr/LC_MESSAGES" \
         "$root/pkgother/usr/share/locale/de_CH/LC_MESSAGES"
po=$root/pkgpo/usr/share/foo/po/de.po
long=$(printf 'Long %.0s' $(seq 81)); long=${long% }   # 404 characters
cat > "$po.in" <<'EOF'
# German translation.
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#: a.c:1
msgid "_Open"
msgstr "Ö_ffnen"

msgid "&Save"
msgstr "&Speichern"

msgid "Fish && Chips"
msgstr "Fisch && Pommes"

msgid "Salt & pepper"
msgstr "Salz & Pfeffer"

#, c-format
msgid "<b>Bold</b> text"
msgstr "<b>Fetter</b> Text"

msgid "Visit the <a href=\"https://example.org\">website</a>"
msgstr "Besuchen Sie die <a href=\"https://example.org\">Webseite</a>"

#, c-format
msgid "%s"
msgstr "»%s«"

#, c-format
msgid "%d of %d"
msgstr "%d von %d"

msgid "{0}"
msgstr "{0} Stück"

msgid "$1"
msgstr "$1 (de)"

msgid "42"
msgstr "zweiundvierzig"

msgid "..."
msgstr "…"

msgid "Size"
msgstr "Größe"

#, c-format
msgid "Café “%s”"
msgstr "Café „%s“"

#, fuzzy
msgid "Close"
msgstr "Schließen"

#, fuzzy, c-format
msgid "Closing %s"
msgstr "Schließe %s"

msgid "Quit"
msgstr ""

msgid "Bluetooth"
msgstr "Bluetooth"

msgid "LC_ALL is not set"
msgstr "LC_ALL ist nicht gesetzt"

msgid "One file"
msgid_plural "%d files"
msgstr[0] "Eine Datei"
msgstr[1] "%d Dateien"

msgid "%d item"
msgid_plural "%d items"
msgstr[0] ""
msgstr[1] ""

msgctxt "menu"
msgid "File"
msgstr "Datei"

msgctxt "noun"
msgid "Print"
msgstr "Druck"

msgid "Print"
msgstr "Drucken"

msgctxt "toolbar"
msgid "_Open"
msgstr "Ö_ffnen"

msgid ""
"A long line that "
"continues\n"
"with a \"quote\" and\ttab"
msgstr ""
"Eine lange Zeile, die "
"weitergeht\n"
"mit einem \"Zitat\" und\tTab"

msgid "@LONG@"
msgstr "Lang"

#~ msgid "Old"
#~ msgstr "Alt"
EOF
sed "s/@LONG@/$long/" "$po.in" > "$po" && rm "$po.in"

# The same catalog compiled (msgfmt leaves out fuzzy and untranslated ones).
mo=$root/pkgmo/usr/share/locale/de/LC_MESSAGES/hostile.mo
if command -v msgfmt >/dev/null; then
  msgfmt -o "$mo" "$po"
else
  echo "note: msgfmt absent, hostile.mo not built (the .po still is read)"
fi

# A big-endian .mo in Latin-1, written byte by byte: a context entry, a
# plural, a third German "Print", and a pair repeated from the .po.
write_mo "$root/pkgbe/usr/share/locale/de_DE/LC_MESSAGES/extra.mo" '>' "[
 (b'', b'Content-Type: text/plain; charset=ISO-8859-1\\n'),
 (b'button\\x04Print', b'Ausdrucken'),
 (b'Font size', 'Schriftgröße'.encode('latin-1')),
 (b'%d minute\\x00%d minutes', b'%d Minute\\x00%d Minuten'),
 (b'_Open', 'Ö_ffnen'.encode('latin-1')),
]"
# Catalogs that must be ignored: French, Swiss German.
write_mo "$root/pkgother/usr/share/locale/fr/LC_MESSAGES/x.mo" '<' "[(b'Street', b'Rue')]"
write_mo "$root/pkgother/usr/share/locale/de_CH/LC_MESSAGES/x.mo" '<' "[(b'Street', b'Strasse')]"

$corpus extract --out "$tmp/out" --roots "$root" > "$tmp/summary"
cat > "$tmp/expected" <<'EOF'
%d files	%d Dateien
%d minute	%d Minute
%d minutes	%d Minuten
A long line that continues with a "quote" and tab	Eine lange Zeile, die weitergeht mit einem "Zitat" und Tab
Bold text	Fetter Text
Café “%s”	Café „%s“
File	Datei
Fish & Chips	Fisch & Pommes
Font size	Schriftgröße
LC_ALL is not set	LC_ALL ist nicht gesetzt
One file	Eine Datei
Open	Öffnen
Print	Ausdrucken
Print	Druck
Print	Drucken
Salt & pepper	Salz & Pfeffer
Save	Speichern
Size	Größe
Visit the website	Besuchen Sie die Webseite
EOF
for s in train dev test; do
  [ "$(wc -l < "$tmp/out/$s.en")" = "$(wc -l < "$tmp/out/$s.de")" ] || fail "$s: .en/.de line counts differ"
  paste "$tmp/out/$s.en" "$tmp/out/$s.de"
done | LC_ALL=C sort > "$tmp/got"
LC_ALL=C sort -o "$tmp/expected" "$tmp/expected"
diff -u "$tmp/expected" "$tmp/got" || fail "surviving pairs differ from the expected ones"

"$py" - "$tmp/out/stats.json" "$(command -v msgfmt >/dev/null && echo 1 || echo 0)" <<'EOF' || fail "stats.json"
import json, sys
s = json.load(open(sys.argv[1])); have_mo = sys.argv[2] == "1"
def eq(what, got, want):
    if got != want:
        sys.exit("stats %s: got %r, want %r" % (what, got, want))
eq("catalogs", s["catalogs"], 3 if have_mo else 2)
eq("unique_pairs", s["unique_pairs"], 19)
eq("english_with_several_german", s["english_with_several_german"], 1)
eq("splits total", sum(s["splits"].values()), 19)
d = s["dropped"]
eq("fuzzy", d["fuzzy"], 2)              # only the .po has them
eq("untranslated", d["untranslated"], 3)  # Quit, %d item, %d items (.po only)
eq("identical", d["identical"], 2 if have_mo else 1)   # Bluetooth
eq("format_only", d["format_only"], 12 if have_mo else 6)
eq("too_long", d["too_long"], 2 if have_mo else 1)
po = [v for k, v in s["sources"].items() if v["kind"] == "po"]
eq("po sources", len(po), 1)
eq("po raw pairs", po[0]["pairs_raw"], 29)
eq("po kept", po[0]["kept"], 16)
f = s["filter_flow"]
eq("flow end", f["after_too_long"] - s["duplicates_removed"], f["unique_pairs"])
EOF

# Determinism: a second run gives byte-identical files.
$corpus extract --out "$tmp/out2" --roots "$root" > /dev/null
for f in train.en train.de dev.en dev.de test.en test.de stats.json; do
  cmp -s "$tmp/out/$f" "$tmp/out2/$f" || fail "second run differs in $f"
done

# Split on bigger catalogs: 3000 sentences, 300 of them with a second
# translation in another package (which adds 100 more). Every English line sits in one split only,
# and the split is the documented sha1 rule; dev and test are about 1% each.
mkdir -p "$tmp/bulk/a/usr/share/locale/de/LC_MESSAGES" "$tmp/bulk/b/usr/share/locale/de/LC_MESSAGES"
"$py" - "$tmp/bulk" <<'EOF'
import sys
d = sys.argv[1]
with open(d + "/a/usr/share/locale/de/LC_MESSAGES/a.po", "w") as f:
    for i in range(3000):
        f.write('msgid "Message number %d about things"\nmsgstr "Nachricht Nummer %d über Dinge"\n\n' % (i, i))
with open(d + "/b/usr/share/locale/de/LC_MESSAGES/b.po", "w") as f:
    for i in range(0, 4000, 10):
        f.write('msgid "Message number %d about things"\nmsgstr "Meldung Nummer %d über Dinge"\n\n' % (i, i))
EOF
$corpus extract --out "$tmp/bout" --roots "$tmp/bulk" > /dev/null
$corpus extract --out "$tmp/bout2" --roots "$tmp/bulk" > /dev/null
for f in train.en train.de dev.en dev.de test.en test.de; do
  cmp -s "$tmp/bout/$f" "$tmp/bout2/$f" || fail "bulk: second run differs in $f"
done
"$py" - "$tmp/bout" <<'EOF' || fail "bulk split"
import hashlib, sys
d = sys.argv[1]; where = {}; n = {}
for s in ("train", "dev", "test"):
    en = open("%s/%s.en" % (d, s), encoding="utf-8").read().splitlines()
    de = open("%s/%s.de" % (d, s), encoding="utf-8").read().splitlines()
    assert len(en) == len(de), s
    n[s] = len(en)
    for e in en:
        b = int(hashlib.sha1(e.encode()).hexdigest()[:8], 16) % 100
        want = "test" if b == 0 else "dev" if b == 1 else "train"
        if want != s:
            sys.exit("%r in %s, rule says %s" % (e, s, want))
        if where.setdefault(e, s) != s:
            sys.exit("%r in two splits" % e)
if len(where) != 3100 or sum(n.values()) != 3400:
    sys.exit("bulk: %d English, %d pairs" % (len(where), sum(n.values())))
if not (10 <= n["dev"] <= 70 and 10 <= n["test"] <= 70):
    sys.exit("bulk: odd split sizes %r" % n)
EOF

# Errors: nothing to read; a broken .mo is reported and skipped.
if $corpus extract --out "$tmp/none" 2>/dev/null; then fail "extract with no input should fail"; fi
printf 'not a mo file at all, really' > "$root/pkgmo/usr/share/locale/de/LC_MESSAGES/broken.mo"
$corpus extract --out "$tmp/out3" --roots "$root" > /dev/null 2> "$tmp/err"
grep -q "skipping .*broken.mo" "$tmp/err" || fail "broken .mo not reported"
cmp -s "$tmp/out/train.en" "$tmp/out3/train.en" || fail "broken .mo changed the output"

# A small Debian package, the way `build` reads the archive's: a .deb built
# here with dpkg-deb (a German .mo among files the script must not unpack)
# and already in OUT/debs, so `build` takes it instead of downloading.
if command -v dpkg-deb >/dev/null; then
  pkg=$tmp/pkg/halformer-test-l10n
  mkdir -p "$pkg/DEBIAN" "$pkg/usr/share/locale/de/LC_MESSAGES" "$pkg/usr/share/locale/fr/LC_MESSAGES" "$pkg/usr/bin"
  printf 'Package: halformer-test-l10n\nVersion: 1.0\nArchitecture: all\nMaintainer: Halformer <tests@localhost>\nDescription: corpus test\n' \
    > "$pkg/DEBIAN/control"
  write_mo "$pkg/usr/share/locale/de/LC_MESSAGES/t.mo" '<' "[
 (b'', b'Content-Type: text/plain; charset=UTF-8\\n'),
 (b'Close the window', b'Das Fenster schlie\\xc3\\x9fen'),
 (b'_Quit', b'_Beenden'),
 (b'%s', b'%s'),
]"
  write_mo "$pkg/usr/share/locale/fr/LC_MESSAGES/t.mo" '<' "[(b'Close the window', b'Fermer la fen\\xc3\\xaatre')]"
  printf '#!/bin/sh\n' > "$pkg/usr/bin/halformer-test"
  mkdir -p "$tmp/debout/debs"
  dpkg-deb --build --root-owner-group "$pkg" "$tmp/debout/debs/halformer-test-l10n_1.0_all.deb" > /dev/null
  echo halformer-test-l10n > "$tmp/list"
  $corpus build --out "$tmp/debout" --list "$tmp/list" --only-catalogs > "$tmp/debsummary"
  grep -q "already downloaded halformer-test-l10n_1.0_all.deb" "$tmp/debsummary" || fail "build did not take the .deb"
  grep -q "1 unpacked" "$tmp/debsummary" || fail "the .deb was not unpacked"
  [ ! -e "$tmp/debout/root/halformer-test-l10n/usr/bin/halformer-test" ] || fail "--only-catalogs unpacked a program"
  paste "$tmp/debout"/{train,dev,test}.en "$tmp/debout"/{train,dev,test}.de > /dev/null
  got=$(cat "$tmp/debout"/train.en "$tmp/debout"/dev.en "$tmp/debout"/test.en | LC_ALL=C sort | tr '\n' '|')
  [ "$got" = "Close the window|Quit|" ] || fail "package pairs: got '$got'"
  cat "$tmp/debout"/{train,dev,test}.de | grep -qx "Das Fenster schließen" || fail "package: German side"
fi

echo "check_corpus: all passed"
