#!/usr/bin/env python3
"""`halformer eval --hyp H --ref R --json J` against references built from NLTK.

BLEU: sacreBLEU's definition (13a tokenization, corpus-summed clipped n-gram
counts, brevity penalty), here on corpora whose every order has a match, so
that sacreBLEU's "exp" smoothing never applies. The 13a tokenizer is written
out below (sacreBLEU's regular expressions); the n-gram statistics, the
brevity penalty and, where NLTK's own definition agrees with sacreBLEU's (no
hypothesis shorter than 4 tokens), the whole score come from
nltk.translate.bleu_score.

chrF: sacreBLEU's default (character 6-grams, whitespace removed, statistics
summed over the corpus, precision and recall averaged over the orders both
sides have, then their F-beta with beta 2), counted with nltk.util.ngrams; on
single sentences of equal length (where every order's precision equals its
recall) also NLTK's sentence_chrf, and elsewhere NLTK's per-order precision
and recall.

Usage: check_metrics.py HALFORMER. Exit code 77 (skipped) without NLTK.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

try:
    from nltk.translate import bleu_score as nltk_bleu
    from nltk.translate import chrf_score as nltk_chrf
    from nltk.util import ngrams
except ImportError:
    print("NLTK is not installed (Debian: python3-nltk): skipped")
    sys.exit(77)

HF = sys.argv[1]
TOL = 1e-6
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


# sacreBLEU's Tokenizer13a.
_13A = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
]


def tok13a(line):
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = " " + line + " "
    for rx, repl in _13A:
        line = rx.sub(repl, line)
    return " ".join(line.split())


def ref_bleu(hyps, refs):
    """sacreBLEU's BLEU (no order without a match) from NLTK's pieces."""
    H = [tok13a(h.rstrip()).split() for h in hyps]
    R = [tok13a(r.rstrip()).split() for r in refs]
    correct, total = [0] * 4, [0] * 4
    for h, r in zip(H, R):
        for n in range(1, 5):
            # NLTK's numerator is the clipped match count; its denominator is
            # max(1, count), so the real count is taken here.
            correct[n - 1] += nltk_bleu.modified_precision([r], h, n).numerator
            total[n - 1] += max(0, len(h) - n + 1)
    hyp_len = sum(len(h) for h in H)
    ref_len = sum(nltk_bleu.closest_ref_length([r], len(h)) for h, r in zip(H, R))
    assert all(correct), "a test corpus must have a match at every order: %s" % correct
    bp = nltk_bleu.brevity_penalty(ref_len, hyp_len)
    prec = [100.0 * c / t for c, t in zip(correct, total)]
    score = bp * math.exp(sum(math.log(p) for p in prec) / 4)
    return {"bleu": score, "bp": bp, "hyp_len": hyp_len, "ref_len": ref_len, "precisions": prec}, (H, R)


def f_beta(p, r, beta=2.0):
    return (1 + beta**2) * p * r / (beta**2 * p + r) if beta**2 * p + r > 0 else 0.0


def ref_chrf(hyps, refs, order=6, beta=2.0):
    """sacreBLEU's chrF (eps_smoothing off) from nltk.util.ngrams counts."""
    stats = [[0, 0, 0] for _ in range(order)]  # n_hyp, n_ref, n_match
    for h, r in zip(hyps, refs):
        h, r = re.sub(r"\s+", "", h), re.sub(r"\s+", "", r)
        for n in range(1, order + 1):
            hc, rc = Counter(ngrams(h, n)), Counter(ngrams(r, n))
            stats[n - 1][0] += sum(hc.values())
            stats[n - 1][1] += sum(rc.values())
            stats[n - 1][2] += sum((hc & rc).values())
    eps = 1e-16
    avg_p = avg_r = 0.0
    eff = 0
    for n_hyp, n_ref, n_match in stats:
        p = n_match / n_hyp if n_hyp > 0 else eps
        r = n_match / n_ref if n_ref > 0 else eps
        if n_hyp > 0 and n_ref > 0:
            avg_p, avg_r, eff = avg_p + p, avg_r + r, eff + 1
    if eff == 0:
        return 0.0
    return 100.0 * f_beta(avg_p / eff, avg_r / eff, beta)


def nltk_sentence_chrf(hyp, ref, beta=2.0):
    """One sentence: precision and recall of each order from NLTK's own
    function, averaged over the orders (all of them present), then F-beta."""
    h, r = re.sub(r"\s+", "", hyp), re.sub(r"\s+", "", ref)
    ps, rs = [], []
    for n in range(1, 7):
        p, rec, _, _ = nltk_chrf.chrf_precision_recall_fscore_support(r, h, n, beta=beta)
        ps.append(p)
        rs.append(rec)
    return 100.0 * f_beta(sum(ps) / 6, sum(rs) / 6, beta)


tmp = tempfile.mkdtemp(prefix="halformer_metrics_")
runs = 0


def halformer_eval(name, hyps, refs):
    global runs
    runs += 1
    h, r, j = (os.path.join(tmp, "%s.%s" % (name, x)) for x in ("hyp", "ref", "json"))
    for path, lines in ((h, hyps), (r, refs)):
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(line + "\n" for line in lines))
    p = subprocess.run([HF, "eval", "--hyp", h, "--ref", r, "--json", j], capture_output=True, text=True)
    if p.returncode != 0:
        fail("%s: halformer eval exit %d: %s" % (name, p.returncode, p.stderr.strip()))
        return None
    with open(j, encoding="utf-8") as f:
        return json.load(f)


def close(a, b):
    return abs(a - b) <= TOL * max(abs(a), abs(b), 1e-12)


def expect(name, what, got, want):
    if not close(got, want):
        fail("%s: %s = %.10g, expected %.10g" % (name, what, got, want))


def check_corpus(name, hyps, refs, nltk_whole_bleu=False):
    got = halformer_eval(name, hyps, refs)
    if got is None:
        return
    want, (H, R) = ref_bleu(hyps, refs)
    for key in ("hyp_len", "ref_len"):
        if got[key] != want[key]:
            fail("%s: %s = %d, expected %d (13a tokenization differs)" % (name, key, got[key], want[key]))
    expect(name, "BLEU", got["bleu"], want["bleu"])
    expect(name, "BP", got["bp"], want["bp"])
    for n in range(4):
        expect(name, "precision %d" % (n + 1), got["precisions"][n], want["precisions"][n])
    if nltk_whole_bleu:
        assert all(len(h) >= 4 for h in H), name + ": NLTK's corpus_bleu agrees only without short hypotheses"
        expect(name, "BLEU vs nltk corpus_bleu", got["bleu"], 100.0 * nltk_bleu.corpus_bleu([[r] for r in R], H))
    expect(name, "chrF", got["chrf"], ref_chrf(hyps, refs))
    print("%-26s BLEU %8.4f  chrF %8.4f  (%d lines)" % (name, got["bleu"], got["chrf"], len(hyps)))


# 1. A test set: English/German-like, punctuation, digits, umlauts, entities,
#    quotes, slashes, "5-3", empty hypotheses, a no-break space (U+00A0: a
#    word separator for sacreBLEU, as for Python's str.split) and a thin
#    space (U+2009); line 28 has 4-grams, none of them in its reference.
REFS = [
    "Öffne die Datei, bevor du sie bearbeitest.",
    "Die Größe der Datei beträgt 3.5 MB.",
    "Es wurden 1,000 Einträge gefunden.",
    "Hello, world.",
    "The result was 5-3 after extra time.",
    "Tom &amp; Jerry are &quot;friends&quot;.",
    "Use the path /usr/share/doc/halformer for more.",
    "Fehler: Der Schlüssel \"id\" fehlt (Zeile 12).",
    "Saving changes to the document failed.",
    "Klicke auf „Speichern“, um fortzufahren!",
    "Version 2.0.1 is available - update now?",
    "Seite 2 von 10",
    "Drücke Strg+C zum Kopieren; Strg+V zum Einfügen.",
    "Die Übersetzung ist fast fertig...",
    "It costs 5. Really.",
    "e-mail me at a@b.de or call 030-123-45.",
    "Ungültige Eingabe: <tag> ist nicht erlaubt.",
    "Wir sehen uns um 10:30 Uhr.",
    "Bitte warte einen Moment.",
    "Der Server antwortet nicht [Zeitüberschreitung].",
    "Das kostet 20 % weniger.",
    "The quick brown fox jumps over the lazy dog.",
    "Datei nicht gefunden.",
    "Änderungen wurden gespeichert.",
    "Do you want to quit without saving?",
    "Neustart erforderlich",
    "Die Datei „bericht.txt“ wurde gelöscht.",
    "Drucken nicht möglich: kein Drucker eingerichtet.",
    "x = y * 2 + z / 4",
    "Fertig!",
]
HYPS = [
    "Öffne die Datei, bevor du sie änderst.",
    "Die Größe der Datei beträgt 3.5 MB.",
    "Es wurden 1,000 Einträge gefunden!",
    "Hello , world.",
    "The result was 5-3 after the extra time.",
    "Tom &amp; Jerry are friends.",
    "Use the path /usr/share/doc for more.",
    "Fehler: Schlüssel \"id\" fehlt (Zeile 12).",
    "",
    "Klicke auf „Speichern“ um fortzufahren!",
    "Version 2.0.1 is available-update now?",
    "Seite\u00a02 von 10",
    "Drücke Strg+C zum Kopieren.",
    "Die Übersetzung ist fertig...",
    "It costs 5.Really.",
    "e-mail me at a@b.de or call 030 - 123 - 45.",
    "Ungültige Eingabe: &lt;tag&gt; ist nicht erlaubt.",
    "Wir sehen uns um 10:30.",
    "",
    "Der Server antwortet nicht [Zeitüberschreitung]",
    "Das kostet 20\u2009% weniger.",
    "The quick brown fox jumped over the lazy dog.",
    "Datei nicht gefunden.",
    "",
    "Do you want to quit without saving ?",
    "Neustart nötig",
    "Die Datei „bericht.txt“ wurde entfernt.",
    "Drucken nicht möglich.",
    "x = y * 2 + z/4",
    "Fertig!",
]
assert len(REFS) == len(HYPS) == 30
_h28, _r28 = tok13a(HYPS[27]).split(), tok13a(REFS[27]).split()
assert len(_h28) >= 4 and nltk_bleu.modified_precision([_r28], _h28, 4).numerator == 0
check_corpus("test set", HYPS, REFS)

# 2. Hypotheses all of 4 tokens or more: the whole score is NLTK's corpus_bleu.
long_pairs = [(h, r) for h, r in zip(HYPS, REFS) if len(tok13a(h).split()) >= 4]
check_corpus("no short hypotheses", [h for h, _ in long_pairs], [r for _, r in long_pairs], nltk_whole_bleu=True)

# 3. One line each where the 13a rules decide the tokens (hyp_len, ref_len
#    and the precisions compare them); each reference is the hypothesis with
#    one word changed, so every order has a match.
TRICKY = [
    "Hello, world. How are you today?",
    "The price rose from 3.5 to 4,25 euros in 2020.",
    "The score was 5-3, not 5 - 3 or a-b at all.",
    "Ask Tom &amp; Jerry about &lt;b&gt; and &quot;quotes&quot; today.",
    "Look in (x) and [y] and {z} for it now.",
    "Read /usr/bin/env and a/b/c or http://x.org/p?q=1 now.",
    "He said \"no\" and 'yes' and don't care here.",
    "It ends with 5. It ends with x. And v1.2.3 stays.",
    "Wait... what?! Really, really: yes; no.",
    "50% of $10 is #5 @ noon ~ ok ^ `x` | y.",
    "Größe: 5 €. Übergröße, ja.",
    "line <skipped> with a skipped marker here.",
    "e-mail 030-123-45 and 3-a and a-5 ok now.",
]
for i, line in enumerate(TRICKY):
    words = line.split()
    words[1] = "CHANGED"
    check_corpus("13a line %d" % (i + 1), [line], [" ".join(words)])

# 4. Single sentences: chrF against NLTK's sentence_chrf (equal non-space
#    lengths: every order's precision equals its recall, so NLTK's average of
#    per-order F-scores is sacreBLEU's F-score of the averages) and against
#    NLTK's per-order precision and recall.
SINGLE = [
    ("Die Datei wurde gespeichert.", "Die Datei wurde gesichert!!."),
    ("Öffne das Menü „Datei“.", "Öffne das Menü „Bilder“"),
    ("the cat sat on the mat", "the cat sat on a mat here"),
    ("Größe 12,5 cm", "Größe 12 cm ähnlich"),
]
equal_lengths = 0
for i, (hyp, ref) in enumerate(SINGLE):
    name = "sentence %d" % (i + 1)
    got = halformer_eval(name, [hyp], [ref])
    if got is None:
        continue
    hs, rs = re.sub(r"\s+", "", hyp), re.sub(r"\s+", "", ref)
    assert len(hs) >= 6 and len(rs) >= 6
    for n in range(1, 7):
        assert nltk_chrf.chrf_precision_recall_fscore_support(rs, hs, n)[3] > 0, (name, n)
    if len(hs) == len(rs):
        equal_lengths += 1
        expect(name, "chrF vs nltk sentence_chrf", got["chrf"], 100.0 * nltk_chrf.sentence_chrf(ref, hyp, beta=2))
    expect(name, "chrF vs nltk per-order P/R", got["chrf"], nltk_sentence_chrf(hyp, ref))
    expect(name, "chrF", got["chrf"], ref_chrf([hyp], [ref]))
    print("%-26s chrF %8.4f" % (name, got["chrf"]))
assert equal_lengths >= 2, "sentence_chrf compared on %d sentences" % equal_lengths

# 5. No match at all: BLEU 0 (sacreBLEU stops there, as NLTK's corpus_bleu
#    does) even though "exp" smoothing could make every order non-zero.
got = halformer_eval("no match", ["a b c d e", "f g h"], ["v w x y z", "q r s t"])
if got is not None:
    if got["bleu"] != 0.0 or 100.0 * nltk_bleu.corpus_bleu([["v w x y z".split()], ["q r s t".split()]],
                                                          ["a b c d e".split(), "f g h".split()]) != 0.0:
        fail("no match: BLEU = %g, expected 0" % got["bleu"])
    expect("no match", "chrF", got["chrf"], ref_chrf(["a b c d e", "f g h"], ["v w x y z", "q r s t"]))

# 6. Identical: 100 both.
got = halformer_eval("identical", REFS, REFS)
if got is not None:
    expect("identical", "BLEU", got["bleu"], 100.0)
    expect("identical", "chrF", got["chrf"], 100.0)

shutil.rmtree(tmp)
if failures:
    print("%d failed of the checks over %d halformer eval runs" % (len(failures), runs))
    sys.exit(1)
print("metrics: halformer eval agrees with the NLTK-built references (%d eval runs)" % runs)
