#!/usr/bin/python3
"""PyTorch training baseline for Halformer's training benchmark: the training
throughput of an nn.Transformer-style model in PyTorch (Debian's python3-torch,
fp32, eager, CPU, the given thread count).

  /usr/bin/python3 bench/torch_train.py [--config small|base] [--threads 2]
      [--steps 10] [--json FILE]
  /usr/bin/python3 bench/torch_train.py --ops [--threads 2] [--iters 20] [--json FILE]

Training mode. The model is tests/make_fixtures.py's Model (imported): an
encoder-decoder of torch.nn.TransformerEncoder / TransformerDecoder stacks,
post-LN, ReLU, final LayerNorms, sinusoidal positions, embeddings scaled by
sqrt(d_model), the output projection tied to the target embedding, and the
source embedding tied to it too when the vocabularies match (they do in both
configurations). The recipe is the paper's: teacher forcing, label-smoothed
cross-entropy (0.1) averaged over the non-pad targets, Adam(betas=(0.9, 0.98),
eps=1e-9) with the warm-up schedule
    lr(step) = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), warmup 4000,
and dropout 0.1 (the layers' own: attention weights, sub-layer outputs, FFN
hidden; plus dropout on the embedding + position sums).

  config  d_model heads d_ff  layers  vocab  batch (sequences x src / tgt tokens)
  small   256     4     1024  3 + 3   8000   64 x 24 / 24
  base    512     8     2048  6 + 6   37000  16 x 32 / 32

Batches are random tokens (seeded, a new batch each step, made before timing),
every sequence full length. Each full step (zero_grad, forward, loss,
backward, optimizer step, scheduler step) is timed with time.perf_counter after
2 warm-up steps; reported: the median step seconds, target and source tokens/s
(non-pad tokens per step / median step), the parameter count, and memory:
peak_rss_mb is ru_maxrss (the whole process's peak, so it includes Python and
torch themselves), start_rss_mb the RSS just before the first training step
(after the model, optimizer and batches are made); their difference is what
training added, the first step's one-off costs (lazily loaded BLAS code, memory
glibc keeps after freeing) included.

--ops mode: forward and backward of single ops with autograd, at the small
configuration's shapes (M = 64 * 24 rows, d_model 256, 4 heads of 64, 24
tokens, vocabulary 8000): the time of y.backward(dY) with a fixed random dY
(loss.backward() for the scalar loss), the forward run untimed before it,
grads cleared untimed in between. "ops" in the JSON holds the median backward
ms of each op, "ops_forward" the median forward ms. Attention has no dropout
here, and the math form is softmax(Q K^T / sqrt(dk) + causal mask) V, since
F.scaled_dot_product_attention is not in torch 1.13.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

# As in bench/torch_baseline.py: OpenMP's thread count must be fixed before
# torch loads, and the PASSIVE wait policy is PyTorch's best on 2-core VMs.
_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "2"
os.environ.setdefault("OMP_NUM_THREADS", _threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from make_fixtures import BASE, Model  # noqa: E402

CONFIGS = {
    "small": dict(d_model=256, num_heads=4, d_ff=1024, layers=3, vocab=8000, batch=64, src_len=24, tgt_len=24),
    "base": dict(d_model=512, num_heads=8, d_ff=2048, layers=6, vocab=37000, batch=16, src_len=32, tgt_len=32),
}
DROPOUT, SMOOTHING, WARMUP = 0.1, 0.1, 4000
PAD, BOS, EOS = BASE["pad_id"], BASE["bos_id"], BASE["eos_id"]


class TrainModel(Model):
    """make_fixtures.Model (encoder-decoder, post-LN, ReLU, final norms,
    sinusoidal positions, tied head) with training dropout and tied
    source/target embeddings."""

    def __init__(self, cfg, dropout):
        c = dict(BASE, d_model=cfg["d_model"], num_heads=cfg["num_heads"], d_ff=cfg["d_ff"],
                 num_encoder_layers=cfg["layers"], num_decoder_layers=cfg["layers"],
                 src_vocab_size=cfg["vocab"], tgt_vocab_size=cfg["vocab"],
                 max_positions=max(cfg["src_len"], cfg["tgt_len"]))
        super().__init__("encoder-decoder", c, dict(final_norm=True, head="tied", dtype="F32"))
        # Model builds its layers with dropout 0 (it makes inference fixtures):
        # give them nn.Transformer's training dropout.
        for mod in self.modules():
            if isinstance(mod, nn.Dropout):
                mod.p = dropout
            elif isinstance(mod, nn.MultiheadAttention):
                mod.dropout = dropout
        self.drop = nn.Dropout(dropout)
        if c["src_vocab_size"] == c["tgt_vocab_size"]:
            self.src_embed.weight = self.tgt_embed.weight

    def embed(self, table, pos, tokens):
        return self.drop(super().embed(table, pos, tokens))


def make_batch(cfg, g):
    """Full-length random sequences: source tokens, decoder input (BOS + the
    target), and labels (the target + EOS)."""
    B, V = cfg["batch"], cfg["vocab"]
    src = torch.randint(3, V, (B, cfg["src_len"]), generator=g)
    body = torch.randint(3, V, (B, cfg["tgt_len"] - 1), generator=g)
    tgt_in = torch.cat([torch.full((B, 1), BOS), body], 1)
    labels = torch.cat([body, torch.full((B, 1), EOS)], 1)
    return src, tgt_in, labels


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def train(a):
    cfg = CONFIGS[a.config]
    torch.manual_seed(0)
    m = TrainModel(cfg, DROPOUT).train()
    params = sum(p.numel() for p in m.parameters())  # shared tensors counted once
    opt = torch.optim.Adam(m.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    d = cfg["d_model"]
    # LambdaLR calls this with 0 first: the schedule's steps count from 1.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: d ** -0.5 * min((s + 1) ** -0.5, (s + 1) * WARMUP ** -1.5))
    g = torch.Generator().manual_seed(42)
    batches = [make_batch(cfg, g) for _ in range(2 + a.steps)]

    def step(src, tgt_in, labels):
        opt.zero_grad(set_to_none=True)
        src_pad, tgt_pad = src == PAD, tgt_in == PAD
        logits = m.decode(tgt_in, tgt_pad, m.encode(src, src_pad), src_pad)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=PAD, label_smoothing=SMOOTHING)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    start_rss = rss_mb()
    times = []
    for i, (src, tgt_in, labels) in enumerate(batches):
        t0 = time.perf_counter()
        loss = step(src, tgt_in, labels)
        if i >= 2:
            times.append(time.perf_counter() - t0)
            print(f"\rtorch_train: step {i - 1}/{a.steps} ({times[-1]:.3f} s, loss {loss.item():.3f})",
                  end="", file=sys.stderr, flush=True)
    print("", file=sys.stderr)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    med = statistics.median(times)
    src, _, labels = batches[0]
    res = {"config": a.config, "threads": a.threads, "steps": a.steps, "median_step_s": med,
           "tgt_tokens_per_s": int((labels != PAD).sum()) / med,
           "src_tokens_per_s": int((src != PAD).sum()) / med,
           "peak_rss_mb": peak, "start_rss_mb": start_rss, "params": params,
           "torch_version": torch.__version__, "step_s": times}
    print(f"torch_train {a.config}: {a.threads} threads, median of {a.steps} steps {med:.3f} s/step, "
          f"{res['tgt_tokens_per_s']:.0f} tgt tok/s, {res['src_tokens_per_s']:.0f} src tok/s, "
          f"peak RSS {peak:.0f} MB (start {start_rss:.0f} MB, +{peak - start_rss:.0f} MB), "
          f"{params / 1e6:.2f}M params, torch {torch.__version__}")
    return res


def time_ops(a):
    """Median forward and backward ms of single ops at the small config's shapes."""
    cfg = CONFIGS["small"]
    B, T, D, H, FF, V = cfg["batch"], cfg["tgt_len"], cfg["d_model"], cfg["num_heads"], cfg["d_ff"], cfg["vocab"]
    M, dk = B * T, D // H
    torch.manual_seed(0)
    causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)

    def leaf(*shape):
        return torch.randn(*shape).requires_grad_()

    def attention(q, k, v):
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dk) + causal, dim=-1)
        return w @ v

    def linear(n_in, n_out):
        lin, x = nn.Linear(n_in, n_out), leaf(M, n_in)
        return lambda: lin(x), [x, *lin.parameters()]

    def layer_norm():
        ln, x = nn.LayerNorm(D), leaf(M, D)
        return lambda: ln(x), [x, *ln.parameters()]

    def attention_math():
        q, k, v = leaf(B, H, T, dk), leaf(B, H, T, dk), leaf(B, H, T, dk)
        return lambda: attention(q, k, v), [q, k, v]

    def mha():
        mod, x = nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True), leaf(B, T, D)
        return lambda: mod(x, x, x, attn_mask=causal, need_weights=False)[0], [x, *mod.parameters()]

    def smoothed_ce():
        logits, labels = leaf(M, V), torch.randint(3, V, (M,))
        return (lambda: F.cross_entropy(logits, labels, ignore_index=PAD, label_smoothing=SMOOTHING),
                [logits])

    def embedding():
        emb, tok = nn.Embedding(V, D), torch.randint(3, V, (B, T))
        return lambda: emb(tok), list(emb.parameters())

    ops = {
        f"linear_{D}x{FF}": linear(D, FF),
        f"linear_{FF}x{D}": linear(FF, D),
        f"linear_{D}x{V}_head": linear(D, V),
        f"layer_norm_{D}": layer_norm(),
        f"attention_math_{B}x{H}x{T}x{dk}": attention_math(),
        f"nn_mha_self_{B}x{T}x{D}": mha(),
        f"log_softmax_smoothed_ce_{M}x{V}": smoothed_ce(),
        f"embedding_{V}x{D}": embedding(),
    }
    fwd, bwd = {}, {}
    for name, (fn, leaves) in ops.items():
        dy = None
        ft, bt = [], []
        for it in range(2 + a.iters):
            for p in leaves:
                p.grad = None
            t0 = time.perf_counter()
            y = fn()
            t1 = time.perf_counter()
            if dy is None and y.dim() > 0:
                dy = torch.randn(y.shape)
            t2 = time.perf_counter()
            y.backward(dy)
            t3 = time.perf_counter()
            if it >= 2:
                ft.append((t1 - t0) * 1e3)
                bt.append((t3 - t2) * 1e3)
        fwd[name], bwd[name] = statistics.median(ft), statistics.median(bt)
        print(f"{name:36} forward {fwd[name]:8.3f} ms   backward {bwd[name]:8.3f} ms")
    return {"config": "small", "threads": a.threads, "iters": a.iters, "rows": M,
            "ops": bwd, "ops_forward": fwd, "torch_version": torch.__version__}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="small")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="timed training steps (after 2 warm-up steps)")
    ap.add_argument("--ops", action="store_true", help="time single ops' backward instead of training")
    ap.add_argument("--iters", type=int, default=20, help="timed iterations per op with --ops")
    ap.add_argument("--json", metavar="FILE", help="write the results here")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    res = time_ops(a) if a.ops else train(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
