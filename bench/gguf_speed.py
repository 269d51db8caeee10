#!/usr/bin/python3
"""Halformer and llama.cpp on the same GGUF files, interleaved (docs/gguf.md, docs/benchmarks.md).

  /usr/bin/python3 bench/gguf_speed.py [--types F32,Q8_0] [--rounds 3] [--threads 2] [--quick]
      [--halformer build/halformer] [--node-dir DIR] [--out DIR]

1. Writes a Llama-3.2-1B-shaped decoder with random weights (hidden 2048, 16 layers, 32 heads over 8 key/value
   heads of 64, FFN 8192, vocab 32000, rope_theta 500000, tied head; weights N(0, 0.02), norms 1) as GGUF files
   the way llama.cpp's converter lays them out (tests/gguf_writer.py, streamed tensor by tensor), one per type:
   2-D weights in that type, norms in F32. The vocabulary is GPT-2-style byte-level (256 byte tokens, the rest
   fillers, no merges), only so that llama.cpp loads the file: the benchmark feeds token ids.
2. llama.cpp: node-llama-cpp 3.21.1 from npm (its prebuilt CPU backend only; installed into --node-dir, default
   build/node-llama-cpp, when missing), a 128-token prompt then 128 greedy tokens, --threads threads, the time to
   the first new token (the prompt) and the rate of the rest (decode).
3. Halformer: `halformer bench FILE --batch 1 --src-len 128 --new-tokens 128 --beam 1 --iters 1 --json` (the
   prompt's forward time, greedy tokens per second, peak resident memory).
4. Rounds alternate the order; medians. The first round of F32 also cross-checks the first 32 greedy ids of the
   same prompt from both (`halformer generate`).
Writes DIR/report.md, DIR/results.json and DIR/gguf.png (DIR: bench/results/gguf-<cpu>-<date> unless --out).
--quick: 2 layers, hidden 256, vocab 1000 (a smoke test of the script).
"""
import argparse
import datetime
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import gguf_writer as gw  # noqa: E402
from report import cpu_name  # noqa: E402  (bench/report.py: the machine's name)

PROMPT, NEW = 128, 128
NODE_VERSION = "3.21.1"
RUN_MJS = r"""
import {getLlama} from "node-llama-cpp";
import fs from "node:fs";
const [modelPath, promptLen, newTokens, threads] = [process.argv[2], +process.argv[3], +process.argv[4], +process.argv[5]];
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: promptLen + newTokens + 8, threads, batchSize: promptLen});
const seq = context.getSequence();
const prompt = Array.from({length: promptLen}, (_, t) => 3 + (t * 7) % 200);
const t0 = performance.now();
let first = 0; const out = [];
for await (const tok of seq.evaluate(prompt, {temperature: 0})) {
  if (out.length === 0) first = performance.now();
  out.push(tok);
  if (out.length >= newTokens) break;
}
const t1 = performance.now();
const hwm = /VmHWM:\s+(\d+)/.exec(fs.readFileSync("/proc/self/status", "utf8"));
console.log(JSON.stringify({prompt_ms: first - t0, decode_tok_s: (out.length - 1) / ((t1 - first) / 1000),
                            peak_rss_mb: hwm ? +hwm[1] / 1024 : -1, tokens: out}));
"""


def shape(quick):
    if quick:
        return dict(hidden=256, layers=2, heads=8, kv=2, ffn=512, vocab=1000)
    return dict(hidden=2048, layers=16, heads=32, kv=8, ffn=8192, vocab=32000)


def write_model(path, s, type_name, seed=0):
    """Streams a GGUF v3 file: the header (metadata and tensor infos) first, then each tensor, quantized one at
    a time so that the whole model is never in memory."""
    rng = np.random.default_rng(seed)
    H, L, nh, kv, F, V = s["hidden"], s["layers"], s["heads"], s["kv"], s["ffn"], s["vocab"]
    hd = H // nh
    tokens = [chr(c) for c in range(33, 127)] + [f"<t{i}>" for i in range(V - 94)]
    meta = {
        "general.architecture": ("STRING", "llama"), "general.name": ("STRING", "bench"),
        "llama.context_length": ("UINT32", 4096), "llama.embedding_length": ("UINT32", H),
        "llama.block_count": ("UINT32", L), "llama.feed_forward_length": ("UINT32", F),
        "llama.attention.head_count": ("UINT32", nh), "llama.attention.head_count_kv": ("UINT32", kv),
        "llama.attention.layer_norm_rms_epsilon": ("FLOAT32", 1e-5), "llama.rope.freq_base": ("FLOAT32", 500000.0),
        "llama.rope.dimension_count": ("UINT32", hd), "llama.vocab_size": ("UINT32", V),
        "tokenizer.ggml.model": ("STRING", "gpt2"), "tokenizer.ggml.pre": ("STRING", "gpt-2"),
        "tokenizer.ggml.tokens": ("ARRAY", ("STRING", tokens)),
        "tokenizer.ggml.token_type": ("ARRAY", ("INT32", [1] * V)),
        "tokenizer.ggml.merges": ("ARRAY", ("STRING", [])),
        "tokenizer.ggml.bos_token_id": ("UINT32", 1), "tokenizer.ggml.eos_token_id": ("UINT32", 2),
    }
    specs = [("token_embd.weight", (V, H), type_name), ("output_norm.weight", (H,), "F32")]
    for i in range(L):
        b = f"blk.{i}."
        specs += [(b + "attn_norm.weight", (H,), "F32"), (b + "attn_q.weight", (nh * hd, H), type_name),
                  (b + "attn_k.weight", (kv * hd, H), type_name), (b + "attn_v.weight", (kv * hd, H), type_name),
                  (b + "attn_output.weight", (H, nh * hd), type_name), (b + "ffn_norm.weight", (H,), "F32"),
                  (b + "ffn_gate.weight", (F, H), type_name), (b + "ffn_up.weight", (F, H), type_name),
                  (b + "ffn_down.weight", (H, F), type_name)]
    align = gw.DEFAULT_ALIGNMENT
    header = b"GGUF" + struct.pack("<IQQ", 3, len(specs), len(meta))
    for key, (t, v) in meta.items():
        header += gw._string(key) + struct.pack("<I", gw.GGUF_TYPES[t]) + gw._value(t, v)
    offset, sizes = 0, []
    for name, shp, t in specs:
        _, block, size = gw.GGML_TYPES[t]
        n = int(np.prod(shp)) // block * size
        ne = list(reversed(shp))
        header += gw._string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        header += struct.pack("<IQ", gw.GGML_TYPES[t][0], offset)
        sizes.append(n)
        offset += n + gw._pad(n, align)
    with open(path, "wb") as f:
        f.write(header + b"\0" * gw._pad(len(header), align))
        for (name, shp, t), n in zip(specs, sizes):
            x = np.ones(shp, np.float32) if len(shp) == 1 else (rng.standard_normal(shp, np.float32) * 0.02)
            data = gw.quantize(x, t)
            assert len(data) == n, name
            f.write(data + b"\0" * gw._pad(n, align))
    return os.path.getsize(path)


def ensure_node(node_dir):
    if not os.path.exists(os.path.join(node_dir, "node_modules", "node-llama-cpp")):
        os.makedirs(node_dir, exist_ok=True)
        subprocess.run(["npm", "init", "-y"], cwd=node_dir, check=True, capture_output=True)
        subprocess.run(["npm", "install", f"node-llama-cpp@{NODE_VERSION}", "--no-audit", "--no-fund"], cwd=node_dir,
                       check=True)
    with open(os.path.join(node_dir, "run.mjs"), "w") as f:
        f.write(RUN_MJS)


def run_llama_cpp(node_dir, path, threads):
    out = subprocess.run(["node", "run.mjs", path, str(PROMPT), str(NEW), str(threads)], cwd=node_dir, check=True,
                         capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return {"prompt_tok_s": PROMPT / (r["prompt_ms"] / 1000), "decode_tok_s": r["decode_tok_s"],
            "peak_rss_mb": r["peak_rss_mb"], "tokens": r["tokens"]}


def run_halformer(exe, path, threads):
    env = dict(os.environ, HALFORMER_THREADS=str(threads))
    out = subprocess.run([exe, "bench", path, "--batch", "1", "--src-len", str(PROMPT), "--new-tokens", str(NEW),
                          "--beam", "1", "--iters", "1", "--threads", str(threads), "--json"], check=True,
                         capture_output=True, text=True, env=env).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return {"prompt_tok_s": PROMPT / (r["encoder_ms"] / 1000), "decode_tok_s": r["greedy_tokens_per_s"],
            "peak_rss_mb": r["peak_rss_mb"], "precision": r.get("precision", "?")}


def halformer_tokens(exe, path, n):
    src = ",".join(str(3 + (t * 7) % 200) for t in range(PROMPT))
    out = subprocess.run([exe, "generate", path, "--src", src, "--max-new-tokens", str(n)], check=True,
                         capture_output=True, text=True).stdout
    return [int(t) for t in out.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="F32,Q8_0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--halformer", default=os.path.join(HERE, "..", "build", "halformer"))
    ap.add_argument("--node-dir", default=os.path.join(HERE, "..", "build", "node-llama-cpp"))
    ap.add_argument("--out")
    a = ap.parse_args()
    cpu = cpu_name()
    day = datetime.date.today().isoformat()
    label = "-".join([w for w in "".join(c if c.isalnum() else " " for c in cpu.lower()).split() if w != "r"][:2])
    out = a.out or os.path.join(HERE, "results", f"gguf-{'quick-' if a.quick else ''}{label}-{day}")
    os.makedirs(out, exist_ok=True)
    ensure_node(a.node_dir)
    s = shape(a.quick)
    work = tempfile.mkdtemp(prefix="gguf_speed_")
    results = {"cpu": cpu, "date": day, "shape": s, "threads": a.threads, "prompt": PROMPT, "new": NEW, "types": {}}
    for t in a.types.split(","):
        path = os.path.join(work, f"model.{t}.gguf")
        t0 = time.time()
        size = write_model(path, s, t)
        print(f"[gguf] {t}: {size / 1e9:.2f} GB written in {time.time() - t0:.0f} s", flush=True)
        rows = {"halformer": [], "llama.cpp": []}
        check = None
        for r in range(a.rounds):
            order = ["halformer", "llama.cpp"] if r % 2 == 0 else ["llama.cpp", "halformer"]
            for side in order:
                if side == "halformer":
                    rows[side].append(run_halformer(a.halformer, path, a.threads))
                else:
                    rows[side].append(run_llama_cpp(a.node_dir, path, a.threads))
                m = rows[side][-1]
                print(f"[gguf] {t} round {r + 1} {side}: prompt {m['prompt_tok_s']:.1f} tok/s, decode "
                      f"{m['decode_tok_s']:.2f} tok/s, peak {m['peak_rss_mb']:.0f} MB", flush=True)
            if r == 0:
                h = halformer_tokens(a.halformer, path, 32)
                lc = rows["llama.cpp"][-1]["tokens"][:32]
                check = {"halformer": h, "llama.cpp": lc, "equal": h == lc}
                print(f"[gguf] {t} greedy ids equal for {sum(x == y for x, y in zip(h, lc))} of 32", flush=True)
        med = {side: {k: statistics.median(x[k] for x in v) for k in ("prompt_tok_s", "decode_tok_s", "peak_rss_mb")}
               for side, v in rows.items()}
        med["halformer"]["precision"] = rows["halformer"][0].get("precision", "?")
        results["types"][t] = {"file_bytes": size, "median": med, "rounds": {k: [{kk: vv for kk, vv in x.items()
                                                                                 if kk != "tokens"} for x in v]
                                                                           for k, v in rows.items()},
                               "cross_check": check}
        os.remove(path)
    os.rmdir(work)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = [f"# Halformer and llama.cpp on the same GGUF files ({cpu}, {day})", "",
             f"Llama-3.2-1B-shaped random weights ({s}), {a.threads} threads each, batch 1, a {PROMPT}-token prompt "
             f"then {NEW} greedy tokens, {a.rounds} interleaved rounds, medians. llama.cpp: node-llama-cpp "
             f"{NODE_VERSION}'s prebuilt CPU backend. Halformer runs each file in its own precision (docs/gguf.md): "
             "F32 in float32; Q4_0 4-bit (the q4 kernels, the file's nibbles and steps), Q4_1 and Q4_K 4-bit with "
             "a minimum per 32 (the q4_1 kernels; Q4_K's sub-blocks as Q4_1's); the other block types in "
             "int8 packed from the file's blocks as Q8_0's (Q8_0 as it is, Q5_K and Q6_K requantized per 32); "
             "activations quantized in blocks of 32, as llama.cpp's Q8_0 dot product does.", "",
             "| file | Halformer runs | size GB | prompt tok/s H / L (ratio) | decode tok/s H / L (ratio) | "
             "peak RSS MB H / L |",
             "|---|---|---|---|---|---|"]
    for t, r in results["types"].items():
        h, lc = r["median"]["halformer"], r["median"]["llama.cpp"]
        lines.append(f"| {t} | {h.get('precision', '?')} | {r['file_bytes'] / 1e9:.2f} | {h['prompt_tok_s']:.1f} / {lc['prompt_tok_s']:.1f} "
                     f"({h['prompt_tok_s'] / lc['prompt_tok_s']:.2f}x) | {h['decode_tok_s']:.2f} / "
                     f"{lc['decode_tok_s']:.2f} ({h['decode_tok_s'] / lc['decode_tok_s']:.2f}x) | "
                     f"{h['peak_rss_mb']:.0f} / {lc['peak_rss_mb']:.0f} |")
    for t, r in results["types"].items():
        if r["cross_check"]:
            c = r["cross_check"]
            n = sum(x == y for x, y in zip(c["halformer"], c["llama.cpp"]))
            lines += ["", f"{t}: the first 32 greedy ids of the same prompt are equal for {n} of 32 (Halformer's "
                      "`generate` against llama.cpp's, the same file"
                      + (")." if t == "F32" else "; both quantize the activations, each its own way).")]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
        names = list(results["types"])
        for ax, key, title in ((axes[0], "prompt_tok_s", "prompt (tok/s)"), (axes[1], "decode_tok_s",
                                                                             "decode (tok/s)")):
            x = np.arange(len(names))
            ax.bar(x - 0.2, [results["types"][n]["median"]["halformer"][key] for n in names], 0.4, label="Halformer")
            ax.bar(x + 0.2, [results["types"][n]["median"]["llama.cpp"][key] for n in names], 0.4, label="llama.cpp")
            ax.set_xticks(x, names)
            ax.set_title(title)
        axes[0].legend()
        fig.suptitle(f"Same GGUF file, {a.threads} threads, batch 1 ({cpu})", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "gguf.png"), dpi=110)
    except ImportError:
        pass
    print("\n".join(lines))
    print(f"[gguf] wrote {out}")


if __name__ == "__main__":
    main()
