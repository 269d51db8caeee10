#!/usr/bin/python3
"""A mixture of experts' decoding step against a dense model of the same active parameters, in one run
(issue "a family is a builder", item 4): a Mixtral-shaped decoder (8 experts, top 2, each SwiGLU expert F wide)
and a Llama-shaped decoder equal to it but for a dense SwiGLU of 2·F (what one token's step computes in the
MoE), random BF16 weights, batch 1, 2 threads.

  /usr/bin/python3 bench/moe_step.py [--rounds 4] [--threads 2] [--halformer build/halformer] [--out DIR] [--quick]

Each round runs `halformer bench DIR --batch 1 --src-len 32 --new-tokens 64 --beam 1 --iters 3 --json` on
both models, the order alternating; the report gives the medians of decoder_step_ms (the step of one token:
the router, the two chosen experts' FFNs over their one row each, the combine; the dense model: its FFN)
and their ratio, and the bytes of weights each step reads (MoE: attention, router and 2 of 8 experts; dense:
all). Writes DIR/report.md and results.json (DIR: bench/results/moe-<cpu>-<date> unless --out).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import make_hf_fixtures as fx  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import cpu_name  # noqa: E402  (bench/report.py: the machine's name)

SHAPE = dict(hidden_size=1024, num_attention_heads=16, num_key_value_heads=4, num_hidden_layers=8, vocab_size=8192,
             max_position_embeddings=4096, rope_theta=1000000.0, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2,
             tie_word_embeddings=False)
EXPERTS, TOP_K, EXPERT_FF = 8, 2, 1792
QUICK = dict(hidden_size=128, num_hidden_layers=2, vocab_size=1000)


def write(d, cfg, names, seed):
    g = torch.Generator().manual_seed(seed)
    tensors = []
    for name, shape in names:
        t = torch.ones(shape) if name.endswith("norm.weight") else torch.randn(shape, generator=g) * 0.02
        tensors.append((name, "BF16", t.bfloat16().float()))
    os.makedirs(d)
    fx.write_json(os.path.join(d, "config.json"), cfg)
    fx.save_weights(d, tensors)


def attention_names(i, D, H, Hkv, dh):
    a = f"model.layers.{i}.self_attn."
    return [(a + "q_proj.weight", [H * dh, D]), (a + "k_proj.weight", [Hkv * dh, D]),
            (a + "v_proj.weight", [Hkv * dh, D]), (a + "o_proj.weight", [D, H * dh]),
            (f"model.layers.{i}.input_layernorm.weight", [D]),
            (f"model.layers.{i}.post_attention_layernorm.weight", [D])]


def checkpoints(root, quick):
    s = dict(SHAPE, **(QUICK if quick else {}))
    D, H, Hkv, L, V = (s["hidden_size"], s["num_attention_heads"], s["num_key_value_heads"], s["num_hidden_layers"],
                       s["vocab_size"])
    dh, F = D // H, EXPERT_FF if not quick else 192
    head = [("model.embed_tokens.weight", [V, D]), ("model.norm.weight", [D]), ("lm_head.weight", [V, D])]
    moe_names, dense_names = list(head), list(head)
    for i in range(L):
        moe_names += attention_names(i, D, H, Hkv, dh)
        dense_names += attention_names(i, D, H, Hkv, dh)
        p = f"model.layers.{i}.block_sparse_moe."
        moe_names.append((p + "gate.weight", [EXPERTS, D]))
        for e in range(EXPERTS):
            moe_names += [(p + f"experts.{e}.w1.weight", [F, D]), (p + f"experts.{e}.w3.weight", [F, D]),
                          (p + f"experts.{e}.w2.weight", [D, F])]
        m = f"model.layers.{i}.mlp."
        dense_names += [(m + "gate_proj.weight", [TOP_K * F, D]), (m + "up_proj.weight", [TOP_K * F, D]),
                        (m + "down_proj.weight", [D, TOP_K * F])]
    common = dict(s, hidden_act="silu", torch_dtype="bfloat16", transformers_version="4.46.0")
    moe_cfg = dict(common, architectures=["MixtralForCausalLM"], model_type="mixtral", intermediate_size=F,
                   num_local_experts=EXPERTS, num_experts_per_tok=TOP_K, sliding_window=None)
    dense_cfg = dict(common, architectures=["LlamaForCausalLM"], model_type="llama", intermediate_size=TOP_K * F)
    write(os.path.join(root, "moe"), moe_cfg, moe_names, 1)
    write(os.path.join(root, "dense"), dense_cfg, dense_names, 2)
    step_floats = {}
    for kind, names in (("moe", moe_names), ("dense", dense_names)):
        total = 0
        for n, shape in names:
            k = 1
            for x in shape:
                k *= x
            if ".experts." in n:
                k = k * TOP_K / EXPERTS  # a token reads 2 of the 8
            if n == "model.embed_tokens.weight":
                k = shape[1]  # one row
            total += k
        step_floats[kind] = total
    return F, step_floats


def bench(exe, d, threads):
    out = subprocess.run([exe, "bench", d, "--batch", "1", "--src-len", "32", "--new-tokens", "64", "--beam", "1",
                          "--iters", "3", "--json", "--threads", str(threads)], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--halformer", default="build/halformer")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="halformer_moe_")
    try:
        print("writing the checkpoints...", flush=True)
        F, floats = checkpoints(root, a.quick)
        steps = {"moe": [], "dense": []}
        for r in range(a.rounds):
            order = ("moe", "dense") if r % 2 == 0 else ("dense", "moe")
            for kind in order:
                res = bench(a.halformer, os.path.join(root, kind), a.threads)
                steps[kind].append(res["decoder_step_ms"])
            print(f"round {r + 1}/{a.rounds}: moe {steps['moe'][-1]:.2f} ms, dense {steps['dense'][-1]:.2f} ms",
                  flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in steps.items()}
    ratio = med["moe"] / med["dense"]
    date = datetime.date.today().isoformat()
    out = a.out or os.path.join("bench", "results", "moe-%s-%s" % (platform.machine(), date))
    os.makedirs(out, exist_ok=True)
    res = {"cpu": cpu_name(), "date": date, "threads": a.threads, "rounds": a.rounds, "quick": a.quick,
           "shape": dict(SHAPE, experts=EXPERTS, top_k=TOP_K, expert_ff=F, dense_ff=TOP_K * F),
           "step_ms": steps, "median_step_ms": med, "moe_over_dense": ratio,
           "weight_bytes_per_step_fp32": {k: 4 * v for k, v in floats.items()}}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(f"# A mixture of experts' decoding step against a dense model of its active parameters\n\n"
                f"{res['cpu']}, {a.threads} threads, {date}; batch 1, 32-token prompt, 64 new tokens, "
                f"medians of {a.rounds} interleaved rounds (each the median step of 3 runs).\n\n"
                f"| model | step ms (median) | weights read per step (fp32 MB) |\n|---|---|---|\n"
                f"| Mixtral-shaped: {EXPERTS} experts of {F}, top {TOP_K} | {med['moe']:.2f} | "
                f"{4 * floats['moe'] / 1e6:.1f} |\n"
                f"| dense, FFN {TOP_K * F} | {med['dense']:.2f} | {4 * floats['dense'] / 1e6:.1f} |\n\n"
                f"MoE / dense: **{ratio:.2f}×** (goal: at most 1.3×).\n")
    print(open(os.path.join(out, "report.md")).read())


if __name__ == "__main__":
    main()
