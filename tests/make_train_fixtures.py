#!/usr/bin/python3
"""Golden TRAINING fixtures (loss, gradients, optimizer) made with PyTorch autograd
(Debian's python3-torch, 1.13). The models are tests/make_fixtures.py's Model
(imported, same random init, same state_dict names, same config.json).

Run:  /usr/bin/python3 tests/make_train_fixtures.py   (a few seconds; deterministic)

Writes tests/fixtures/train/<model>/ for the models in MODELS below (all F32,
dropout 0, d_model 32, 4 heads, d_ff 48, 2 + 2 layers, vocabularies 43 / 40):
  config.json, model.safetensors   the model, exactly as make_fixtures.py writes it
  batch.json   {"src": [[ids]...], "tgt": [[ids]...], "label_smoothing": 0.1,
                "loss": <float>, "tokens": <int>}
  grads.safetensors   d loss / d param for every tensor of model.safetensors
                      (same names and shapes, F32)

Batch conventions (what the trainer does, and what the reference computes):
  encoder-decoder  src: source ids; tgt: target ids WITHOUT bos/eos. The
                   decoder is fed [bos_id] + tgt and predicts tgt + [eos_id]
                   (teacher forcing: the target shifted right), len(tgt) + 1
                   predicted positions per pair. The encoder sees src; the
                   decoder's cross-attention masks the source's pad keys.
  decoder-only     src: the sequences; tgt: []. The model is fed seq[:-1] and
                   predicts seq[1:] (len(seq) - 1 positions; no bos/eos added).
  encoder-only     src: the ids; tgt: one label in [0, head rows) per src
                   token; every src position is predicted. (Label 0 is a real
                   label here: positions, not label values, say what is pad.)
  Sequences are right-padded with pad_id (0) to the longest in the batch;
  padded positions are masked as keys (key padding mask; plus the causal mask
  in decoders) and are excluded from the loss.
  loss = sum over the non-pad predicted positions of the label-smoothed
         cross-entropy, divided by their count ("tokens"):
           F.cross_entropy(logits[valid], target[valid], label_smoothing=0.1,
                           reduction="sum") / tokens
         PyTorch's smoothing: with eps = 0.1 and V logits (the full vocabulary,
         pad, bos and eos included; the 5 head rows for enc_head),
           per-position loss = (1 - eps) * -log p[target] + (eps / V) * sum_v -log p[v]
  Logits: generator(x) (nn.Linear) when the model has one; otherwise the tied
  head x @ tgt_embed.weight^T (no bias, no sqrt(d_model) scale; the input
  embedding IS scaled by sqrt(d_model) when scale_embeddings), so
  tgt_embed.weight's gradient is the sum of the embedding-lookup and head
  contributions.
  "loss" is the float32 forward value; the gradients are float32 autograd.
  As a double check, each model's gradients are compared with central finite
  differences in float64 on a few entries of a few parameters (printed only).

Writes tests/fixtures/train/adam/: an optimizer fixture on three plain tensors.
  params.safetensors        "a" [7,5], "b" [13], "c" [3,4,2], F32, random
  grads_<s>.safetensors     s = 1..10, the gradients given at step s (F32):
                            random normal (scale 1, or 0.05 on steps 2, 6, 9),
                            about 10% exact zeros, a[0,0] = 0 on every step,
                            b[3] = 1e6 on step 5, c[1,2,1] = 1e-12 on every step
  after_<s>.safetensors     parameters after step s of
                            torch.optim.Adam(lr=1.0, betas=(0.9, 0.98), eps=1e-9)
                            under LambdaLR(lambda e: lr_paper(e + 1))
  after_clip_wd_<s>.safetensors  the same, but Adam(..., weight_decay=0.01) and
                            torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
                            applied to the gradients before each step
  schedule.json             {"d_model": 32, "warmup": 4, "lr": [lr at steps 1..10]}
  lr_paper(step) = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step = 1, 2, ...
  (LambdaLR passes the epoch counter, 0 at the first step, hence e + 1; the
  base lr is 1.0, so the lr used at step s is lr_paper(s).)
  Adam as torch 1.13 computes it (float32), at step t with lr_t = lr_paper(t):
    g  = grad (+ weight_decay * param in the clip_wd variant: Adam's L2 form,
         added to the already clipped gradient, NOT AdamW's decoupled decay)
    m  = 0.9 * m + 0.1 * g;   v = 0.98 * v + 0.02 * g * g      (m = v = 0 at first)
    param -= (lr_t / (1 - 0.9^t)) * m / (sqrt(v) / sqrt(1 - 0.98^t) + 1e-9)
  clip_grad_norm_: total = L2 norm over all three gradients together;
    coef = 1.0 / (total + 1e-6); if coef < 1 every gradient is multiplied by coef.
"""
import copy
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import BASE, Model, config_json, pad, save_safetensors  # noqa: E402

OUT = os.path.join(HERE, "fixtures", "train")
LABEL_SMOOTHING = 0.1

# name, architecture, config overrides, options (as in make_fixtures.MODELS)
MODELS = [
    ("ed_post_relu", "encoder-decoder", {}, dict(final_norm=True, head="tied", dtype="F32")),
    ("ed_pre_gelu", "encoder-decoder",
     dict(norm_first=True, activation="gelu", positional_encoding="sinusoidal_concat", scale_embeddings=False),
     dict(final_norm=True, head="bias", dtype="F32")),
    ("dec_pre_gelu_learned", "decoder", dict(norm_first=True, activation="gelu", positional_encoding="learned"),
     dict(final_norm=True, head="tied", dtype="F32")),
    ("dec_post_tanh", "decoder", dict(activation="gelu_tanh"),
     dict(final_norm=False, head="nobias", dtype="F32")),
    ("enc_head", "encoder", dict(positional_encoding="learned"),
     dict(final_norm=True, head="bias", head_rows=5, dtype="F32")),
]


def make_batch(arch, c, opt, g):
    rand_seq = lambda n, lo, hi: [int(x) for x in torch.randint(lo, hi, (n,), generator=g)]
    if arch == "encoder-decoder":
        # source lengths 7, 1, 4; target lengths 4, 6, 1 (decoder inputs 5, 7, 2)
        src = [rand_seq(n, 3, c["src_vocab_size"]) for n in (7, 1, 4)]
        tgt = [rand_seq(n, 3, c["tgt_vocab_size"]) for n in (4, 6, 1)]
    elif arch == "decoder":
        src = [rand_seq(n, 3, c["tgt_vocab_size"]) for n in (9, 2, 6)]
        tgt = []
    else:
        src = [rand_seq(n, 3, c["src_vocab_size"]) for n in (7, 1, 4)]
        tgt = [rand_seq(len(s), 0, opt["head_rows"]) for s in src]
    return src, tgt


def loss_of(m, src, tgt):
    """(loss, tokens): mean label-smoothed cross-entropy over the non-pad predicted positions."""
    c = m.c
    P = c["pad_id"]
    if m.arch == "encoder-decoder":
        s, sp = pad(src, P)
        ti, tp = pad([[c["bos_id"]] + t for t in tgt], P)
        y, _ = pad([t + [c["eos_id"]] for t in tgt], P)
        logits = m.decode(ti, tp, m.encode(s, sp), sp)
    elif m.arch == "decoder":
        ti, tp = pad([q[:-1] for q in src], P)
        y, _ = pad([q[1:] for q in src], P)
        logits = m.decode(ti, tp)
    else:
        s, tp = pad(src, P)
        y, _ = pad(tgt, P)
        logits = m.head(m.encode(s, tp))
    valid = ~tp
    tokens = int(valid.sum())
    loss = F.cross_entropy(logits[valid], y[valid], label_smoothing=LABEL_SMOOTHING, reduction="sum") / tokens
    return loss, tokens


def finite_difference_check(m, src, tgt, grads32, g):
    """Central differences in float64 on a few entries of a few parameters."""
    m64 = copy.deepcopy(m).double()
    params = dict(m64.named_parameters())
    for p in params.values():
        p.grad = None
    loss64, _ = loss_of(m64, src, tgt)
    loss64.backward()
    g64 = {k: p.grad.detach().clone() for k, p in params.items()}
    # float32 autograd vs float64 autograd, per tensor relative to its largest entry
    f32_vs_f64 = max(float((grads32[k].double() - g64[k]).abs().max() / g64[k].abs().max().clamp_min(1e-30))
                     for k in g64)
    names = [k for k in ("tgt_embed.weight", "src_embed.weight") if k in params][:1]
    layers = [k for k in params if k.endswith("layers.0.self_attn.in_proj_weight")][:1]
    names += layers
    names += [k for k in params if k.endswith("decoder.layers.0.multihead_attn.in_proj_weight")]
    names += [k for k in params if k.endswith("layers.1.norm2.weight")][:1]
    names += [k for k in params if k.endswith("layers.1.linear1.weight")][:1]
    names += [k for k in ("generator.bias",) if k in params]
    h = 1e-6
    worst, checked = 0.0, 0
    with torch.no_grad():
        for name in names:
            p = params[name]
            flat = p.view(-1)
            gf = g64[name].view(-1)
            idx = torch.argsort(gf.abs(), descending=True)[:3].tolist()
            idx += torch.randint(0, flat.numel(), (3,), generator=g).tolist()
            for i in idx:
                old = float(flat[i])
                flat[i] = old + h
                lp, _ = loss_of(m64, src, tgt)
                flat[i] = old - h
                lm, _ = loss_of(m64, src, tgt)
                flat[i] = old
                fd = (float(lp) - float(lm)) / (2 * h)
                a = float(gf[i])
                den = max(abs(fd), abs(a))
                rel = abs(fd - a) / den if den > 1e-9 else abs(fd - a)
                worst = max(worst, rel)
                checked += 1
    return float(loss64), worst, checked, f32_vs_f64, names


def write_model_fixture(name, arch, over, opt):
    c = dict(BASE, **over)
    c["architecture"] = arch
    m = Model(arch, c, opt).train()  # dropout is 0: train() only to take the training code path
    params = dict(m.named_parameters())
    sd = m.state_dict()
    assert list(sd.keys()) == list(params.keys()), "state_dict holds more than the parameters"
    g = torch.Generator().manual_seed(2024)
    src, tgt = make_batch(arch, c, opt, g)
    m.zero_grad(set_to_none=True)
    loss, tokens = loss_of(m, src, tgt)
    loss.backward()
    grads = {}
    for k, p in params.items():
        if p.grad is None:
            print(f"  note: {k} gets no gradient (zeros written)")
            grads[k] = torch.zeros_like(p)
        else:
            grads[k] = p.grad.detach().clone()

    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config_json(c, arch), f, indent=2)
    save_safetensors(os.path.join(d, "model.safetensors"), sd, "F32")
    save_safetensors(os.path.join(d, "grads.safetensors"), grads, "F32")
    batch = {"src": src, "tgt": tgt, "label_smoothing": LABEL_SMOOTHING, "loss": float(loss), "tokens": tokens}
    with open(os.path.join(d, "batch.json"), "w") as f:
        json.dump(batch, f, separators=(",", ":"))

    loss64, worst, checked, f32_vs_f64, names = finite_difference_check(m, src, tgt, grads, g)
    gnorm = math.sqrt(sum(float(v.double().pow(2).sum()) for v in grads.values()))
    size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
    nparam = sum(p.numel() for p in params.values())
    print(f"{name}: {nparam} parameters, {len(grads)} tensors, {size / 1024:.1f} KiB; "
          f"loss {float(loss):.7f} (float64 {loss64:.7f}) over {tokens} tokens; |grad| {gnorm:.6f}")
    print(f"  finite differences (float64, h 1e-6, {checked} entries of {', '.join(names)}): "
          f"max rel diff {worst:.2e}; float32 vs float64 autograd: max diff / max|grad| per tensor {f32_vs_f64:.2e}")


def lr_paper(step, d_model=32, warmup=4):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def write_adam_fixture():
    d = os.path.join(OUT, "adam")
    os.makedirs(d, exist_ok=True)
    g = torch.Generator().manual_seed(77)
    init = {"a": torch.randn(7, 5, generator=g), "b": torch.randn(13, generator=g),
            "c": torch.randn(3, 4, 2, generator=g)}
    save_safetensors(os.path.join(d, "params.safetensors"), init, "F32")
    steps = 10
    grads = []
    for s in range(1, steps + 1):
        scale = 0.05 if s in (2, 6, 9) else 1.0
        gs = {}
        for k, t in init.items():
            x = torch.randn(t.shape, generator=g) * scale
            x[torch.rand(t.shape, generator=g) < 0.1] = 0.0
            gs[k] = x
        gs["a"][0, 0] = 0.0
        if s == 5:
            gs["b"][3] = 1e6
        gs["c"][1, 2, 1] = 1e-12
        grads.append(gs)
        save_safetensors(os.path.join(d, f"grads_{s}.safetensors"), gs, "F32")

    lrs = []
    for variant, wd, clip in (("after", 0.0, False), ("after_clip_wd", 0.01, True)):
        ps = {k: torch.nn.Parameter(v.clone()) for k, v in init.items()}
        plist = list(ps.values())
        opt = torch.optim.Adam(plist, lr=1.0, betas=(0.9, 0.98), eps=1e-9, weight_decay=wd)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: lr_paper(e + 1))
        used, norms = [], []
        for s in range(1, steps + 1):
            opt.zero_grad(set_to_none=True)
            for k, p in ps.items():
                p.grad = grads[s - 1][k].clone()
            if clip:
                norms.append(float(torch.nn.utils.clip_grad_norm_(plist, max_norm=1.0)))
            used.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
            save_safetensors(os.path.join(d, f"{variant}_{s}.safetensors"), {k: p.detach() for k, p in ps.items()},
                             "F32")
        assert all(abs(u - lr_paper(s)) <= 1e-15 for s, u in zip(range(1, steps + 1), used)), used
        lrs = used
        fin = ps
        print(f"adam {variant}: after step 10 a[0,0] {float(fin['a'][0, 0]):.8g} (init {float(init['a'][0, 0]):.8g}), "
              f"b[3] {float(fin['b'][3]):.8g} (init {float(init['b'][3]):.8g}), "
              f"c[1,2,1] {float(fin['c'][1, 2, 1]):.8g} (init {float(init['c'][1, 2, 1]):.8g}), "
              f"max |change| {max(float((fin[k] - init[k]).abs().max()) for k in init):.6g}")
        if clip:
            print("  gradient norms before clipping: " + ", ".join(f"{n:.6g}" for n in norms))
    with open(os.path.join(d, "schedule.json"), "w") as f:
        json.dump({"d_model": 32, "warmup": 4, "lr": lrs}, f)
    print("  lr at steps 1..10: " + ", ".join(f"{x:.6g}" for x in lrs))
    size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
    print(f"adam: {len(os.listdir(d))} files, {size / 1024:.1f} KiB")


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for name, arch, over, opt in MODELS:
        write_model_fixture(name, arch, over, opt)
    write_adam_fixture()


if __name__ == "__main__":
    main()
