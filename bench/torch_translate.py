#!/usr/bin/python3
"""PyTorch baseline for Halformer's translator: the same model trained with
the same recipe on the same token-id files, for a fixed wall-clock time, then
greedy-decoded on a test set.

  /usr/bin/python3 bench/torch_translate.py --train train.ids --test test.ids \\
      --minutes 30 --out torch.hyp.ids [--log torch.log] [--threads 2]

then score it like Halformer's own output:

  halformer tokenizer decode MODEL_DIR < torch.hyp.ids > torch.hyp.de
  halformer eval --hyp torch.hyp.de --ref test.de

The model is bench/torch_train.py's TrainModel (tests/make_fixtures.py's
encoder-decoder of torch.nn.TransformerEncoder/Decoder stacks: post-LN, ReLU,
sinusoidal positions, embeddings x sqrt(d_model), source/target embeddings
and output projection one tensor, dropout 0.1 in nn.Transformer's places);
sizes as the demo translator's config.json (d_model 256, 4 heads, d_ff 1024,
3 + 3 layers, 8000 tokens, 128 positions). The recipe is halformer train's
with the options models/en-de was trained with: batches of sentence pairs of
about --batch-tokens padded tokens (pairs sorted by length in pools of 100000,
batches shuffled), label smoothing 0.1 over non-pad targets, Adam(0.9, 0.98,
1e-9), lr = lr_scale * d^-0.5 * min(s^-0.5, s * warmup^-1.5). Training stops
at the first step that ends past --minutes (the time counts training steps
only, as halformer train's "elapsed" does; data loading is before it).
Decoding: greedy, batches of 32 sentences sorted by length (halformer translate's default), at most
2 x source + 10 tokens, the decoder recomputed over the whole prefix each step
(nn.TransformerDecoder has no KV cache).
"""
import argparse
import json
import os
import random
import sys
import time

_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "2"
os.environ.setdefault("OMP_NUM_THREADS", _threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import BOS, EOS, PAD, TrainModel  # noqa: E402


def read_ids(path, pairs=True):
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if pairs:
                s, t = line.split("\t")
                out.append(([int(x) for x in s.split()], [int(x) for x in t.split()]))
            else:
                out.append([int(x) for x in line.split("\t")[0].split()])
    return out


def make_batches(data, max_tokens, rng, pool=100000):
    """Pairs sorted by length inside pools, cut into batches of at most
    max_tokens padded tokens (the longer side + 1 for bos/eos), shuffled."""
    idx = list(range(len(data)))
    rng.shuffle(idx)
    batches = []
    for p in range(0, len(idx), pool):
        chunk = sorted(idx[p:p + pool], key=lambda i: (len(data[i][1]), len(data[i][0])))
        cur, longest = [], 0
        for i in chunk:
            L = max(len(data[i][0]), len(data[i][1]) + 1)
            if cur and max(longest, L) * (len(cur) + 1) > max_tokens:
                batches.append(cur)
                cur, longest = [], 0
            cur.append(i)
            longest = max(longest, L)
        if cur:
            batches.append(cur)
    rng.shuffle(batches)
    return batches


def pad(seqs):
    T = max(len(s) for s in seqs)
    return torch.tensor([s + [PAD] * (T - len(s)) for s in seqs], dtype=torch.long)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True, help="token-id pairs; the source side is translated")
    ap.add_argument("--out", required=True, help="hypothesis ids, one line per test pair")
    ap.add_argument("--log", help="JSON lines: step, loss, lr, tokens, elapsed")
    ap.add_argument("--minutes", type=float, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-tokens", type=int, default=6000)
    ap.add_argument("--warmup", type=int, default=600)
    ap.add_argument("--lr-scale", type=float, default=0.5)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--max-positions", type=int, default=128)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cfg = dict(d_model=256, num_heads=4, d_ff=1024, layers=3, vocab=a.vocab,
               src_len=a.max_positions, tgt_len=a.max_positions)
    m = TrainModel(cfg, 0.1).train()
    opt = torch.optim.Adam(m.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    d = cfg["d_model"]
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: a.lr_scale * d ** -0.5 * min((s + 1) ** -0.5, (s + 1) * a.warmup ** -1.5))
    data = read_ids(a.train)
    rng = random.Random(1)
    log = open(a.log, "w") if a.log else None
    elapsed, step, epoch = 0.0, 0, 0
    budget = a.minutes * 60
    while elapsed < budget:
        for b in make_batches(data, a.batch_tokens, rng):
            t0 = time.perf_counter()
            src = pad([data[i][0] for i in b])
            tgt_in = pad([[BOS] + data[i][1] for i in b])
            labels = pad([data[i][1] + [EOS] for i in b])
            opt.zero_grad(set_to_none=True)
            src_pad, tgt_pad = src == PAD, tgt_in == PAD
            logits = m.decode(tgt_in, tgt_pad, m.encode(src, src_pad), src_pad)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                   ignore_index=PAD, label_smoothing=0.1)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            elapsed += time.perf_counter() - t0
            tokens = int((labels != PAD).sum())
            if log:
                log.write(json.dumps({"step": step, "loss": loss.item(), "lr": sched.get_last_lr()[0],
                                      "tokens": tokens, "elapsed": elapsed, "epoch": epoch}) + "\n")
                log.flush()
            if step % 10 == 0:
                print(f"\rtorch_translate: step {step} epoch {epoch} loss {loss.item():.3f} "
                      f"{elapsed / 60:.1f}/{a.minutes:g} min", end="", file=sys.stderr, flush=True)
            if elapsed >= budget:
                break
        epoch += 1
    print(f"\ntorch_translate: trained {step} steps in {elapsed:.0f} s", file=sys.stderr)

    # Greedy decoding of the test sources.
    m.eval()
    test = read_ids(a.test)
    # One hypothesis per test line: `tokenizer pairs` must have kept them all
    # (it reports what it leaves out) for eval --ref test.de to line up.
    order = sorted(range(len(test)), key=lambda i: len(test[i][0]))
    hyps = [None] * len(test)
    t0 = time.perf_counter()
    with torch.no_grad():
        for p in range(0, len(order), 32):
            b = order[p:p + 32]
            src = pad([test[i][0] for i in b])
            src_pad = src == PAD
            mem = m.encode(src, src_pad)
            limit = min(2 * src.shape[1] + 10, a.max_positions)
            out = torch.full((len(b), 1), BOS, dtype=torch.long)
            done = torch.zeros(len(b), dtype=torch.bool)
            for _ in range(limit):
                logits = m.decode(out, out == PAD, mem, src_pad)[:, -1]
                nxt = logits.argmax(-1)
                nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
                out = torch.cat([out, nxt[:, None]], 1)
                done |= nxt == EOS
                if bool(done.all()):
                    break
            for k, i in enumerate(b):
                ids = []
                for t in out[k, 1:].tolist():
                    if t in (EOS, PAD):
                        break
                    ids.append(t)
                hyps[i] = ids
    print(f"torch_translate: decoded {len(test)} sentences in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    with open(a.out, "w") as f:
        for h in hyps:
            f.write(" ".join(map(str, h)) + "\n")
    summary = {"steps": step, "epochs": epoch, "train_seconds": elapsed, "threads": a.threads,
               "torch_version": torch.__version__}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
