#!/usr/bin/python3
"""Builds an English->German parallel corpus from Debian's gettext catalogs.

Standard library only.  Subcommands:

  download --out DIR (PKG... | --list FILE) [--only-catalogs]
      `apt-get download` each package into DIR/debs (skips ones already
      there, reports unknown names and goes on), then unpacks each with
      `dpkg-deb -x` into DIR/root/<pkg>/.
  extract --out DIR [--from-system] [--roots DIR/root]
      Reads German catalogs (.mo under */de/LC_MESSAGES/ or */de_DE/...,
      German .po files), pairs msgid with msgstr, cleans, deduplicates and
      writes DIR/{train,dev,test}.{en,de} plus DIR/stats.json.
  build --out DIR --list FILE [--from-system] [--only-catalogs]
      download + extract.

The split is by sha1 of the cleaned English text: bucket = first 8 hex
digits as an integer mod 100; 0 -> test, 1 -> dev, the rest -> train.  So one
English sentence (with all its German variants) lands in exactly one split.
"""
import argparse
import collections
import gzip
import hashlib
import html
import json
import os
import re
import struct
import subprocess
import sys

MAX_LEN = 400
SYSTEM_LOCALE_DIRS = ["/usr/share/locale/de/LC_MESSAGES",
                      "/usr/share/locale/de_DE/LC_MESSAGES"]
GERMAN_DIRS = ("de", "de_DE")


# ---------------------------------------------------------------- catalogs --

class Entry:
    __slots__ = ("ctx", "msgid", "msgid_plural", "msgstr", "fuzzy")

    def __init__(self, ctx, msgid, msgid_plural, msgstr, fuzzy=False):
        self.ctx = ctx
        self.msgid = msgid
        self.msgid_plural = msgid_plural
        self.msgstr = msgstr  # list of forms
        self.fuzzy = fuzzy


def _charset(header):
    m = re.search(r"charset=\s*([A-Za-z0-9_.:-]+)", header or "")
    cs = m.group(1) if m else "utf-8"
    if cs.upper() == "CHARSET":  # template placeholder
        cs = "utf-8"
    try:
        "".encode(cs)
    except LookupError:
        cs = "utf-8"
    return cs


def parse_mo(data):
    """Parses GNU .mo bytes into a list of Entry (header entry excluded)."""
    if len(data) < 28:
        raise ValueError("too short for a .mo file")
    for order in ("<", ">"):
        if struct.unpack(order + "I", data[:4])[0] == 0x950412DE:
            break
    else:
        raise ValueError("bad .mo magic")
    revision, n, o_orig, o_trans = struct.unpack(order + "4I", data[4:20])
    if (revision >> 16) > 1:
        raise ValueError("unsupported .mo major revision %d" % (revision >> 16))

    def table(off):
        out = []
        for i in range(n):
            length, pos = struct.unpack_from(order + "2I", data, off + 8 * i)
            if pos + length > len(data):
                raise ValueError("string out of range")
            out.append(data[pos:pos + length])
        return out

    originals, translations = table(o_orig), table(o_trans)
    charset = "utf-8"
    for o, t in zip(originals, translations):
        if o == b"":
            charset = _charset(t.decode("ascii", "replace"))
    entries = []
    for o, t in zip(originals, translations):
        if o == b"":
            continue
        o = o.decode(charset, "replace")
        t = t.decode(charset, "replace")
        ctx = None
        if "\x04" in o:
            ctx, o = o.split("\x04", 1)
        parts = o.split("\x00")
        entries.append(Entry(ctx, parts[0], parts[1] if len(parts) > 1 else None,
                             t.split("\x00")))
    return entries


_PO_ESC = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
           "v": "\v", "\\": "\\", '"': '"', "'": "'", "?": "?"}


def _po_unquote(s):
    s = s.strip()
    if len(s) < 2 or s[0] != '"' or s[-1] != '"':
        raise ValueError("not a quoted string: %r" % s)
    s = s[1:-1]
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        d = s[i + 1]
        if d in _PO_ESC:
            out.append(_PO_ESC[d])
            i += 2
        elif d in "01234567":
            m = re.match(r"[0-7]{1,3}", s[i + 1:])
            out.append(chr(int(m.group(0), 8)))
            i += 1 + len(m.group(0))
        elif d == "x":
            m = re.match(r"[0-9A-Fa-f]+", s[i + 2:])
            if m:
                out.append(chr(int(m.group(0), 16)))
                i += 2 + len(m.group(0))
            else:
                out.append(d)
                i += 2
        else:
            out.append(d)
            i += 2
    return "".join(out)


def _decode_po(data):
    m = re.search(rb"charset=\s*([A-Za-z0-9_.:-]+)", data)
    cs = _charset(m.group(1).decode("ascii") if m else "")
    return data.decode(cs, "replace")


def parse_po(text):
    """Parses .po text into a list of Entry (header and obsolete excluded)."""
    entries = []
    cur = None  # dict being filled
    field = None

    def flush():
        nonlocal cur
        if cur is not None and "msgid" in cur:
            forms = [cur["msgstr"][k] for k in sorted(cur["msgstr"])]
            if cur["msgid"] != "" or cur.get("ctx") is not None:
                entries.append(Entry(cur.get("ctx"), cur["msgid"],
                                     cur.get("msgid_plural"), forms or [""],
                                     cur.get("fuzzy", False)))
        cur = None

    def start_if_done():
        # A comment, msgctxt or msgid after a complete entry starts a new one.
        nonlocal cur
        if cur is not None and "msgid" in cur:
            flush()
        if cur is None:
            cur = {"msgstr": {}}

    for line in text.splitlines():
        line = line.strip()
        if not line:
            flush()
            field = None
            continue
        if line.startswith("#~"):
            field = None  # obsolete entry: ignore entirely
            continue
        if line.startswith("#"):
            start_if_done()
            if line.startswith("#,") and "fuzzy" in [f.strip() for f in line[2:].split(",")]:
                cur["fuzzy"] = True
            field = None
            continue
        m = re.match(r'(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s+(".*")$', line)
        if m:
            kw, idx, rest = m.group(1), m.group(2), m.group(3)
            if kw in ("msgctxt", "msgid"):
                start_if_done()
            elif cur is None:
                field = None
                continue  # msgstr without msgid: malformed
            val = _po_unquote(rest)
            if kw == "msgctxt":
                cur["ctx"] = val
                field = ("ctx",)
            elif kw == "msgid":
                cur["msgid"] = val
                field = ("msgid",)
            elif kw == "msgid_plural":
                cur["msgid_plural"] = val
                field = ("msgid_plural",)
            else:
                k = int(idx) if idx is not None else 0
                cur["msgstr"][k] = val
                field = ("msgstr", k)
            continue
        if line.startswith('"') and field is not None and cur is not None:
            val = _po_unquote(line)
            if field[0] == "msgstr":
                cur["msgstr"][field[1]] += val
            else:
                cur[field[0]] += val
            continue
        # anything else: malformed line, skip
    flush()
    return entries


# ---------------------------------------------------------------- cleaning --

# &&  -> &   ;  &entity; -> decoded  ;  &X (accelerator before a word char) -> X
_AMP = re.compile(r"&&|&(#[0-9]+|#[xX][0-9A-Fa-f]+|[A-Za-z][A-Za-z0-9]*);|&(?=\w)")
_TAG_NAMES = ("a|abbr|b|big|blockquote|body|br|center|code|div|em|font|h[1-6]|"
              "head|hr|html|i|img|kbd|li|link|nobr|ol|p|pre|qt|s|small|span|"
              "strong|sub|sup|table|td|th|tr|tt|u|ul|var|markup|emphasis|"
              "literal|command|filename|application|guilabel|guimenu|"
              "guibutton|keycap|ulink|quote|title|para")
_TAG = re.compile(r"</?(?:%s)(?:\s[^<>]*)?/?>" % _TAG_NAMES, re.IGNORECASE)
_BLOCK_TAG = re.compile(r"</?(?:br|p|div|li|ul|ol|tr|td|th|h[1-6]|hr|para|blockquote)"
                        r"(?:\s[^<>]*)?/?>", re.IGNORECASE)
_WS = re.compile(r"\s+")


def _amp_sub(m):
    s = m.group(0)
    if s == "&&":
        return "&"
    if m.group(1):
        return html.unescape(s)
    return ""


def strip_accelerators(s):
    s = _AMP.sub(_amp_sub, s)
    # GTK-style "_File", "Save _As", "E_xit": exactly one single underscore
    # followed by a letter/digit, and not part of an identifier like
    # "LC_ALL"/"foo_bar_baz" (more than one underscore, or "__").
    # Identifier-looking words keep theirs: LC_ALL, HOME_DIR, --no_x, $x_y.
    if s.count("_") == 1:
        tok = re.search(r"\S*_\S*", s).group(0)
        word = tok.strip(".,;:!?()[]\"'")
        ident = (re.fullmatch(r"[A-Z0-9]+_[A-Z0-9]+", word)
                 or word[:1] in "-$%@{<"
                 or any(c in word for c in "/=.\\"))
        if not ident:
            s = re.sub(r"_(?=[^\W_])", "", s)
    return s


def clean(s):
    s = strip_accelerators(s)
    s = _BLOCK_TAG.sub(" ", s)
    s = _TAG.sub("", s)
    s = _WS.sub(" ", s).strip()
    return s


_PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?[-+ #0'I]*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?))?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?[diouxXeEfFgGaAcCsSpnm%]"  # printf
    r"|%\([A-Za-z0-9_]+\)[-+ #0]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"  # python %()s
    r"|%<[A-Za-z0-9_]+>"                                           # PRIu64 style
    r"|%[0-9]+|%[A-Za-z_]+%"                                       # Qt %1, %VAR%
    r"|\{[A-Za-z0-9_.:!\[\]-]*\}"                                  # {0} {name}
    r"|\$\{[^}]*\}|\$[0-9]+|\$[A-Za-z_][A-Za-z0-9_]*"              # shell
    r"|@[A-Za-z_][A-Za-z0-9_]*@"                                   # @VAR@
)


def letters(s):
    return sum(1 for c in s if c.isalpha())


def format_only(en):
    """True when the English side has no real words: only placeholders,
    numbers, punctuation, or placeholders with a short glue word
    ("%d of %d")."""
    rest = _PLACEHOLDER.sub(" ", en)
    n = letters(rest)
    if n == 0:
        return True
    if rest != en and n < 3:
        return True
    return False


# ---------------------------------------------------------------- pipeline --

FILTERS = ["fuzzy", "untranslated", "empty_after_clean", "identical",
           "format_only", "too_long"]


def catalog_pairs(entries, counts):
    """Yields cleaned (en, de) pairs; counts[...] records each filter."""
    for e in entries:
        counts["entries"] += 1
        raw = [(e.msgid, e.msgstr[0] if e.msgstr else "")]
        if e.msgid_plural is not None and len(e.msgstr) > 1:
            raw.append((e.msgid_plural, e.msgstr[1]))
        for en, de in raw:
            counts["pairs_raw"] += 1
            if e.fuzzy:
                counts["drop_fuzzy"] += 1
                continue
            if de == "":
                counts["drop_untranslated"] += 1
                continue
            en_c, de_c = clean(en), clean(de)
            if not en_c or not de_c:
                counts["drop_empty_after_clean"] += 1
                continue
            if en_c == de_c:
                counts["drop_identical"] += 1
                continue
            if format_only(en_c):
                counts["drop_format_only"] += 1
                continue
            if len(en_c) > MAX_LEN or len(de_c) > MAX_LEN:
                counts["drop_too_long"] += 1
                continue
            counts["kept"] += 1
            yield en_c, de_c


def _is_german_dir(name):
    return name in GERMAN_DIRS


def _is_german_po(path):
    base = os.path.basename(path)
    if base.endswith(".gz"):
        base = base[:-3]
    if not base.endswith(".po"):
        return False
    stem = base[:-3]
    if stem in GERMAN_DIRS:
        return True
    if re.search(r"[._-](de|de_DE)$", stem):
        return True
    parts = path.split(os.sep)
    return len(parts) >= 3 and parts[-2] == "LC_MESSAGES" and _is_german_dir(parts[-3])


def find_catalogs(root):
    """(kind, path) for German .mo/.po files under root, sorted."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        parts = dirpath.split(os.sep)
        in_de_msgs = (len(parts) >= 2 and parts[-1] == "LC_MESSAGES"
                      and _is_german_dir(parts[-2]))
        for f in sorted(filenames):
            p = os.path.join(dirpath, f)
            if os.path.islink(p) and not os.path.exists(p):
                continue
            if in_de_msgs and f.endswith(".mo"):
                found.append(("mo", p))
            elif _is_german_po(p):
                found.append(("po", p))
    return found


def read_catalog(kind, path):
    with open(path, "rb") as fh:
        data = fh.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    if kind == "mo":
        return parse_mo(data)
    return parse_po(_decode_po(data))


def split_of(en):
    b = int(hashlib.sha1(en.encode("utf-8")).hexdigest()[:8], 16) % 100
    return "test" if b == 0 else "dev" if b == 1 else "train"


def extract(out, roots, from_system):
    sources = []  # (source name, kind, path)
    if from_system:
        for d in SYSTEM_LOCALE_DIRS:
            if os.path.isdir(d):
                for f in sorted(os.listdir(d)):
                    if f.endswith(".mo"):
                        sources.append(("system:" + f[:-3], "mo", os.path.join(d, f)))
    for r in roots:
        if not os.path.isdir(r):
            print("warning: no such roots directory: %s" % r, file=sys.stderr)
            continue
        for pkg in sorted(os.listdir(r)):
            pdir = os.path.join(r, pkg)
            if not os.path.isdir(pdir):
                continue
            for kind, p in find_catalogs(pdir):
                name = os.path.basename(p)
                for suf in (".gz", ".mo", ".po"):
                    if name.endswith(suf):
                        name = name[:-len(suf)]
                if kind == "po":
                    name = os.path.relpath(p, pdir)
                sources.append(("%s:%s" % (pkg, name), kind, p))

    total = collections.Counter()
    per_source = {}
    pairs = set()
    errors = {}
    for name, kind, path in sources:
        counts = collections.Counter()
        try:
            entries = read_catalog(kind, path)
        except (ValueError, OSError, struct.error, EOFError) as exc:
            errors[name] = "%s: %s" % (path, exc)
            print("warning: skipping %s: %s" % (path, exc), file=sys.stderr)
            continue
        new = 0
        for p in catalog_pairs(entries, counts):
            if p not in pairs:
                pairs.add(p)
                new += 1
        counts["new_unique"] = new
        key = name if name not in per_source else "%s[%s]" % (name, path)
        per_source[key] = dict(counts, kind=kind, path=path)
        total.update(counts)

    by_en = collections.defaultdict(list)
    for en, de in pairs:
        by_en[en].append(de)
    multi = sum(1 for v in by_en.values() if len(v) > 1)

    os.makedirs(out, exist_ok=True)
    splits = {"train": [], "dev": [], "test": []}
    for en, de in pairs:
        splits[split_of(en)].append((en, de))
    for s, lst in splits.items():
        lst.sort(key=lambda p: (hashlib.sha1(p[0].encode("utf-8")).hexdigest(), p[0], p[1]))
        with open(os.path.join(out, s + ".en"), "w", encoding="utf-8", newline="\n") as fe, \
             open(os.path.join(out, s + ".de"), "w", encoding="utf-8", newline="\n") as fd:
            for en, de in lst:
                fe.write(en + "\n")
                fd.write(de + "\n")

    flow = collections.OrderedDict()
    remaining = total["pairs_raw"]
    flow["pairs_raw"] = remaining
    for f in FILTERS:
        remaining -= total["drop_" + f]
        flow["after_" + f] = remaining
    flow["unique_pairs"] = len(pairs)
    stats = {
        "catalogs": len(sources),
        "catalogs_unreadable": errors,
        "entries": total["entries"],
        "filter_flow": flow,
        "dropped": {f: total["drop_" + f] for f in FILTERS},
        "duplicates_removed": total["kept"] - len(pairs),
        "unique_pairs": len(pairs),
        "unique_english": len(by_en),
        "english_with_several_german": multi,
        "splits": {s: len(v) for s, v in splits.items()},
        "split_rule": "sha1(cleaned English)[:8] as int mod 100: 0 test, 1 dev, else train",
        "sources": per_source,
    }
    with open(os.path.join(out, "stats.json"), "w", encoding="utf-8") as fh:
        json.dump(stats, fh, ensure_ascii=False, indent=1, sort_keys=False)
        fh.write("\n")
    print_summary(stats)
    return stats


def print_summary(stats):
    src = stats["sources"]
    if src:
        w = min(max(len(k) for k in src), 50)
        print("%-*s %4s %8s %8s %8s" % (w, "source", "kind", "raw", "kept", "new"))
        top = sorted(src.items(), key=lambda kv: -kv[1].get("new_unique", 0))
        for k, v in top[:40]:
            print("%-*s %4s %8d %8d %8d" % (w, k[:w], v["kind"], v.get("pairs_raw", 0),
                                           v.get("kept", 0), v.get("new_unique", 0)))
        if len(top) > 40:
            print("... %d more sources (see stats.json)" % (len(top) - 40))
        print()
    print("catalogs read:               %d" % stats["catalogs"])
    for k, v in stats["filter_flow"].items():
        print("  %-26s %d" % (k, v))
    print("duplicates removed:          %d" % stats["duplicates_removed"])
    print("unique pairs:                %d" % stats["unique_pairs"])
    print("unique English:              %d" % stats["unique_english"])
    print("English with several German: %d" % stats["english_with_several_german"])
    print("splits: train %(train)d  dev %(dev)d  test %(test)d" % stats["splits"])


# ---------------------------------------------------------------- download --

def read_list(path):
    pkgs = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if line:
                pkgs.extend(line.split())
    return pkgs


def download(out, pkgs, only_catalogs=False):
    debs = os.path.join(out, "debs")
    root = os.path.join(out, "root")
    os.makedirs(debs, exist_ok=True)
    os.makedirs(root, exist_ok=True)
    try:
        os.chmod(debs, 0o777)  # lets apt's _apt user write there (no warning)
    except OSError:
        pass
    missing, failed, got = [], [], []
    seen = set()
    for pkg in pkgs:
        if pkg in seen:
            continue
        seen.add(pkg)
        have = [f for f in os.listdir(debs) if f.startswith(pkg + "_") and f.endswith(".deb")]
        if not have:
            r = subprocess.run(["apt-get", "download", pkg], cwd=debs,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            if r.returncode != 0:
                msg = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
                if ("Unable to locate" in r.stderr or "has no installation candidate" in r.stderr
                        or "Can't select candidate" in r.stderr
                        or "No packages found" in r.stderr):
                    print("no such package (skipped): %s  [%s]" % (pkg, msg), file=sys.stderr)
                    missing.append(pkg)
                else:
                    print("download failed (skipped): %s  [%s]" % (pkg, msg), file=sys.stderr)
                    failed.append(pkg)
                continue
            have = [f for f in os.listdir(debs) if f.startswith(pkg + "_") and f.endswith(".deb")]
            if not have:
                print("download produced no .deb for %s (skipped)" % pkg, file=sys.stderr)
                failed.append(pkg)
                continue
            print("downloaded %s" % have[0])
        else:
            print("already downloaded %s" % have[0])
        deb = os.path.join(debs, sorted(have)[-1])
        dest = os.path.join(root, pkg)
        marker = os.path.join(dest, ".extracted")
        if not os.path.exists(marker):
            os.makedirs(dest, exist_ok=True)
            if only_catalogs:
                # Only the parts extract reads: saves disk on big packages.
                cmd = ("dpkg-deb --fsys-tarfile \"$1\" | tar -x -C \"$2\" --wildcards "
                       "'*/de/LC_MESSAGES/*' '*/de_DE/LC_MESSAGES/*' '*.po' '*.po.gz' "
                       "2>/dev/null; exit 0")
                r = subprocess.run(["sh", "-c", cmd, "sh", deb, dest])
            else:
                r = subprocess.run(["dpkg-deb", "-x", deb, dest])
            if r.returncode != 0:
                print("dpkg-deb failed for %s (skipped)" % deb, file=sys.stderr)
                failed.append(pkg)
                continue
            open(marker, "w").close()
        got.append(pkg)
    print("packages: %d requested, %d unpacked, %d unknown, %d failed"
          % (len(seen), len(got), len(missing), len(failed)))
    if missing:
        print("unknown packages: " + " ".join(missing))
    if failed:
        print("failed packages: " + " ".join(failed))
    with open(os.path.join(out, "download.json"), "w", encoding="utf-8") as fh:
        json.dump({"unpacked": got, "unknown": missing, "failed": failed}, fh, indent=1)
        fh.write("\n")
    return got, missing, failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    sub.required = True

    d = sub.add_parser("download", help="apt-get download + dpkg-deb -x")
    d.add_argument("--out", required=True)
    d.add_argument("--list")
    d.add_argument("--only-catalogs", action="store_true",
                   help="unpack only locale/.po files instead of the whole package")
    d.add_argument("pkgs", nargs="*")

    e = sub.add_parser("extract", help="catalogs -> cleaned, split corpus")
    e.add_argument("--out", required=True)
    e.add_argument("--from-system", action="store_true")
    e.add_argument("--roots", action="append", default=None,
                   help="directory of unpacked packages (default OUT/root if it exists)")

    b = sub.add_parser("build", help="download + extract")
    b.add_argument("--out", required=True)
    b.add_argument("--list", required=True)
    b.add_argument("--from-system", action="store_true")
    b.add_argument("--only-catalogs", action="store_true")

    a = ap.parse_args(argv)
    if a.cmd in ("download", "build"):
        pkgs = list(getattr(a, "pkgs", []) or [])
        if a.list:
            pkgs += read_list(a.list)
        if not pkgs:
            ap.error("no packages given (PKG... or --list FILE)")
        download(a.out, pkgs, a.only_catalogs)
    if a.cmd in ("extract", "build"):
        roots = getattr(a, "roots", None)
        if roots is None:
            default = os.path.join(a.out, "root")
            roots = [default] if os.path.isdir(default) else []
        if not roots and not a.from_system:
            ap.error("nothing to read: give --roots, --from-system, or download first")
        extract(a.out, roots, a.from_system)
    return 0


if __name__ == "__main__":
    sys.exit(main())
