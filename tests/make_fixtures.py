#!/usr/bin/python3
"""Golden fixtures for the runtime tests, made with PyTorch (Debian's python3-torch).

For each small random model below this writes tests/fixtures/<name>/:
  config.json, model.safetensors   the model, as the runtime loads it
  golden.json                      PyTorch's outputs for it:
    logits: padded batches → per-sequence pre-softmax logits (valid rows)
    greedy: argmax decoding, recomputing the whole prefix each step (no cache)
    beam:   beam search (the rule documented in runtime/src/decode.cpp),
            recomputing the whole prefix each step

The models are torch.nn.TransformerEncoder / TransformerDecoder stacks (what
torch.nn.Transformer is made of), with the state_dict names the runtime
expects. Weights stored as F16 or BF16 are rounded before the references are
computed, so the references are exact for the stored file.

Run:  /usr/bin/python3 tests/make_fixtures.py   (a few seconds; deterministic)
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")

BASE = dict(d_model=32, num_heads=4, d_ff=48, num_encoder_layers=2, num_decoder_layers=2,
            src_vocab_size=43, tgt_vocab_size=40, max_positions=24,
            positional_encoding="sinusoidal", norm_first=False, activation="relu",
            layer_norm_eps=1e-5, scale_embeddings=True, pad_id=0, bos_id=1, eos_id=2)

# name, architecture, config overrides, options
MODELS = [
    ("ed_post_relu", "encoder-decoder", {}, dict(final_norm=True, head="tied", dtype="F32")),
    ("ed_pre_gelu", "encoder-decoder",
     dict(norm_first=True, activation="gelu", positional_encoding="sinusoidal_concat", scale_embeddings=False),
     dict(final_norm=True, head="bias", dtype="F16")),
    ("ed_learned_tanh", "encoder-decoder",
     dict(activation="gelu_tanh", positional_encoding="learned", num_decoder_layers=1, layer_norm_eps=1e-6),
     dict(final_norm=False, head="nobias", dtype="BF16")),
    ("enc_head", "encoder", dict(norm_first=True, positional_encoding="learned"),
     dict(final_norm=True, head="bias", head_rows=5, dtype="F32")),
    ("enc_hidden", "encoder", dict(activation="gelu"), dict(final_norm=False, head=None, dtype="F32")),
    ("dec_pre_gelu", "decoder", dict(norm_first=True, activation="gelu", positional_encoding="learned"),
     dict(final_norm=True, head="tied", dtype="F32")),
    ("dec_post_relu", "decoder", dict(num_decoder_layers=3, scale_embeddings=False),
     dict(final_norm=False, head="bias", dtype="F16")),
]


def positions(kind, P, D):
    pos = torch.arange(P, dtype=torch.float64)[:, None]
    i = torch.arange(D // 2, dtype=torch.float64)[None, :]
    ang = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), 2 * i / D)
    pe = torch.zeros(P, D, dtype=torch.float64)
    if kind == "sinusoidal":
        pe[:, 0::2], pe[:, 1::2] = torch.sin(ang), torch.cos(ang)
    else:
        pe[:, : D // 2], pe[:, D // 2:] = torch.sin(ang), torch.cos(ang)
    return pe.float()


def activation(name):
    return {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}[name]


class Model(nn.Module):
    def __init__(self, arch, c, opt):
        super().__init__()
        self.arch, self.c, self.opt = arch, c, opt
        D, H, Fd, eps = c["d_model"], c["num_heads"], c["d_ff"], c["layer_norm_eps"]
        act = activation(c["activation"])

        def enc_layer():
            return nn.TransformerEncoderLayer(D, H, Fd, dropout=0.0, activation=act, layer_norm_eps=eps,
                                              batch_first=True, norm_first=c["norm_first"])

        norm = (lambda: nn.LayerNorm(D, eps=eps)) if opt["final_norm"] else (lambda: None)
        learned = c["positional_encoding"] == "learned"
        if arch != "decoder":
            self.encoder = nn.TransformerEncoder(enc_layer(), c["num_encoder_layers"], norm=norm(),
                                                 enable_nested_tensor=False)
            self.src_embed = nn.Embedding(c["src_vocab_size"], D)
            if learned:
                self.src_pos = nn.Embedding(c["max_positions"], D)
        if arch == "encoder-decoder":
            layer = nn.TransformerDecoderLayer(D, H, Fd, dropout=0.0, activation=act, layer_norm_eps=eps,
                                               batch_first=True, norm_first=c["norm_first"])
            self.decoder = nn.TransformerDecoder(layer, c["num_decoder_layers"], norm=norm())
        elif arch == "decoder":
            self.decoder = nn.TransformerEncoder(enc_layer(), c["num_decoder_layers"], norm=norm(),
                                                 enable_nested_tensor=False)
        if arch != "encoder":
            self.tgt_embed = nn.Embedding(c["tgt_vocab_size"], D)
            if learned:
                self.tgt_pos = nn.Embedding(c["max_positions"], D)
        rows = c["tgt_vocab_size"] if arch != "encoder" else opt.get("head_rows", 0)
        if opt["head"] in ("bias", "nobias"):
            self.generator = nn.Linear(D, rows, bias=opt["head"] == "bias")
        else:
            self.generator = None
        if not learned:
            self.register_buffer("pe", positions(c["positional_encoding"], c["max_positions"], D), persistent=False)
        # Random everything (PyTorch zero-initialises biases and sets norms to 1).
        g = torch.Generator().manual_seed(1234)
        for name, p in self.named_parameters():
            with torch.no_grad():
                if "norm" in name and name.endswith("weight"):
                    p.copy_(1 + 0.2 * (torch.rand(p.shape, generator=g) - 0.5))
                elif name.endswith("bias"):
                    p.copy_(0.2 * (torch.rand(p.shape, generator=g) - 0.5))
                elif "embed" in name or "_pos" in name:
                    p.copy_(torch.randn(p.shape, generator=g) * (1.0 if not c["scale_embeddings"] else D ** -0.5))
                else:
                    bound = math.sqrt(6.0 / (p.shape[0] + p.shape[-1]))
                    p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * bound)
                if opt["dtype"] == "F16":
                    p.copy_(p.half().float())
                elif opt["dtype"] == "BF16":
                    p.copy_(p.bfloat16().float())

    def embed(self, table, pos, tokens):
        x = table(tokens)
        if self.c["scale_embeddings"]:
            x = x * math.sqrt(self.c["d_model"])
        T = tokens.shape[1]
        pe = pos.weight[:T] if pos is not None else self.pe[:T]
        return x + pe[None]

    def head(self, x):
        if self.generator is not None:
            return self.generator(x)
        if self.arch == "encoder":
            return x
        return x @ self.tgt_embed.weight.t()

    def encode(self, src, src_pad):
        x = self.embed(self.src_embed, getattr(self, "src_pos", None), src)
        return self.encoder(x, src_key_padding_mask=src_pad)

    def decode(self, tgt, tgt_pad, mem=None, mem_pad=None):
        T = tgt.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        x = self.embed(self.tgt_embed, getattr(self, "tgt_pos", None), tgt)
        if self.arch == "encoder-decoder":
            y = self.decoder(x, mem, tgt_mask=causal, tgt_key_padding_mask=tgt_pad,
                             memory_key_padding_mask=mem_pad)
        else:
            y = self.decoder(x, mask=causal, src_key_padding_mask=tgt_pad)
        return self.head(y)


def pad(seqs, pad_id):
    T = max(len(s) for s in seqs)
    toks = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.ones(len(seqs), T, dtype=torch.bool)
    for b, s in enumerate(seqs):
        toks[b, : len(s)] = torch.tensor(s)
        mask[b, : len(s)] = False
    return toks, mask


def batch_logits(m, src, tgt):
    c = m.c
    if m.arch == "encoder":
        s, sp = pad(src, c["pad_id"])
        out = m.head(m.encode(s, sp))
        return [out[b, : len(q)] for b, q in enumerate(src)]
    if m.arch == "decoder":
        t, tp = pad(src, c["pad_id"])
        out = m.decode(t, tp)
        return [out[b, : len(q)] for b, q in enumerate(src)]
    s, sp = pad(src, c["pad_id"])
    t, tp = pad(tgt, c["pad_id"])
    out = m.decode(t, tp, m.encode(s, sp), sp)
    return [out[b, : len(q)] for b, q in enumerate(tgt)]


def next_logits(m, src, prefix):
    """Logits after `prefix`, recomputing everything (no cache)."""
    if m.arch == "encoder-decoder":
        s, sp = pad([src], m.c["pad_id"])
        t, tp = pad([prefix], m.c["pad_id"])
        return m.decode(t, tp, m.encode(s, sp), sp)[0, -1]
    t, tp = pad([prefix], m.c["pad_id"])
    return m.decode(t, tp)[0, -1]


def argmax_lowest(v):
    mx = v.max()
    return int(torch.nonzero(v == mx)[0, 0])


def greedy(m, src, max_new, eos):
    prefix = [m.c["bos_id"]] if m.arch == "encoder-decoder" else list(src)
    out = []
    for _ in range(max_new):
        tok = argmax_lowest(next_logits(m, src, prefix + out))
        out.append(tok)
        if tok == eos:
            break
    return out


def beam_search(m, src, K, alpha, n_best, max_new, eos):
    prefix = [m.c["bos_id"]] if m.arch == "encoder-decoder" else list(src)
    lp = lambda n: ((5.0 + n) / 6.0) ** alpha
    beams = [([], 0.0)]  # (generated tokens, score), in beam-slot order
    finished = []
    for step in range(max_new):
        cands = []
        for k, (hist, score) in enumerate(beams):
            logp = F.log_softmax(next_logits(m, src, prefix + hist), dim=-1)
            order = sorted(range(logp.shape[0]), key=lambda v: (-float(logp[v]), v))[: K + 1]
            for j, v in enumerate(order):
                cands.append((score + float(logp[v]), k, j, v))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        chosen = []
        for score, k, j, v in cands:
            if len(chosen) == K:
                break
            if v == eos:
                toks = beams[k][0] + [v]
                finished.append((toks, score / lp(len(toks))))
            else:
                chosen.append((beams[k][0] + [v], score))
        beams = chosen
        if len(finished) >= K or not beams:
            break
        if step == max_new - 1:
            finished += [(h, s / lp(len(h))) for h, s in beams]
    finished.sort(key=lambda f: -f[1])  # stable: ties keep their order
    return finished[:n_best]


def save_safetensors(path, tensors, dtype):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        if dtype == "F32":
            b = t.float().numpy().tobytes()
        elif dtype == "F16":
            b = t.half().numpy().tobytes()
        else:
            b = t.bfloat16().view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def config_json(c, arch):
    """The config.json fields of config `c` that architecture `arch` uses."""
    cfg = {k: c[k] for k in ["architecture"] + list(BASE.keys())}
    if arch == "encoder":
        for k in ("num_decoder_layers", "tgt_vocab_size", "bos_id", "eos_id"):
            cfg.pop(k)
    if arch == "decoder":
        for k in ("num_encoder_layers", "src_vocab_size"):
            cfg.pop(k)
    return cfg


def rounded(t):
    return [float("%.8g" % x) for x in t.flatten().tolist()]


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for name, arch, over, opt in MODELS:
        c = dict(BASE, **over)
        c["architecture"] = arch
        m = Model(arch, c, opt).eval()
        g = torch.Generator().manual_seed(99)
        rand_seq = lambda n, V: [int(x) for x in torch.randint(3, V, (n,), generator=g)]
        Vs, Vt = c["src_vocab_size"], c["tgt_vocab_size"]
        golden = {"logits": [], "greedy": [], "beam": []}
        with torch.no_grad():
            # Padded batches: lengths differ, and a length-1 sequence.
            for lens in ([7, 3, 1], [5], [c["max_positions"], 2]):
                if arch == "encoder-decoder":
                    src = [rand_seq(n, Vs) for n in lens]
                    tgt = [[c["bos_id"]] + rand_seq(max(1, n - 1) + (i % 2), Vt)[: c["max_positions"] - 1]
                           for i, n in enumerate(lens)]
                else:
                    src = [rand_seq(n, Vs if arch == "encoder" else Vt) for n in lens]
                    tgt = []
                out = batch_logits(m, src, tgt)
                golden["logits"].append({"src": src, "tgt": tgt, "logits": [rounded(o) for o in out],
                                         "width": int(out[0].shape[-1])})
            if arch != "encoder":
                # eos: a token greedy emits after a few steps, so decoding stops early.
                probe = rand_seq(6, Vs if arch == "encoder-decoder" else Vt)
                first = greedy(m, probe, 6, -1)
                c["eos_id"] = first[3]
                for n in (6, 1, 9):
                    src = probe if n == 6 else rand_seq(n, Vs if arch == "encoder-decoder" else Vt)
                    max_new = 10
                    golden["greedy"].append({"src": src, "max_new_tokens": max_new,
                                             "tokens": greedy(m, src, max_new, c["eos_id"])})
                    hyps = beam_search(m, src, 3, 0.6, 2, max_new, c["eos_id"])
                    golden["beam"].append({"src": src, "max_new_tokens": max_new, "beam": 3,
                                           "length_penalty": 0.6, "n_best": 2,
                                           "hyps": [h for h, _ in hyps], "scores": [s for _, s in hyps]})
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        cfg = config_json(c, arch)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        save_safetensors(os.path.join(d, "model.safetensors"), m.state_dict(), opt["dtype"])
        with open(os.path.join(d, "golden.json"), "w") as f:
            json.dump(golden, f, separators=(",", ":"))
        size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
        print(f"{name}: {sum(p.numel() for p in m.state_dict().values())} parameters, {size // 1024} KiB")


if __name__ == "__main__":
    main()
