#!/usr/bin/python3
"""Today's decoders against PyTorch in the same run (issue 41, item 7): a Llama-3.2-1B-shaped and a
Qwen2.5-0.5B-shaped decoder, prompts of 128 tokens then 128 new tokens (greedy, never stopping at eos), at
batch 1 and 8, Halformer in fp32, bf16 and int8, PyTorch in float32, bfloat16 and dynamic int8
(torch.ao.quantization.quantize_dynamic over the nn.Linear layers), 2 threads each.

  /usr/bin/python3 bench/llama_speed.py [--threads 2] [--rounds 1] [--models llama,qwen2]
      [--precisions fp32,bf16,int8] [--batches 1,8] [--halformer build/halformer] [--out DIR] [--quick]

Steps:
1. Writes random-weight checkpoints of the real shapes as transformers saves them (tests/make_hf_fixtures.py's
   names and config fields; BF16 files, as the hub's are): LlamaForCausalLM like Llama-3.2-1B (16 layers,
   hidden 2048, 32 heads over 8 key/value heads of 64, intermediate 8192, vocab 128256, rope_theta 500000 with
   llama3 scaling, tied head) and Qwen2ForCausalLM like Qwen2.5-0.5B (24 layers, hidden 896, 14 heads over 2 of
   64, intermediate 4864, vocab 151936, Q/K/V biases, rope_theta 1e6, tied head). Weights N(0, 0.02), norms 1.
2. A PyTorch model from the same tensors (float32), written from transformers' modeling_llama.py: RMSNorm,
   rotary positions (the frequencies as transformers computes them), grouped-query attention with a
   preallocated K/V cache, SwiGLU; checked against `halformer logits` once (relative max difference).
3. Rounds: per model, batch and precision, one PyTorch greedy run (prefill of the batch's 128-token prompts,
   then 127 cached steps: 128 new tokens a row, argmax only) and one `halformer bench DIR --batch B --src-len
   128 --new-tokens 128 --beam 1 --iters 1 --precision P --json` (greedy tokens/s over the new tokens, the
   prompt's forward time, the median step), the order alternating each round.
4. Medians: tokens/s of each side, the ratio, and for batch 1 the fraction of the machine's memory bandwidth
   the decode step reaches (a step reads every weight once: stored bytes / step time, against the copy
   bandwidth measured here with numpy on a buffer far past the caches). Writes DIR/report.md, llama.png and
   results.json (DIR: bench/results/llama-<cpu>-<date> unless --out).

--quick: 2 layers, hidden 128, vocab 1000: a smoke test of the script. Run it on a quiet machine: every
number is wall time.
"""
import argparse
import datetime
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import make_hf_fixtures as fx  # noqa: E402
from report import cpu_name  # noqa: E402  (bench/report.py: the machine's name)

PROMPT, NEW = 128, 128
SHAPES = {
    "llama": dict(model_type="llama", hidden_size=2048, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                  intermediate_size=8192, num_hidden_layers=16, vocab_size=128256, max_position_embeddings=131072,
                  rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                                     "high_freq_factor": 4.0,
                                                     "original_max_position_embeddings": 8192},
                  tie_word_embeddings=True, rms_norm_eps=1e-5, bos_token_id=128000, eos_token_id=128001),
    "qwen2": dict(model_type="qwen2", hidden_size=896, num_attention_heads=14, num_key_value_heads=2,
                  intermediate_size=4864, num_hidden_layers=24, vocab_size=151936, max_position_embeddings=32768,
                  rope_theta=1000000.0, tie_word_embeddings=True, rms_norm_eps=1e-6, bos_token_id=151643,
                  eos_token_id=151645),
}
QUICK = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, vocab_size=1000, head_dim=32,
             num_attention_heads=4, num_key_value_heads=2, bos_token_id=998, eos_token_id=999)
NAMES = {"llama": "Llama-3.2-1B-shaped", "qwen2": "Qwen2.5-0.5B-shaped"}


def make_checkpoint(d, kind, quick, seed):
    kw = dict(SHAPES[kind])
    if quick:
        kw.update(QUICK)
    mt = kw.pop("model_type")
    cfg = fx.llama_config(mt, torch_dtype="bfloat16", transformers_version="4.45.0", **kw)
    g = torch.Generator().manual_seed(seed)
    W = {}
    for name, shape, k in fx.llama_names(cfg):
        if k == "tied":
            continue
        W[name] = torch.ones(shape) if k == "rms_w" else (torch.randn(shape, generator=g) * 0.02)
        W[name] = W[name].bfloat16().float()  # what the BF16 file holds
    os.makedirs(d)
    fx.write_json(os.path.join(d, "config.json"), cfg)
    fx.save_weights(d, [(n, "BF16", t) for n, t in W.items()])
    return cfg, W


class TorchLlama(torch.nn.Module):
    """LlamaForCausalLM's inference (Qwen2's too: biases on Q, K, V where the weights have them), float32,
    with a preallocated K/V cache; greedy() times the steps."""

    def __init__(self, cfg, W):
        super().__init__()
        self.c = cfg
        D, H = cfg["hidden_size"], cfg["num_attention_heads"]
        self.H, self.Hkv = H, cfg.get("num_key_value_heads") or H
        self.dh = cfg.get("head_dim") or D // H
        self.eps = cfg["rms_norm_eps"]
        self.embed = torch.nn.Parameter(W["model.embed_tokens.weight"], requires_grad=False)
        self.layers = torch.nn.ModuleList()

        def lin(w, b=None):
            m = torch.nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
            m.weight.data = w.clone()
            if b is not None:
                m.bias.data = b.clone()
            return m

        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            L = torch.nn.Module()
            L.q = lin(W[p + "self_attn.q_proj.weight"], W.get(p + "self_attn.q_proj.bias"))
            L.k = lin(W[p + "self_attn.k_proj.weight"], W.get(p + "self_attn.k_proj.bias"))
            L.v = lin(W[p + "self_attn.v_proj.weight"], W.get(p + "self_attn.v_proj.bias"))
            L.o = lin(W[p + "self_attn.o_proj.weight"])
            L.gate = lin(W[p + "mlp.gate_proj.weight"])
            L.up = lin(W[p + "mlp.up_proj.weight"])
            L.down = lin(W[p + "mlp.down_proj.weight"])
            L.n1 = torch.nn.Parameter(W[p + "input_layernorm.weight"], requires_grad=False)
            L.n2 = torch.nn.Parameter(W[p + "post_attention_layernorm.weight"], requires_grad=False)
            self.layers.append(L)
        self.norm = torch.nn.Parameter(W["model.norm.weight"], requires_grad=False)
        self.head = lin(W["model.embed_tokens.weight"])
        self.inv_freq = fx.rope_inv_freq(cfg).float()

    def rms(self, x, w):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * w

    def rot(self, x, cos, sin):
        h = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin

    def forward(self, ids, start, cache, last_only=True):
        B, T = ids.shape
        x = self.embed[ids].to(self.dtype)
        ang = torch.arange(start, start + T, dtype=torch.float32)[:, None] * self.inv_freq[None]
        emb = torch.cat([ang, ang], -1)
        cos, sin = emb.cos().to(self.dtype), emb.sin().to(self.dtype)
        mask = None
        if T > 1:
            mask = torch.full((T, start + T), float("-inf"), dtype=self.dtype).triu(start + 1)
        for L, (kc, vc) in zip(self.layers, cache):
            h = self.rms(x, L.n1.to(self.dtype))
            q = L.q(h).view(B, T, self.H, self.dh).transpose(1, 2)
            k = L.k(h).view(B, T, self.Hkv, self.dh).transpose(1, 2)
            v = L.v(h).view(B, T, self.Hkv, self.dh).transpose(1, 2)
            q, k = self.rot(q, cos, sin), self.rot(k, cos, sin)
            kc[:, :, start:start + T] = k
            vc[:, :, start:start + T] = v
            K = kc[:, :, :start + T].repeat_interleave(self.H // self.Hkv, dim=1)
            V = vc[:, :, :start + T].repeat_interleave(self.H // self.Hkv, dim=1)
            s = (q @ K.transpose(-1, -2)) * self.dh ** -0.5
            if mask is not None:
                s = s + mask
            o = (torch.softmax(s.float(), -1).to(self.dtype) @ V).transpose(1, 2).reshape(B, T, -1)
            x = x + L.o(o)
            h = self.rms(x, L.n2.to(self.dtype))
            x = x + L.down(torch.nn.functional.silu(L.gate(h)) * L.up(h))
        if last_only:
            x = x[:, -1:]
        x = self.rms(x, self.norm.to(self.dtype))
        return self.head(x).float()

    dtype = torch.float32

    def new_cache(self, B, n):
        return [(torch.zeros(B, self.Hkv, n, self.dh, dtype=self.dtype),
                 torch.zeros(B, self.Hkv, n, self.dh, dtype=self.dtype)) for _ in self.layers]

    @torch.inference_mode()
    def greedy(self, prompt, new):
        B = prompt.shape[0]
        cache = self.new_cache(B, prompt.shape[1] + new)
        t0 = time.perf_counter()
        tok = self.forward(prompt, 0, cache)[:, -1].argmax(-1, keepdim=True)
        prefill = time.perf_counter() - t0
        steps = []
        for t in range(new - 1):
            s0 = time.perf_counter()
            tok = self.forward(tok, prompt.shape[1] + t, cache)[:, -1].argmax(-1, keepdim=True)
            steps.append(time.perf_counter() - s0)
        return prefill, steps


def torch_variant(m, precision):
    """float32 as is; bfloat16: every weight cast; int8: quantize_dynamic over nn.Linear (fbgemm)."""
    if precision == "fp32":
        return m
    import copy
    if precision == "bf16":
        b = copy.deepcopy(m).to(torch.bfloat16)
        b.dtype = torch.bfloat16
        return b
    return torch.ao.quantization.quantize_dynamic(copy.deepcopy(m), {torch.nn.Linear}, dtype=torch.qint8)
    # (main() quantizes the reference in place instead, when int8 comes last.)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")
    return p


def copy_bandwidth():
    """GB/s of numpy copying 512 MiB (read + write counted), median of 5."""
    a = np.ones(64 << 20, dtype=np.float64)
    b = np.empty_like(a)
    t = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        t.append(time.perf_counter() - t0)
    return 2 * a.nbytes / statistics.median(t) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--models", default="llama,qwen2")
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--halformer", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                                                        "halformer"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--merge", default=None, help="a results.json of an earlier run whose models this run lacks "
                                                  "joins the report")
    ap.add_argument("--torch-precisions", default="fp32,int8",
                    help="PyTorch's (bf16 left out by default: PyTorch 1.13's CPU bfloat16 matmul without "
                         "AVX512-BF16 is a slow fallback, minutes a batch-8 prefill)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    models = a.models.split(",")
    precisions = a.precisions.split(",")
    batches = [int(b) for b in a.batches.split(",")]
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                "llama-" + ("quick-" if a.quick else "") + "amd-epyc-" + datetime.date.today().isoformat())
    os.makedirs(out, exist_ok=True)
    res = {"cpu": cpu_name(), "threads": a.threads, "prompt": PROMPT, "new": NEW, "rounds": a.rounds,
           "copy_gb_s": copy_bandwidth(), "models": {}}
    print(f"copy bandwidth {res['copy_gb_s']:.1f} GB/s", file=sys.stderr, flush=True)
    tmp = tempfile.mkdtemp(prefix="halformer_llama_speed_")
    try:
        for mi, kind in enumerate(models):
            d = os.path.join(tmp, kind)
            print(f"{kind}: writing the checkpoint", file=sys.stderr, flush=True)
            cfg, W = make_checkpoint(d, kind, a.quick, 100 + mi)
            stored = sum(t.numel() for t in W.values())
            ref = TorchLlama(cfg, W)
            del W
            # Check once: the last position's logits of a short prompt.
            ids = torch.randint(0, cfg["vocab_size"] - 300, (1, 12), generator=torch.Generator().manual_seed(5))
            with torch.inference_mode():
                want = ref.forward(ids, 0, ref.new_cache(1, 12), last_only=False)[0].numpy()
            npy = os.path.join(tmp, kind + ".npy")
            run([a.halformer, "logits", d, "--src", ",".join(str(int(x)) for x in ids[0]), "--out", npy,
                 "--threads", str(a.threads)])
            got = np.load(npy).reshape(want.shape)
            check = float(np.abs(got - want).max() / np.abs(want).max())
            print(f"{kind}: halformer logits vs PyTorch: relative max difference {check:.2e}", file=sys.stderr,
                  flush=True)
            if check > 1e-3:
                raise SystemExit(f"{kind}: halformer logits differ from the PyTorch reference ({check:.2e})")
            r = res["models"][kind] = {"name": NAMES[kind], "check_rel_max": check, "stored_values": stored,
                                       "weights_fp32_bytes": 4 * stored, "runs": {}}
            # Precision by precision (PyTorch's int8 model is the reference quantized in place, last: two
            # float32 copies of a 1B model beside Halformer's would not fit 24 GB).
            for P in precisions:
                if P in a.torch_precisions.split(",") and P == "int8":
                    tm = torch.ao.quantization.quantize_dynamic(ref, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
                else:
                    tm = torch_variant(ref, P) if P in a.torch_precisions.split(",") else None
                if tm is not None:
                    tm.greedy(torch.zeros(1, 8, dtype=torch.long), 2)  # warm-up
                for B in batches:
                    prompt = torch.randint(0, cfg["vocab_size"] - 300, (B, PROMPT),
                                           generator=torch.Generator().manual_seed(B))
                    key = f"b{B}-{P}"
                    print(f"{kind} {key}", file=sys.stderr, flush=True)
                    rr = r["runs"][key] = {"torch_tok_s": [], "torch_step_ms": [], "torch_prefill_ms": [],
                                           "ours_tok_s": [], "ours_step_ms": [], "ours_prompt_ms": []}
                    for rnd in range(a.rounds):
                        def torch_side():
                            if tm is None:
                                return
                            t0 = time.perf_counter()
                            prefill, steps = tm.greedy(prompt, NEW)
                            wall = time.perf_counter() - t0
                            rr["torch_tok_s"].append(B * NEW / wall)
                            rr["torch_step_ms"].append(statistics.median(steps) * 1e3)
                            rr["torch_prefill_ms"].append(prefill * 1e3)

                        def ours_side():
                            j = json.loads(run([a.halformer, "bench", d, "--batch", str(B), "--src-len", str(PROMPT),
                                                "--new-tokens", str(NEW), "--beam", "1", "--iters", "1",
                                                "--threads", str(a.threads), "--precision", P, "--json"]).stdout)
                            rr["ours_tok_s"].append(j["greedy_tokens_per_s"])
                            rr["ours_step_ms"].append(j["decoder_step_ms"])
                            rr["ours_prompt_ms"].append(j.get("encoder_ms", float("nan")))

                        for side in ((torch_side, ours_side) if rnd % 2 == 0 else (ours_side, torch_side)):
                            side()
                    med = {k: (statistics.median(v) if v else None) for k, v in rr.items()}
                    rr["median"] = med
                    bytes_per = {"fp32": 4, "bf16": 2, "int8": 1}[P]
                    if B == 1 and med["ours_step_ms"]:
                        rr["ours_bandwidth_fraction"] = stored * bytes_per / (med["ours_step_ms"] / 1e3) / 1e9 / \
                            res["copy_gb_s"]
                    print(f"  {key}: torch {med['torch_tok_s']} tok/s, halformer {med['ours_tok_s']} tok/s",
                          file=sys.stderr, flush=True)
                    with open(os.path.join(out, "results.json"), "w") as f:
                        json.dump(res, f, indent=1)
                if tm is not None and tm is not ref:
                    del tm
                gc.collect()
            del ref
            gc.collect()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.merge:
        with open(a.merge) as f:
            earlier = json.load(f)
        for kind, r in earlier["models"].items():
            if kind not in res["models"]:
                r["note"] = f"from an earlier run of this script (copy bandwidth {earlier['copy_gb_s']:.1f} GB/s)"
                res["models"][kind] = r
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(res, f, indent=1)
    report(res, out)


def report(res, out):
    lines = [f"# Llama and Qwen2 decoders against PyTorch ({res['cpu']}, {res['threads']} threads)", "",
             f"Greedy, prompts of {res['prompt']} tokens then {res['new']} new tokens a row, never stopping at eos; "
             f"medians of {res['rounds']} round(s), PyTorch and Halformer interleaved. Tokens/s: new tokens of the "
             f"batch over the whole call (prefill included). Bandwidth: a batch-1 decode step reads every weight "
             f"once (stored values × bytes of the precision / median step), against numpy's copy bandwidth "
             f"measured in the same run, {res['copy_gb_s']:.1f} GB/s.", "",
             "| model | batch | precision | PyTorch tok/s | Halformer tok/s | ratio | Halformer step ms | "
             "PyTorch step ms | batch-1 bandwidth |", "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for kind, r in res["models"].items():
        for key, rr in r["runs"].items():
            B, P = key.split("-")
            m = rr["median"]
            tt, ot = m["torch_tok_s"], m["ours_tok_s"]
            fmt = lambda v, f="%.2f": (f % v) if v is not None else "—"
            bw = rr.get("ours_bandwidth_fraction")
            lines.append(f"| {r['name']} | {B[1:]} | {P} | {fmt(tt)} | {fmt(ot)} | "
                         f"{fmt(ot / tt if tt and ot else None)}{'×' if tt and ot else ''} | "
                         f"{fmt(m['ours_step_ms'], '%.1f')} | {fmt(m['torch_step_ms'], '%.1f')} | "
                         f"{fmt(bw * 100 if bw else None, '%.0f')}{'%' if bw else ''} |")
        notes.append(f"{r['name']}: {r['stored_values'] / 1e6:.0f} M stored values; Halformer's logits against the "
                     f"PyTorch model: relative max difference {r['check_rel_max']:.1e}.")
    lines += [""] + notes + ["", "PyTorch's columns are empty where it was not run in that precision (see "
                              "--torch-precisions)."]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(res["models"]), figsize=(6 * len(res["models"]), 4), squeeze=False)
        for ax, (kind, r) in zip(axes[0], res["models"].items()):
            keys = list(r["runs"])
            x = np.arange(len(keys))
            tt = [r["runs"][k]["median"]["torch_tok_s"] or 0 for k in keys]
            ot = [r["runs"][k]["median"]["ours_tok_s"] or 0 for k in keys]
            ax.bar(x - 0.2, tt, 0.4, label="PyTorch")
            ax.bar(x + 0.2, ot, 0.4, label="Halformer")
            ax.set_xticks(x)
            ax.set_xticklabels(keys, rotation=30)
            ax.set_ylabel("new tokens / s")
            ax.set_title(r["name"])
            ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "llama.png"), dpi=100)
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
