#!/usr/bin/python3
"""Hugging Face checkpoints' speed against PyTorch in the same run (issue 25,
item 6): a BERT-base-shaped encoder at batch 8 × 128 tokens (goal: Halformer
≥ 1.5× PyTorch), a GPT-2-small-shaped decoder's KV-cached greedy decode at
batch 8 (goal ≥ 2×) and a T5-small-shaped encoder-decoder's greedy decode at
batch 8 (goal ≥ 2×).

  /usr/bin/python3 bench/hf_speed.py [--threads 2] [--rounds 5] [--models bert,gpt2,t5]
      [--halformer build/halformer] [--out DIR] [--bert-extra-batches 3] [--keep] [--quick]

Steps:
1. Writes random-weight checkpoints of the real shapes as transformers saves
   them (tests/make_hf_fixtures.py's names, configs and safetensors writer) in
   a temporary directory: BertModel (12 layers, hidden 768, 12 heads,
   intermediate 3072, vocab 30522, 512 positions, gelu; vocab.txt of 30522
   entries), GPT2LMHeadModel (12 layers, n_embd 768, 12 heads, vocab
   50257, 1024 positions, gelu_new, head tied to wte) and
   T5ForConditionalGeneration (t5-small: 6 + 6 layers, d_model 512, 8 heads
   of d_kv 64, d_ff 2048, relu, vocab 32128, 32 buckets / 128, head tied to
   `shared`). F32; matrices and embeddings N(0, 0.02), biases N(0, 0.02),
   LayerNorm / RMSNorm weights 1.
2. Builds PyTorch modules from the same tensors, written from transformers'
   modeling_bert.py / modeling_gpt2.py (the same math as ours), and checks
   them against Halformer once (`halformer embed` / `halformer logits`).
3. Rounds, interleaved in time (the order alternates each round): one
   PyTorch iteration, then the Halformer run(s), per model.
     bert  PyTorch: embeddings + 12 post-LN layers + mean pooling over the
           8 × 128 tokens (full attention mask), eager, inference_mode; also
           nn.TransformerEncoderLayer with the same weights (PyTorch's fused
           encoder-layer path, "fast path"), for reference.
           Halformer: `halformer embed DIR --batch 8 --out F.npy` on 8 texts
           that tokenize to exactly [CLS] + 126 words + [SEP] (checked), run
           twice: with 8 texts (one batch) and with 8 × (1 + K) texts; the
           difference of the two wall times / K is one batch's time (process
           start, model load, warm-up batch and tokenizer load cancel).
           `halformer bench` cannot time an encoder-only model ("bench: an
           encoder-only model does not generate").
     gpt2  PyTorch: prompt forward (8 × 32 tokens, logits at every position,
           what `halformer bench` reports as encoder_ms); greedy: prefill of
           the 32-token prompts (head at the last position) then 31 cached
           steps, 8 × 32 = 256 new tokens, preallocated K/V caches, argmax
           only; step = one cached step of the batch of 8.
           Halformer: `halformer bench DIR --batch 8 --src-len 32
           --new-tokens 32 --beam 1 --iters 1 --json`: greedy time =
           batch × new tokens / greedy_tokens_per_s.
     t5    PyTorch: the encoder over 8 sources of 32 tokens, the cross K/V
           once, then 32 cached greedy steps of the batch from
           decoder_start (8 × 32 = 256 new tokens, argmax only, never
           stopping at eos). Halformer: `halformer bench` as for gpt2 (an
           encoder-decoder's batch runs as one batch), greedy time = batch ×
           new tokens / greedy_tokens_per_s.
4. Medians over the rounds, PyTorch time / Halformer time (> 1: Halformer
   faster), the fraction of the goal met; writes DIR/report.md, hf.png and
   results.json (DIR: bench/results/hf-<cpu>-<date> unless --out).

--quick: 2 layers, hidden 64, 4 heads, intermediate 256 (vocabularies,
positions, batch and lengths as above), 2 rounds: a smoke test of the script.
Run it on a quiet machine: every number is wall time.
"""
import argparse
import datetime
import importlib.util
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# PyTorch's OpenMP threads are fixed when torch loads; PASSIVE as in
# bench/torch_baseline.py (the spinning default is much slower on 2-core VMs).
_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "2"
os.environ.setdefault("OMP_NUM_THREADS", _threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from report import cpu_name  # noqa: E402  (bench/report.py: the machine's name)

_spec = importlib.util.spec_from_file_location("make_hf_fixtures", os.path.join(ROOT, "tests", "make_hf_fixtures.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)

GOALS = {"bert": 1.5, "gpt2": 2.0, "t5": 2.0}
BATCH, BERT_LEN, PROMPT, NEW = 8, 128, 32, 32

FULL = {"bert": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
        "gpt2": dict(n_layer=12, n_embd=768, n_head=12),
        "t5": dict(num_layers=6, d_model=512, num_heads=8, d_kv=64, d_ff=2048)}
QUICK = {"bert": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=256),
         "gpt2": dict(n_layer=2, n_embd=64, n_head=4, n_inner=256),
         "t5": dict(num_layers=2, d_model=64, num_heads=4, d_kv=16, d_ff=256)}


# ----------------------------------------------------------------------------------------------------------
# Checkpoints


def random_weights(names, seed):
    """{name: float32 tensor} for make_hf_fixtures' (name, shape, kind) list; buffers and tied tensors left
    out, as save_pretrained leaves them out (current transformers: no attn.bias / position_ids buffers)."""
    g = torch.Generator().manual_seed(seed)
    W = {}
    for name, shape, kind in names:
        if kind in ("tied", "buffer"):
            continue
        W[name] = torch.ones(shape) if kind in ("ln_w", "rms_w") else torch.randn(shape, generator=g) * 0.02
    return W


def write_checkpoint(d, cfg, W):
    os.makedirs(d)
    fx.write_json(os.path.join(d, "config.json"), cfg)
    fx.save_weights(d, [(n, "F32", t) for n, t in W.items()])


def bert_vocab(V):
    """bert-base-uncased's special ids ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103), then
    lower-case words w0, w1, ... that WordPiece keeps whole."""
    toks = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    toks += [f"w{i}" for i in range(V - len(toks))]
    return toks


def make_bert(d, shapes, seed):
    cfg = fx.bert_config(architectures=["BertModel"], max_position_embeddings=512, vocab_size=30522,
                         torch_dtype="float32", transformers_version="4.36.2", **shapes)
    W = random_weights(fx.bert_names(cfg, "base"), seed)
    write_checkpoint(d, cfg, W)
    toks = bert_vocab(cfg["vocab_size"])
    with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in toks))
    fx.write_json(os.path.join(d, "tokenizer_config.json"),
                  {"cls_token": "[CLS]", "do_basic_tokenize": True, "do_lower_case": True, "mask_token": "[MASK]",
                   "model_max_length": 512, "never_split": None, "pad_token": "[PAD]", "sep_token": "[SEP]",
                   "strip_accents": None, "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer",
                   "unk_token": "[UNK]"})
    # BATCH texts of BERT_LEN - 2 random words: [CLS] + words + [SEP] = BERT_LEN ids each.
    g = torch.Generator().manual_seed(seed + 1)
    first = toks.index("[MASK]") + 1
    words = torch.randint(first, len(toks), (BATCH, BERT_LEN - 2), generator=g)
    texts = [" ".join(toks[i] for i in row.tolist()) for row in words]
    ids = torch.cat([torch.full((BATCH, 1), toks.index("[CLS]")), words, torch.full((BATCH, 1), toks.index("[SEP]"))],
                    1)
    return cfg, W, texts, ids


def make_gpt2(d, shapes, seed):
    cfg = fx.gpt2_config(n_positions=1024, n_ctx=1024, vocab_size=50257, torch_dtype="float32",
                         transformers_version="4.36.2", **shapes)
    W = random_weights(fx.gpt2_names(cfg, "transformer."), seed)
    write_checkpoint(d, cfg, W)
    g = torch.Generator().manual_seed(seed + 1)
    prompt = torch.randint(3, cfg["vocab_size"] - 1, (BATCH, PROMPT), generator=g)
    return cfg, W, prompt


def make_t5(d, shapes, seed):
    cfg = fx.t5_config(vocab_size=32128, relative_attention_num_buckets=32, relative_attention_max_distance=128,
                       feed_forward_proj="relu", tie_word_embeddings=True, n_positions=512,
                       torch_dtype="float32", transformers_version="4.36.2", **shapes)
    cfg = fx.t5_effective(cfg)
    W = random_weights(fx.t5_names(cfg, False), seed)
    write_checkpoint(d, cfg, W)
    g = torch.Generator().manual_seed(seed + 1)
    src = torch.randint(3, 32000, (BATCH, PROMPT), generator=g)
    src[:, -1] = cfg["eos_token_id"]
    return cfg, W, src


# ----------------------------------------------------------------------------------------------------------
# PyTorch models, written from transformers' modeling_bert.py, modeling_gpt2.py and modeling_t5.py


class Bert(nn.Module):
    """BertModel's last hidden state (BertEmbeddings, BertLayer × L), then mean pooling over the tokens (what
    `halformer embed` computes). Q, K and V in one projection (transformers has three nn.Linear of the same
    weights: the same math, one GEMM instead of three)."""

    def __init__(self, c, W):
        super().__init__()
        self.H, self.eps = c["num_attention_heads"], c["layer_norm_eps"]
        act = c["hidden_act"]
        self.act = {"gelu": F.gelu, "gelu_new": lambda x: F.gelu(x, approximate="tanh")}[act]
        e = "embeddings."
        self.we, self.pe = W[e + "word_embeddings.weight"], W[e + "position_embeddings.weight"]
        self.te = W[e + "token_type_embeddings.weight"]
        self.eln = (W[e + "LayerNorm.weight"], W[e + "LayerNorm.bias"])
        self.layers = []
        for i in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            s = p + "attention.self."
            self.layers.append(dict(
                qkv_w=torch.cat([W[s + n + ".weight"] for n in ("query", "key", "value")]).contiguous(),
                qkv_b=torch.cat([W[s + n + ".bias"] for n in ("query", "key", "value")]).contiguous(),
                o_w=W[p + "attention.output.dense.weight"], o_b=W[p + "attention.output.dense.bias"],
                ln1=(W[p + "attention.output.LayerNorm.weight"], W[p + "attention.output.LayerNorm.bias"]),
                i_w=W[p + "intermediate.dense.weight"], i_b=W[p + "intermediate.dense.bias"],
                f_w=W[p + "output.dense.weight"], f_b=W[p + "output.dense.bias"],
                ln2=(W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"])))

    def forward(self, ids, attention_mask):
        B, T = ids.shape
        D = self.we.shape[1]
        dh = D // self.H
        x = self.we[ids] + self.pe[:T][None] + self.te[0]
        x = F.layer_norm(x, (D,), *self.eln, self.eps)
        # get_extended_attention_mask: (1 - mask) * finfo.min, added to every head's scores
        ext = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for L in self.layers:
            q, k, v = F.linear(x, L["qkv_w"], L["qkv_b"]).view(B, T, 3, self.H, dh).permute(2, 0, 3, 1, 4)
            s = q @ k.transpose(-1, -2) / math.sqrt(dh) + ext
            a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, D)
            x = F.layer_norm(F.linear(a, L["o_w"], L["o_b"]) + x, (D,), *L["ln1"], self.eps)
            h = self.act(F.linear(x, L["i_w"], L["i_b"]))
            x = F.layer_norm(F.linear(h, L["f_w"], L["f_b"]) + x, (D,), *L["ln2"], self.eps)
        m = attention_mask[:, :, None].float()
        return (x * m).sum(1) / m.sum(1)


class BertFastPath(nn.Module):
    """The same encoder with nn.TransformerEncoderLayer (post-LN, gelu, eps 1e-12, batch_first): in eval and
    inference mode PyTorch 1.13 runs each layer as one fused op (torch._transformer_encoder_layer_fwd, what
    BetterTransformer uses for BERT)."""

    def __init__(self, c, W, ref):
        super().__init__()
        D, H, Fd = c["hidden_size"], c["num_attention_heads"], c["intermediate_size"]
        if c["hidden_act"] != "gelu":
            raise SystemExit("the fast path has relu and (erf) gelu only")
        self.ref = ref
        self.layers = nn.ModuleList()
        for L in ref.layers:
            layer = nn.TransformerEncoderLayer(D, H, Fd, dropout=0.0, activation="gelu",
                                               layer_norm_eps=c["layer_norm_eps"], batch_first=True)
            with torch.no_grad():
                layer.self_attn.in_proj_weight.copy_(L["qkv_w"])
                layer.self_attn.in_proj_bias.copy_(L["qkv_b"])
                layer.self_attn.out_proj.weight.copy_(L["o_w"])
                layer.self_attn.out_proj.bias.copy_(L["o_b"])
                layer.linear1.weight.copy_(L["i_w"])
                layer.linear1.bias.copy_(L["i_b"])
                layer.linear2.weight.copy_(L["f_w"])
                layer.linear2.bias.copy_(L["f_b"])
                layer.norm1.weight.copy_(L["ln1"][0])
                layer.norm1.bias.copy_(L["ln1"][1])
                layer.norm2.weight.copy_(L["ln2"][0])
                layer.norm2.bias.copy_(L["ln2"][1])
            self.layers.append(layer)
        self.requires_grad_(False)
        self.eval()

    def forward(self, ids):
        r = self.ref
        T, D = ids.shape[1], r.we.shape[1]
        x = F.layer_norm(r.we[ids] + r.pe[:T][None] + r.te[0], (D,), *r.eln, r.eps)
        for layer in self.layers:
            x = layer(x)  # full attention mask: no key padding mask
        return x.mean(1)


class GPT2:
    """GPT2LMHeadModel: wte + wpe, pre-LN blocks (Conv1D projections x @ W[in, out] + b as torch.addmm, the
    causal mask on the prompt, gelu_new as F.gelu(approximate="tanh"), the same function in one op), ln_f,
    head tied to wte. K/V caches preallocated per layer, written in place (transformers concatenates)."""

    def __init__(self, c, W):
        p = "transformer."
        self.H, self.eps = c["n_head"], c["layer_norm_epsilon"]
        self.wte, self.wpe = W[p + "wte.weight"], W[p + "wpe.weight"]
        self.lnf = (W[p + "ln_f.weight"], W[p + "ln_f.bias"])
        self.act = {"gelu_new": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu}[c["activation_function"]]
        self.blocks = []
        for i in range(c["n_layer"]):
            h = f"{p}h.{i}."
            self.blocks.append({k: W[h + k] for k in (
                "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                "mlp.c_proj.weight", "mlp.c_proj.bias")})
        P = c["n_positions"]
        self.causal = torch.tril(torch.ones(P, P, dtype=torch.bool))

    @staticmethod
    def conv1d(x, w, b):
        return torch.addmm(b, x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], w.shape[1])

    def new_cache(self, B, n):
        D = self.wte.shape[1]
        return [(torch.empty(B, self.H, n, D // self.H), torch.empty(B, self.H, n, D // self.H))
                for _ in self.blocks]

    def forward(self, ids, start, cache, all_positions=False):
        """ids [B, T] at positions start..start+T-1; returns logits [B, T, V] (all_positions) or [B, V]."""
        B, T = ids.shape
        D = self.wte.shape[1]
        dh = D // self.H
        x = self.wte[ids] + self.wpe[start:start + T][None]
        end = start + T
        mask = self.causal[start:end, :end] if T > 1 else None
        for blk, (kc, vc) in zip(self.blocks, cache):
            a = F.layer_norm(x, (D,), blk["ln_1.weight"], blk["ln_1.bias"], self.eps)
            q, k, v = self.conv1d(a, blk["attn.c_attn.weight"], blk["attn.c_attn.bias"]).view(
                B, T, 3, self.H, dh).permute(2, 0, 3, 1, 4)
            kc[:, :, start:end] = k
            vc[:, :, start:end] = v
            s = q @ kc[:, :, :end].transpose(-1, -2) / math.sqrt(dh)
            if mask is not None:
                s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
            o = (torch.softmax(s, -1) @ vc[:, :, :end]).transpose(1, 2).reshape(B, T, D)
            x = x + self.conv1d(o, blk["attn.c_proj.weight"], blk["attn.c_proj.bias"])
            m = F.layer_norm(x, (D,), blk["ln_2.weight"], blk["ln_2.bias"], self.eps)
            f = self.act(self.conv1d(m, blk["mlp.c_fc.weight"], blk["mlp.c_fc.bias"]))
            x = x + self.conv1d(f, blk["mlp.c_proj.weight"], blk["mlp.c_proj.bias"])
        if not all_positions:
            x = x[:, -1]
        x = F.layer_norm(x, (D,), *self.lnf, self.eps)
        return F.linear(x, self.wte)

    def logits(self, ids):
        return self.forward(ids, 0, self.new_cache(ids.shape[0], ids.shape[1]), all_positions=True)

    def greedy(self, prompt, n, step_ms):
        """n new tokens per row: the prompt's forward gives the first, n - 1 cached steps the rest."""
        B, P = prompt.shape
        cache = self.new_cache(B, P + n)
        tok = self.forward(prompt, 0, cache).argmax(-1)
        out = [tok]
        for i in range(n - 1):
            t0 = time.perf_counter()
            tok = self.forward(tok[:, None], P + i, cache).argmax(-1)
            step_ms.append((time.perf_counter() - t0) * 1e3)
            out.append(tok)
        return torch.stack(out, 1)


class T5:
    """T5ForConditionalGeneration (v1.0: relu, head tied to `shared`, the decoder output scaled by d_model**-0.5):
    RMSNorm pre-norm blocks without biases, scores not scaled, the position bias from block 0's bucket table
    (bidirectional in the encoder, causal in the decoder), cross-attention K/V computed once, the decoder's
    self-attention K/V caches preallocated and written in place."""

    def __init__(self, c, W):
        self.c, self.W = c, W
        self.H, self.dk, self.eps, self.D = c["num_heads"], c["d_kv"], c["layer_norm_epsilon"], c["d_model"]
        self.E = W["shared.weight"]

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def bias(self, stack, Tq, Tk, bidirectional, q0=0):
        table = self.W[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
        rel = torch.arange(Tk)[None, :] - (torch.arange(Tq)[:, None] + q0)
        b = fx.t5_bucket(rel, bidirectional, self.c["relative_attention_num_buckets"],
                         self.c["relative_attention_max_distance"])
        return table[b].permute(2, 0, 1)[None]  # [1, H, Tq, Tk]

    def heads(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.H, self.dk).transpose(1, 2)

    def attend(self, q, k, v, bias):
        s = q @ k.transpose(-1, -2)
        if bias is not None:
            s = s + bias
        o = torch.softmax(s, -1) @ v
        B, _, T, _ = o.shape
        return o.transpose(1, 2).reshape(B, T, self.H * self.dk)

    def ffn(self, p, x):
        return F.linear(F.relu(F.linear(x, self.W[p + "DenseReluDense.wi.weight"])), self.W[p + "DenseReluDense.wo.weight"])

    def encode(self, src):
        W, x = self.W, self.E[src]
        bias = self.bias("encoder", src.shape[1], src.shape[1], True)
        for i in range(self.c["num_layers"]):
            p = f"encoder.block.{i}.layer."
            n = self.rms(x, W[p + "0.layer_norm.weight"])
            a = p + "0.SelfAttention."
            q, k, v = (self.heads(F.linear(n, W[a + w + ".weight"])) for w in "qkv")
            x = x + F.linear(self.attend(q, k, v, bias), W[a + "o.weight"])
            x = x + self.ffn(p + "1.", self.rms(x, W[p + "1.layer_norm.weight"]))
        return self.rms(x, W["encoder.final_layer_norm.weight"])

    def greedy(self, src, n, step_ms):
        W, B, L = self.W, src.shape[0], self.c["num_decoder_layers"]
        mem = self.encode(src)
        cross = []
        for i in range(L):
            a = f"decoder.block.{i}.layer.1.EncDecAttention."
            cross.append((self.heads(F.linear(mem, W[a + "k.weight"])), self.heads(F.linear(mem, W[a + "v.weight"]))))
        cache = [(torch.empty(B, self.H, n, self.dk), torch.empty(B, self.H, n, self.dk)) for _ in range(L)]
        full_bias = self.bias("decoder", n, n, False)
        tok = torch.full((B,), self.c["decoder_start_token_id"], dtype=torch.long)
        out = []
        for t in range(n):
            t0 = time.perf_counter()
            x = self.E[tok][:, None]
            bias = full_bias[:, :, t:t + 1, :t + 1]
            for i in range(L):
                p = f"decoder.block.{i}.layer."
                nrm = self.rms(x, W[p + "0.layer_norm.weight"])
                a = p + "0.SelfAttention."
                q, k, v = (self.heads(F.linear(nrm, W[a + w + ".weight"])) for w in "qkv")
                kc, vc = cache[i]
                kc[:, :, t:t + 1] = k
                vc[:, :, t:t + 1] = v
                x = x + F.linear(self.attend(q, kc[:, :, :t + 1], vc[:, :, :t + 1], bias), W[a + "o.weight"])
                nrm = self.rms(x, W[p + "1.layer_norm.weight"])
                a = p + "1.EncDecAttention."
                q = self.heads(F.linear(nrm, W[a + "q.weight"]))
                x = x + F.linear(self.attend(q, cross[i][0], cross[i][1], None), W[a + "o.weight"])
                x = x + self.ffn(p + "2.", self.rms(x, W[p + "2.layer_norm.weight"]))
            y = self.rms(x[:, 0], W["decoder.final_layer_norm.weight"]) * self.D ** -0.5
            tok = F.linear(y, self.E).argmax(-1)
            if t > 0:
                step_ms.append((time.perf_counter() - t0) * 1e3)
            out.append(tok)
        return torch.stack(out, 1)


# ----------------------------------------------------------------------------------------------------------
# Halformer


def run(cmd, stdin=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")
    return p, wall


def hf_embed(a, d, texts, out):
    """Wall seconds of `halformer embed` over texts (batches of BATCH), writing float32 [texts, D] to out."""
    _, wall = run([a.halformer, "embed", d, "--batch", str(BATCH), "--threads", str(a.threads), "--out", out,
                   "--force"], stdin="".join(t + "\n" for t in texts))
    return wall


def hf_bench_gpt2(a, d):
    p, _ = run([a.halformer, "bench", d, "--batch", str(BATCH), "--src-len", str(PROMPT), "--new-tokens", str(NEW),
                "--beam", "1", "--iters", "1", "--threads", str(a.threads), "--json"])
    return json.loads(p.stdout)


def rel_diff(ours, ref):
    ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30))


# ----------------------------------------------------------------------------------------------------------


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 5; --quick: 2)")
    ap.add_argument("--quick", action="store_true", help="tiny shapes (2 layers, hidden 64): a smoke test")
    ap.add_argument("--out", help="output folder (default bench/results/hf-<cpu>-<date>)")
    ap.add_argument("--halformer", default="build/halformer")
    ap.add_argument("--models", default="bert,gpt2,t5", help="comma-separated: bert, gpt2, t5")
    ap.add_argument("--bert-extra-batches", type=int, default=3,
                    help="K: halformer embed is timed with 1 and 1 + K batches; the difference / K is one batch")
    ap.add_argument("--keep", action="store_true", help="keep the temporary checkpoints (their path is printed)")
    a = ap.parse_args()
    rounds = a.rounds or (2 if a.quick else 5)
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in models:
        if m not in GOALS:
            raise SystemExit(f"unknown model {m!r}: bert, gpt2, t5")
    if a.bert_extra_batches < 1 or rounds < 1:
        raise SystemExit("--bert-extra-batches and --rounds must be >= 1")
    if not os.path.isabs(a.halformer) and not os.path.exists(a.halformer):
        a.halformer = os.path.join(ROOT, a.halformer)
    if not os.access(a.halformer, os.X_OK):
        raise SystemExit(f"{a.halformer} is missing: cmake --build build --target halformer")
    a.halformer = os.path.abspath(a.halformer)
    if os.environ["OMP_NUM_THREADS"] != str(a.threads):
        print(f"note: OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} from the environment, --threads {a.threads}",
              file=sys.stderr)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    machine = cpu_name()
    date = datetime.date.today().isoformat()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":(exclude)bench/results"], capture_output=True, text=True).stdout.strip()
    slug = re.sub(r"[^a-z0-9]+", "-", machine.lower()).strip("-")[:40]
    outdir = a.out or os.path.join(ROOT, "bench", "results", f"hf-{slug}-{date}")
    os.makedirs(outdir, exist_ok=True)
    load_avg = os.getloadavg()
    shapes = QUICK if a.quick else FULL
    tmp = tempfile.mkdtemp(prefix="hf_speed-")
    K = a.bert_extra_batches
    res = {"machine": machine, "cpus": os.cpu_count(), "date": date, "commit": commit, "dirty": bool(dirty),
           "threads": a.threads, "rounds": rounds, "quick": a.quick, "torch": torch.__version__,
           "omp": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")},
           "load_avg_before": load_avg, "command": " ".join(["/usr/bin/python3", "bench/hf_speed.py"] + sys.argv[1:]),
           "models": {}}
    try:
        work = {}
        inference = torch.inference_mode
        with torch.no_grad():  # models built here; every forward below runs in inference mode
            if "bert" in models:
                d = os.path.join(tmp, "bert")
                print(f"writing {d}", file=sys.stderr, flush=True)
                cfg, W, texts, ids = make_bert(d, shapes["bert"], 11)
                ref = Bert(cfg, W)
                fast = BertFastPath(cfg, W, ref)
                mask = torch.ones_like(ids)
                npy = os.path.join(tmp, "bert.npy")
                # Check: Halformer's embedding of the texts is PyTorch's of the intended ids (so the texts are
                # exactly BERT_LEN tokens, and both run the same model).
                hf_embed(a, d, texts, npy)
                with inference():
                    want = ref(ids, mask)
                    with torch.profiler.profile() as prof:
                        got_fast = fast(ids)
                check = {"embed_vs_pytorch_rel": rel_diff(np.load(npy), want.numpy()),
                         "fastpath_vs_pytorch_rel": rel_diff(got_fast.numpy(), want.numpy()),
                         "fastpath_fused_op_ran": any(e.name == "aten::_transformer_encoder_layer_fwd"
                                                      for e in prof.events())}
                print(f"bert check: {check}", file=sys.stderr, flush=True)
                if check["embed_vs_pytorch_rel"] > 1e-3:
                    raise SystemExit("bert: halformer embed differs from the PyTorch reference: " + json.dumps(check))
                params = sum(t.numel() for t in W.values())
                work["bert"] = dict(dir=d, cfg=cfg, ref=ref, fast=fast, texts=texts, ids=ids, mask=mask, npy=npy)
                res["models"]["bert"] = {"config": {k: cfg[k] for k in (
                    "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size",
                    "max_position_embeddings", "hidden_act")}, "parameters": params, "check": check,
                    "pytorch_ms": [], "pytorch_fastpath_ms": [], "halformer_ms": [], "halformer_wall_1_s": [],
                    "halformer_wall_1k_s": []}
            if "gpt2" in models:
                d = os.path.join(tmp, "gpt2")
                print(f"writing {d}", file=sys.stderr, flush=True)
                cfg, W, prompt = make_gpt2(d, shapes["gpt2"], 23)
                g = GPT2(cfg, W)
                npy = os.path.join(tmp, "gpt2.npy")
                run([a.halformer, "logits", d, "--src", ",".join(map(str, prompt[0].tolist())), "--out", npy,
                     "--force", "--threads", str(a.threads)])
                with inference():
                    want = g.logits(prompt[:1])[0]
                check = {"logits_vs_pytorch_rel": rel_diff(np.load(npy), want.numpy())}
                print(f"gpt2 check: {check}", file=sys.stderr, flush=True)
                if check["logits_vs_pytorch_rel"] > 1e-3:
                    raise SystemExit("gpt2: halformer logits differ from the PyTorch reference: " + json.dumps(check))
                params = sum(t.numel() for t in W.values())
                work["gpt2"] = dict(dir=d, cfg=cfg, g=g, prompt=prompt)
                res["models"]["gpt2"] = {"config": {k: cfg[k] for k in (
                    "n_layer", "n_embd", "n_head", "n_inner", "vocab_size", "n_positions", "activation_function")},
                    "parameters": params, "check": check,
                    "pytorch_prompt_ms": [], "pytorch_greedy_ms": [], "pytorch_step_ms": [],
                    "halformer_prompt_ms": [], "halformer_greedy_ms": [], "halformer_step_ms": [],
                    "halformer_runs": []}

            if "t5" in models:
                d = os.path.join(tmp, "t5")
                print(f"writing {d}", file=sys.stderr, flush=True)
                cfg, W, src = make_t5(d, shapes["t5"], 37)
                t5 = T5(cfg, W)
                # Check: Halformer's greedy tokens for the first source are PyTorch's.
                p, _ = run([a.halformer, "generate", d, "--src", ",".join(map(str, src[0].tolist())),
                            "--max-new-tokens", "8", "--threads", str(a.threads)])
                ours = [int(x) for x in p.stdout.splitlines()[0].split()] if p.stdout.strip() else []
                with inference():
                    want = t5.greedy(src[:1], 8, [])[0].tolist()
                eos = cfg["eos_token_id"]
                want = want[:want.index(eos) + 1] if eos in want else want
                check = {"greedy_tokens_equal": ours == want, "ours": ours, "pytorch": want}
                print(f"t5 check: {check}", file=sys.stderr, flush=True)
                if not check["greedy_tokens_equal"]:
                    raise SystemExit("t5: halformer generate differs from the PyTorch reference: " + json.dumps(check))
                params = sum(t.numel() for t in W.values())
                work["t5"] = dict(dir=d, cfg=cfg, t5=t5, src=src)
                res["models"]["t5"] = {"config": {k: cfg[k] for k in (
                    "num_layers", "num_decoder_layers", "d_model", "num_heads", "d_kv", "d_ff", "vocab_size",
                    "feed_forward_proj")}, "parameters": params, "check": check,
                    "pytorch_greedy_ms": [], "pytorch_step_ms": [], "halformer_greedy_ms": [], "halformer_step_ms": [],
                    "halformer_encoder_ms": [], "halformer_runs": []}

        with torch.inference_mode():
            # Warm-up (first calls allocate, start threads, pick kernels).
            if "bert" in work:
                w = work["bert"]
                w["ref"](w["ids"], w["mask"])
                w["fast"](w["ids"])
            if "gpt2" in work:
                w = work["gpt2"]
                w["g"].greedy(w["prompt"], 2, [])
                w["g"].logits(w["prompt"])
            if "t5" in work:
                work["t5"]["t5"].greedy(work["t5"]["src"], 2, [])

            def torch_bert(r):
                w = work["bert"]
                t0 = time.perf_counter()
                w["ref"](w["ids"], w["mask"])
                r["pytorch_ms"].append((time.perf_counter() - t0) * 1e3)
                t0 = time.perf_counter()
                w["fast"](w["ids"])
                r["pytorch_fastpath_ms"].append((time.perf_counter() - t0) * 1e3)

            def ours_bert(r):
                w = work["bert"]
                one = hf_embed(a, w["dir"], w["texts"], w["npy"])
                more = hf_embed(a, w["dir"], w["texts"] * (1 + K), w["npy"])
                r["halformer_wall_1_s"].append(one)
                r["halformer_wall_1k_s"].append(more)
                r["halformer_ms"].append((more - one) / K * 1e3)

            def torch_gpt2(r):
                w = work["gpt2"]
                t0 = time.perf_counter()
                w["g"].logits(w["prompt"])
                r["pytorch_prompt_ms"].append((time.perf_counter() - t0) * 1e3)
                steps = []
                t0 = time.perf_counter()
                w["g"].greedy(w["prompt"], NEW, steps)
                r["pytorch_greedy_ms"].append((time.perf_counter() - t0) * 1e3)
                r["pytorch_step_ms"].append(med(steps))

            def ours_gpt2(r):
                j = hf_bench_gpt2(a, work["gpt2"]["dir"])
                r["halformer_runs"].append(j)
                r["halformer_prompt_ms"].append(j["encoder_ms"])
                r["halformer_greedy_ms"].append(BATCH * NEW / j["greedy_tokens_per_s"] * 1e3)
                r["halformer_step_ms"].append(j["decoder_step_ms"])

            def torch_t5(r):
                w = work["t5"]
                steps = []
                t0 = time.perf_counter()
                w["t5"].greedy(w["src"], NEW, steps)
                r["pytorch_greedy_ms"].append((time.perf_counter() - t0) * 1e3)
                r["pytorch_step_ms"].append(med(steps))

            def ours_t5(r):
                j = hf_bench_gpt2(a, work["t5"]["dir"])
                r["halformer_runs"].append(j)
                r["halformer_greedy_ms"].append(BATCH * NEW / j["greedy_tokens_per_s"] * 1e3)
                r["halformer_step_ms"].append(j["decoder_step_ms"])
                r["halformer_encoder_ms"].append(j["encoder_ms"])

            sides = {"bert": (torch_bert, ours_bert), "gpt2": (torch_gpt2, ours_gpt2), "t5": (torch_t5, ours_t5)}
            for i in range(rounds):
                for m in models:
                    print(f"\rround {i + 1}/{rounds}: {m}    ", end="", file=sys.stderr, flush=True)
                    t_fn, h_fn = sides[m]
                    order = (t_fn, h_fn) if i % 2 == 0 else (h_fn, t_fn)  # alternate who goes first
                    for fn in order:
                        fn(res["models"][m])
            print("", file=sys.stderr)
    finally:
        if a.keep:
            print(f"checkpoints kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    # Medians, ratios (PyTorch time / Halformer time), goals.
    rows = []  # (model, workload, plot label, pytorch ms, halformer ms, ratio, goal or None)
    if "bert" in res["models"]:
        r = res["models"]["bert"]
        t, tf, h = med(r["pytorch_ms"]), med(r["pytorch_fastpath_ms"]), med(r["halformer_ms"])
        r["median"] = {"pytorch_ms": t, "pytorch_fastpath_ms": tf, "halformer_ms": h, "ratio": t / h,
                       "ratio_vs_fastpath": tf / h, "goal": GOALS["bert"], "goal_fraction": t / h / GOALS["bert"]}
        rows.append(("bert", f"encoder forward {BATCH} × {BERT_LEN} (goal)", "BERT encoder", t, h, t / h,
                     GOALS["bert"]))
        rows.append(("bert", "the same, PyTorch's fast path (nn.TransformerEncoderLayer)",
                     "BERT encoder vs fast path", tf, h, tf / h, None))
    if "gpt2" in res["models"]:
        r = res["models"]["gpt2"]
        tg, hg = med(r["pytorch_greedy_ms"]), med(r["halformer_greedy_ms"])
        tp, hp = med(r["pytorch_prompt_ms"]), med(r["halformer_prompt_ms"])
        ts, hs = med(r["pytorch_step_ms"]), med(r["halformer_step_ms"])
        r["median"] = {"pytorch_greedy_ms": tg, "halformer_greedy_ms": hg, "ratio": tg / hg,
                       "pytorch_tokens_per_s": BATCH * NEW / tg * 1e3, "halformer_tokens_per_s": BATCH * NEW / hg * 1e3,
                       "goal": GOALS["gpt2"], "goal_fraction": tg / hg / GOALS["gpt2"],
                       "pytorch_prompt_ms": tp, "halformer_prompt_ms": hp, "prompt_ratio": tp / hp,
                       "pytorch_step_ms": ts, "halformer_step_ms": hs, "step_ratio": ts / hs,
                       "halformer_variant": r["halformer_runs"][0].get("variant"),
                       "halformer_peak_rss_mb": max(x["peak_rss_mb"] for x in r["halformer_runs"])}
        rows.append(("gpt2", f"greedy, {BATCH} × ({PROMPT} prompt + {NEW} new) (goal)", "GPT-2 greedy", tg, hg,
                     tg / hg, GOALS["gpt2"]))
        rows.append(("gpt2", f"prompt forward {BATCH} × {PROMPT}, logits at every position", "GPT-2 prompt forward",
                     tp, hp, tp / hp, None))
        rows.append(("gpt2", f"one cached step of the batch of {BATCH}", "GPT-2 step", ts, hs, ts / hs, None))
    if "t5" in res["models"]:
        r = res["models"]["t5"]
        tg, hg = med(r["pytorch_greedy_ms"]), med(r["halformer_greedy_ms"])
        ts, hs = med(r["pytorch_step_ms"]), med(r["halformer_step_ms"])
        r["median"] = {"pytorch_greedy_ms": tg, "halformer_greedy_ms": hg, "ratio": tg / hg,
                       "pytorch_tokens_per_s": BATCH * NEW / tg * 1e3, "halformer_tokens_per_s": BATCH * NEW / hg * 1e3,
                       "goal": GOALS["t5"], "goal_fraction": tg / hg / GOALS["t5"],
                       "pytorch_step_ms": ts, "halformer_step_ms": hs, "step_ratio": ts / hs}
        rows.append(("t5", f"greedy, {BATCH} × ({PROMPT} source → {NEW} new) (goal)", "T5 greedy", tg, hg, tg / hg,
                     GOALS["t5"]))
        rows.append(("t5", f"one cached decoder step of the batch of {BATCH}", "T5 step", ts, hs, ts / hs, None))
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(res, f, indent=1)

    def goal_text(ratio, goal):
        if goal is None:
            return "—"
        return (f"met ({ratio / goal:.2f} of the goal)" if ratio >= goal else
                f"missed: {ratio / goal:.2f} of the goal ({goal / ratio:.2f}× short)")

    title = "Hugging Face checkpoints against PyTorch" + (" (--quick: tiny shapes, not a result)" if a.quick else "")
    lines = [f"# {title}: {machine}", "",
             f"- date {date}, machine {machine} ({res['cpus']} CPUs), commit `{commit}`"
             f"{' (with uncommitted changes)' if dirty else ''}, {a.threads} threads for both "
             f"(PyTorch: OMP_NUM_THREADS={res['omp']['OMP_NUM_THREADS']}, OMP_WAIT_POLICY="
             f"{res['omp']['OMP_WAIT_POLICY']}, torch.set_num_threads({a.threads}); Halformer: --threads {a.threads})",
             f"- PyTorch {torch.__version__} (fp32, eager, inference_mode) against "
             f"`{os.path.relpath(a.halformer, ROOT)}`"
             + (f" (kernel variant {res['models']['gpt2']['median']['halformer_variant']})" if "gpt2" in res["models"]
                else "") + f"; load average before the run {load_avg[0]:.2f} / {load_avg[1]:.2f} / {load_avg[2]:.2f}",
             f"- command: `{res['command']}`",
             f"- {rounds} rounds, interleaved in time: per round and model one PyTorch iteration and the Halformer "
             "run(s), the order alternating each round; medians over the rounds; ratio = PyTorch ms / Halformer ms "
             "(> 1: Halformer faster)", ""]
    lines += ["## Models", "",
              "Random F32 weights written as transformers saves them (config.json, model.safetensors; biases and "
              "matrices N(0, 0.02), LayerNorm weights 1); PyTorch runs the same tensors.", ""]
    for m, r in res["models"].items():
        lines.append(f"- {m}: {json.dumps(r['config'])}, {r['parameters']:,} parameters in the file; "
                     f"check: {json.dumps(r['check'])} (max |ours − PyTorch| / max |PyTorch|)")
    lines += ["", "## Results (median ms)", "",
              "| model | workload | PyTorch ms | Halformer ms | PyTorch / Halformer | goal |",
              "|---|---|---|---|---|---|"]
    for m, wl, _, t, h, ratio, goal in rows:
        lines.append(f"| {m} | {wl} | {t:.2f} | {h:.2f} | {ratio:.2f}× | "
                     f"{'≥ %.1f×: ' % goal + goal_text(ratio, goal) if goal else '—'} |")
    if "gpt2" in res["models"]:
        g = res["models"]["gpt2"]["median"]
        lines += ["", f"GPT-2 greedy tokens/s ({BATCH} × {NEW} new tokens / greedy time): PyTorch "
                      f"{g['pytorch_tokens_per_s']:.1f}, Halformer {g['halformer_tokens_per_s']:.1f}; Halformer's "
                      f"peak RSS (halformer bench) {g['halformer_peak_rss_mb']:.0f} MB."]
    lines += ["", "## What is measured", "",
              f"- **bert** — PyTorch: embeddings (word + position + token type 0, LayerNorm), every layer "
              f"(Q|K|V in one projection, scores + the extended attention mask of an all-ones mask, softmax, output "
              f"projection, LayerNorm(x + ·), intermediate + gelu, output + LayerNorm) and mean pooling, on "
              f"{BATCH} × {BERT_LEN} ids; no pooler, no tokenizer. The fast-path row runs the same weights through "
              "nn.TransformerEncoderLayer (PyTorch 1.13's fused inference path), for reference; the goal is taken "
              "against the transformers-style module. Halformer: `halformer bench` refuses an encoder-only model, so "
              f"`halformer embed DIR --batch {BATCH} --out F.npy` is run with the {BATCH} texts (each "
              f"[CLS] + {BERT_LEN - 2} words + [SEP], checked above) and with them {1 + K} times over; "
              f"(wall(1 + {K} batches) − wall(1 batch)) / {K} is one batch: tokenizing {BATCH} texts, the encoder "
              "forward, mean pooling (a kernel) and copying [8, d] out. Process start, model load, the tokenizer's "
              "load and the first (warm-up) batch cancel; the .npy write grows by a few KB a batch.",
              f"- **gpt2** — greedy: PyTorch's prefill of the {BATCH} prompts of {PROMPT} tokens (head at the last "
              f"position only), then {NEW - 1} cached steps of the batch, argmax each; {BATCH} × {NEW} = "
              f"{BATCH * NEW} new tokens, prompt excluded from the count, never stopping at eos. Halformer: "
              f"`halformer bench DIR --batch {BATCH} --src-len {PROMPT} --new-tokens {NEW} --beam 1 --iters 1 "
              "--json`, greedy time = batch × new tokens / greedy_tokens_per_s (its Model::generate call, prefill "
              "included; process start, load and warm-up excluded). Prompt forward: the batch's forward with "
              f"logits at all {PROMPT} positions (bench's encoder_ms for a decoder-only model is Model::logits).",
              f"- **t5** — greedy: PyTorch's encoder over the {BATCH} sources of {PROMPT} tokens (the last one eos), "
              f"the cross-attention K/V once per layer, then {NEW} cached steps of the batch from decoder_start, "
              f"argmax each, never stopping at eos: {BATCH} × {NEW} = {BATCH * NEW} new tokens. Halformer: "
              f"`halformer bench DIR --batch {BATCH} --src-len {PROMPT} --new-tokens {NEW} --beam 1 --iters 1 "
              "--json` (its random sources, the encoder included), greedy time as for gpt2. The step row: the "
              "median cached step of the batch, both sides.",
              "", "## Notes on `halformer bench` against the goals' definitions", "",
              "- It cannot time an encoder-only model: `bench: an encoder-only model does not generate` (cli/"
              "bench.cpp checks Architecture::Encoder before timing), so BERT is timed through `embed` by "
              "differencing, above.",
              "- For a decoder-only model Model::generate runs prompts of one length as one batch (runtime/src/"
              "decode.cpp: grouped by length, as many as the memory budget holds; prompts of different lengths "
              "still run group after group, as the kernels take one start position per call): the bench's 8 "
              "prompts of 32 tokens are one batch of 8, like PyTorch's, and its decoder_step_ms is a step of that "
              "batch.",
              "- `--beam 1` makes bench's beam timing a second greedy run (not used here); its default beam 4 would "
              "add a beam search to every run."]
    lines += ["", "## Every round", ""]
    for m, r in res["models"].items():
        for k, v in r.items():
            if isinstance(v, list) and v and not isinstance(v[0], dict):
                lines.append(f"- {m} {k}: " + ", ".join(f"{x:.3f}" for x in v))
    lines += ["", "Raw numbers (and every `halformer bench` JSON): results.json.", ""]
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("\n".join(lines))

    # Plot: ratios against the goals, and every round's times.
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 1 + len(res["models"]), figsize=(5 + 4.5 * len(res["models"]), 4.6))
    ax = axes[0]
    names = [x[2] for x in rows]
    ratios = [x[5] for x in rows]
    goals = [x[6] for x in rows]
    ax.barh(range(len(rows)), ratios, color=["tab:green" if r >= (g or 1.0) else "tab:red"
                                             for r, g in zip(ratios, goals)])
    for y, (r, g) in enumerate(zip(ratios, goals)):
        if g:
            ax.plot([g, g], [y - 0.4, y + 0.4], color="black", lw=2)
        ax.annotate(f"{r:.2f}×", (r, y), va="center", ha="left", fontsize=8)
    ax.axvline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("PyTorch ms / Halformer ms (black: goal)")
    ax.set_title(f"{machine}, {a.threads} threads" + (" (--quick)" if a.quick else ""), fontsize=9)
    for ax, (m, r) in zip(axes[1:], res["models"].items()):
        if m == "bert":
            series = [("PyTorch", r["pytorch_ms"]), ("PyTorch fast path", r["pytorch_fastpath_ms"]),
                      ("Halformer", r["halformer_ms"])]
            ax.set_title(f"BERT encoder {BATCH} × {BERT_LEN}, every round", fontsize=9)
        else:
            series = [("PyTorch greedy", r["pytorch_greedy_ms"]), ("Halformer greedy", r["halformer_greedy_ms"])]
            what = "GPT-2" if m == "gpt2" else "T5"
            ax.set_title(f"{what} greedy {BATCH} × ({PROMPT} + {NEW}), every round", fontsize=9)
        for label, v in series:
            ax.plot(range(1, len(v) + 1), v, marker="o", label=label)
        ax.set_xlabel("round")
        ax.set_ylabel("ms")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "hf.png"), dpi=110)

    print("\n".join(lines[: lines.index("## What is measured")]))
    print(f"wrote {outdir}/report.md, hf.png, results.json")


if __name__ == "__main__":
    main()
