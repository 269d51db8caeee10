#!/usr/bin/python3
"""PyTorch baseline for `halformer bench`: the same model shape and workload in
PyTorch (Debian's python3-torch, fp32, eager, the same thread count), with a
KV-cached incremental decoder so the comparison is fair, then the ratios.

  /usr/bin/python3 bench/torch_baseline.py [--batch 1] [--src-len 32]
      [--beam 4] [--new-tokens 32] [--threads 2] [--iters 5]
      [--halformer build/halformer] [--precision fp32|bf16|int8] [--json-out FILE]

Reports the keys of `halformer bench --json` (encoder_ms, decoder_step_ms,
greedy_tokens_per_s, beam_tokens_per_s, peak_rss_mb) for both, medians of
--iters runs, and halformer / PyTorch (ms: PyTorch / halformer, so > 1 means
halformer is faster in every row).
The model is the paper's base Transformer (6 + 6 layers, d_model 512, 8 heads,
d_ff 2048, 37000 shared vocabulary, post-LN, ReLU, tied output projection)
with random weights; timings do not depend on the weights' values.
"""
import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import os

# PyTorch's OpenMP threads: the count must be fixed before torch loads, and
# on this project's 2-core VMs the default (spinning) wait policy makes 2
# threads several times slower than 1 for small ops; PASSIVE is PyTorch's
# best setting there, so the baseline gets it unless the caller chose.
_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "2"
os.environ.setdefault("OMP_NUM_THREADS", _threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

D, H, FF, L, V = 512, 8, 2048, 6, 37000


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(D, H, L, L, FF, dropout=0.0, batch_first=True)
        self.embed = nn.Embedding(V, D)  # shared source/target/output matrix
        pos = torch.arange(4096, dtype=torch.float64)[:, None]
        i = torch.arange(D // 2, dtype=torch.float64)[None]
        ang = pos / torch.pow(10000.0, 2 * i / D)
        pe = torch.zeros(4096, D, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(ang), torch.cos(ang)
        self.register_buffer("pe", pe.float())

    def emb(self, tokens, start=0):
        return self.embed(tokens) * math.sqrt(D) + self.pe[start:start + tokens.shape[1]]

    def encode(self, src):
        return self.t.encoder(self.emb(src))


class CachedDecoder:
    """Incremental decoding with per-layer self-attention K/V caches
    (preallocated) and cross-attention K/V computed once per source."""

    def __init__(self, m, memory, max_len):
        self.m, self.layers = m, m.t.decoder.layers
        B, S, _ = memory.shape
        self.B, self.pos = B, 0
        self.cross = []
        for layer in self.layers:
            w, b = layer.multihead_attn.in_proj_weight, layer.multihead_attn.in_proj_bias
            kv = F.linear(memory, w[D:], b[D:]).view(B, S, 2, H, D // H).permute(2, 0, 3, 1, 4)
            self.cross.append((kv[0], kv[1]))
        self.k = [torch.empty(B, H, max_len, D // H) for _ in self.layers]
        self.v = [torch.empty(B, H, max_len, D // H) for _ in self.layers]

    def reorder(self, index):
        self.k = [k.index_select(0, index) for k in self.k]
        self.v = [v.index_select(0, index) for v in self.v]

    def repeat(self, n):
        self.B *= n
        self.cross = [(k.repeat_interleave(n, 0), v.repeat_interleave(n, 0)) for k, v in self.cross]
        self.k = [k.repeat_interleave(n, 0) for k in self.k]
        self.v = [v.repeat_interleave(n, 0) for v in self.v]

    @staticmethod
    def attend(q, k, v):
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // H), dim=-1)
        return w @ v

    def step(self, tokens):
        B, p = self.B, self.pos
        x = self.m.emb(tokens[:, None], p)
        for li, layer in enumerate(self.layers):
            sa = layer.self_attn
            q, k, v = F.linear(x, sa.in_proj_weight, sa.in_proj_bias).view(B, 1, 3, H, D // H).permute(2, 0, 3, 1, 4)
            self.k[li][:, :, p] = k[:, :, 0]
            self.v[li][:, :, p] = v[:, :, 0]
            a = self.attend(q, self.k[li][:, :, :p + 1], self.v[li][:, :, :p + 1])
            x = layer.norm1(x + sa.out_proj(a.transpose(1, 2).reshape(B, 1, D)))
            ca = layer.multihead_attn
            q = F.linear(x, ca.in_proj_weight[:D], ca.in_proj_bias[:D]).view(B, 1, H, D // H).transpose(1, 2)
            a = self.attend(q, *self.cross[li])
            x = layer.norm2(x + ca.out_proj(a.transpose(1, 2).reshape(B, 1, D)))
            x = layer.norm3(x + layer.linear2(F.relu(layer.linear1(x))))
        x = self.m.t.decoder.norm(x)
        self.pos += 1
        return (x[:, 0] @ self.m.embed.weight.t())


def greedy(m, src, n, steps):
    dec = CachedDecoder(m, m.encode(src), n + 1)
    tok = torch.ones(src.shape[0], dtype=torch.long)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        tok = dec.step(tok).argmax(-1)
        steps.append((time.perf_counter() - t0) * 1e3)
        out.append(tok)
    return torch.stack(out, 1)


def beam(m, src, n, K):
    B = src.shape[0]
    dec = CachedDecoder(m, m.encode(src), n + 1)
    dec.repeat(K)
    tok = torch.ones(B * K, dtype=torch.long)
    score = torch.full((B, K), -float("inf"))
    score[:, 0] = 0
    hist = torch.zeros(B * K, 0, dtype=torch.long)
    for _ in range(n):
        logp = torch.log_softmax(dec.step(tok), -1).view(B, K, V)
        cand = (score[:, :, None] + logp).view(B, K * V)
        score, idx = cand.topk(K, dim=-1)
        parent = (idx // V) + torch.arange(B)[:, None] * K
        tok = (idx % V).view(-1)
        parent = parent.view(-1)
        dec.reorder(parent)
        hist = torch.cat([hist.index_select(0, parent), tok[:, None]], 1)
    return hist


def layer_timings(a, rounds):
    """PyTorch's nn.MultiheadAttention (batch 1, T tokens) and one
    nn.TransformerEncoderLayer(512, 8, 2048) on 1×128 and 8×128 tokens, each
    round followed by ours (the `mha` kernel benchmarks of --kernels; the
    base model's encoder on the same tokens, divided by its 6 layers):
    median ms of each side over the rounds, and PyTorch / ours."""
    mha = nn.MultiheadAttention(D, H, batch_first=True).eval()
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True).eval()

    def med(fn, n=5):
        fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)

    torch_ms, ours_ms = {}, {}
    for r in range(rounds):
        print(f"\rlayers, interleaved: round {r + 1}/{rounds}", end="", file=sys.stderr, flush=True)
        with torch.no_grad():
            for T in (128, 512, 2048):
                x = torch.randn(1, T, D)
                torch_ms.setdefault(f"mha_1x{T}", []).append(med(lambda: mha(x, x, x, need_weights=False),
                                                                  3 if T == 2048 else 5))
            for B in (1, 8):
                x = torch.randn(B, 128, D)
                torch_ms.setdefault(f"encoder_layer_{B}x128", []).append(med(lambda: layer(x)))
        if a.kernels:
            with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
                subprocess.run([a.kernels, "--benchmark_filter=^mha/1x(128|512|2048)x512/hand/",
                                f"--benchmark_out={tmp.name}", "--benchmark_out_format=json"],
                               check=True, capture_output=True)
                bms = json.load(open(tmp.name))["benchmarks"]
            for bm in bms:
                if bm.get("aggregate_name") == "median":
                    T = int(bm["run_name"].split("/")[1].split("x")[1])
                    ours_ms.setdefault(f"mha_1x{T}", []).append(bm["real_time"])
        for B in (1, 8):
            cmd = [a.halformer, "bench", "--config", "base", "--batch", str(B), "--src-len", "128",
                   "--new-tokens", "1", "--iters", "3", "--threads", str(a.threads), "--precision", a.precision,
                   "--json"]
            r_ = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            ours_ms.setdefault(f"encoder_layer_{B}x128", []).append(r_["encoder_ms"] / 6)
    print("", file=sys.stderr)
    out = {}
    for k, v in torch_ms.items():
        out[f"{k}_ms"] = statistics.median(v)  # (the keys report.py read before)
        if k in ours_ms:
            h = statistics.median(ours_ms[k])
            out[k] = {"halformer": h, "pytorch": statistics.median(v), "ratio": statistics.median(v) / h}
    return out


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--src-len", type=int, default=32)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--halformer", default="build/halformer")
    ap.add_argument("--precision", default="fp32", help="halformer's --precision (PyTorch stays fp32)")
    ap.add_argument("--json-out")
    ap.add_argument("--layers", action="store_true",
                    help="also time nn.MultiheadAttention and one TransformerEncoderLayer (printed as JSON)")
    ap.add_argument("--kernels", help="halformer_bench_kernels: with --layers, our multi-head attention "
                                      "measured in the same rounds")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = Base().eval()
    src = torch.randint(3, V, (a.batch, a.src_len))
    enc, steps, gt, bt = [], [], [], []
    cmd = [a.halformer, "bench", "--config", "base", "--batch", str(a.batch), "--src-len", str(a.src_len),
           "--beam", str(a.beam), "--new-tokens", str(a.new_tokens), "--threads", str(a.threads),
           "--iters", "1", "--precision", a.precision, "--json"]
    hf_runs = []
    # One PyTorch iteration, then one halformer run, and so on: both sides
    # see the same machine (it is shared, and its speed drifts within minutes).
    with torch.no_grad():
        greedy(m, src, 2, [])  # warm-up
        beam(m, src, 2, a.beam)
        for it in range(a.iters):
            print(f"\rpytorch and halformer, interleaved: iteration {it + 1}/{a.iters}", end="", file=sys.stderr,
                  flush=True)
            t0 = time.perf_counter()
            m.encode(src)
            enc.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            greedy(m, src, a.new_tokens, steps)
            gt.append(a.batch * a.new_tokens / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            beam(m, src, a.new_tokens, a.beam)
            bt.append(a.batch * a.new_tokens / (time.perf_counter() - t0))
            hf_runs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
    print("", file=sys.stderr)
    torch_res = {"encoder_ms": statistics.median(enc), "decoder_step_ms": statistics.median(steps),
                 "greedy_tokens_per_s": statistics.median(gt), "beam_tokens_per_s": statistics.median(bt),
                 "peak_rss_mb": peak_rss_mb()}
    keys = ("encoder_ms", "decoder_step_ms", "greedy_tokens_per_s", "beam_tokens_per_s", "peak_rss_mb")
    hf = {k: (max if k == "peak_rss_mb" else statistics.median)([r[k] for r in hf_runs]) for k in keys}
    print(f"workload: base model, batch {a.batch}, source length {a.src_len}, {a.new_tokens} new tokens, "
          f"beam {a.beam}, {a.threads} threads, medians of {a.iters} runs each, interleaved; torch {torch.__version__}")
    print(f"{'':24}{'halformer':>12}{'pytorch':>12}{'speed-up':>10}")
    rows = {}
    for k in keys:
        ratio = torch_res[k] / hf[k] if k.endswith("_ms") or k == "peak_rss_mb" else hf[k] / torch_res[k]
        rows[k] = {"halformer": hf[k], "pytorch": torch_res[k], "ratio": ratio}
        print(f"{k:24}{hf[k]:12.2f}{torch_res[k]:12.2f}{ratio:9.2f}x")
    layers = None
    if a.layers:
        layers = layer_timings(a, max(a.iters, 5))
        print("layers (median ms, interleaved): " + json.dumps(layers))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"workload": vars(a), "torch": torch.__version__, "results": rows, "layers": layers}, f, indent=1)


if __name__ == "__main__":
    main()
