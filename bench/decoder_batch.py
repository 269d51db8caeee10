#!/usr/bin/env python3
"""Decoder-only prompts of mixed lengths: one batch against one at a time.

    bench/decoder_batch.py [--prompts 16] [--new 48] [--rounds 3] [--out DIR]

Runs halformer_bench_decoder_batch (bench/decoder_batch.cpp: a GPT-2-small-
shaped model with random weights; each round the whole set as one generate()
call, then prompt by prompt, interleaved; every batched answer checked
against the prompt alone) and writes report.md, the rounds as JSON and
decoder_batch.png. Medians over the rounds; the ratio is taken within each
round (the machine is shared and noisy).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--prompts", type=int, default=16)
ap.add_argument("--new", type=int, default=48)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--min-len", type=int, default=8)
ap.add_argument("--max-len", type=int, default=128)
ap.add_argument("--binary", default=os.path.join(root, "build/bench/halformer_bench_decoder_batch"))
ap.add_argument("--out", default=os.path.join(
    root, "bench/results/decoder-batch-amd-epyc-" + datetime.date.today().isoformat()))
a = ap.parse_args()

cmd = [a.binary, "--prompts", str(a.prompts), "--new", str(a.new), "--rounds", str(a.rounds),
       "--min-len", str(a.min_len), "--max-len", str(a.max_len)]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)  # progress goes to stderr as it runs
out, _ = p.communicate()
if p.returncode != 0:
    sys.exit(f"{' '.join(cmd)} failed ({p.returncode})")
rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
rounds = [r for r in rows if "round" in r]
summary = next(r for r in rows if r.get("summary"))

os.makedirs(a.out, exist_ok=True)
json.dump({"rounds": rounds, "summary": summary}, open(os.path.join(a.out, "rounds.json"), "w"), indent=2)

cpu = open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].splitlines()[0].strip()
s = summary
lines = [
    "# Decoder-only prompts of mixed lengths: one batch against one at a time",
    "",
    f"Machine: {os.cpu_count()} vCPUs ({cpu}), {datetime.datetime.now().isoformat(timespec='minutes')}.",
    f"Model: {s['model']}.",
    f"Work: {s['prompts']} prompts of {s['min_len']}–{s['max_len']} tokens ({s['prompt_tokens']} in all),"
    f" {s['new_tokens']} new tokens each, greedy, eos off.",
    f"Command: `{' '.join(['bench/decoder_batch.py'] + sys.argv[1:])}`.",
    "",
    "Each round runs the set as one `generate()` call (one batch: every row at its own positions, one kernel",
    "call per step for the batch) and then prompt by prompt; every batched answer is checked against the",
    f"prompt alone ({s['mismatches']} differed). Before rows could be at different positions, prompts ran",
    "in groups of one length: with every length different, as here, that is one at a time.",
    "",
    "| | tokens/s (median) |",
    "|---|---|",
    f"| one batch | {s['batched_tokens_per_s']:.1f} |",
    f"| one at a time | {s['single_tokens_per_s']:.1f} |",
    f"| ratio (median of the rounds' ratios) | {s['ratio']:.2f}x ({s['ratio_min']:.2f}–{s['ratio_max']:.2f}) |",
    "",
    "| round | batched s | one at a time s | ratio |",
    "|---|---|---|---|",
]
lines += [f"| {r['round']} | {r['batched_s']:.2f} | {r['single_s']:.2f} | {r['ratio']:.2f}x |" for r in rounds]
lines += ["", "![tokens per second](decoder_batch.png)", ""]
open(os.path.join(a.out, "report.md"), "w").write("\n".join(lines))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(6, 3.6))
x = [r["round"] for r in rounds]
ax.plot(x, [r["batched_tokens_per_s"] for r in rounds], "o-", label="one batch (mixed lengths)")
ax.plot(x, [r["single_tokens_per_s"] for r in rounds], "s-", label="one at a time")
ax.set_xlabel("round")
ax.set_ylabel("generated tokens / s")
ax.set_ylim(bottom=0)
ax.set_xticks(x)
ax.set_title(f"{s['prompts']} prompts of {s['min_len']}–{s['max_len']} tokens: {s['ratio']:.2f}x")
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(a.out, "decoder_batch.png"), dpi=110)
print(f"[decoder-batch] report in {a.out}: {s['batched_tokens_per_s']:.1f} tokens/s batched, "
      f"{s['single_tokens_per_s']:.1f} one at a time ({s['ratio']:.2f}x)")
