#!/usr/bin/python3
"""Training report: Halformer's whole training step against PyTorch's on the
CPU, side by side in one run. The goal it checks: target tokens/s at least 2×
PyTorch's, peak memory at most PyTorch's.

  /usr/bin/python3 bench/train_report.py [--build build] [--threads 2]
      [--small-steps 5] [--base-steps 3] [--iters 20] [--no-base] [--out DIR]

Runs, interleaved (PyTorch, then ours, for each workload):
  bench/torch_train.py --config small   /  halformer_bench_train --config small
  bench/torch_train.py --config base    /  halformer_bench_train --config base   (unless --no-base)
  bench/torch_train.py --ops            /  halformer_bench_train --ops
all with the same --threads, and writes bench/results/train-<cpu>-<date>/:
report.md, train.png (tokens/s and per-op speed-ups) and every raw JSON and
the run's console output (run.log). Needs Debian's python3-torch, and
python3-matplotlib for the plot.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import cpu_name  # noqa: E402  (bench/report.py: the machine's name)

GOAL_SPEED = 2.0  # ours / torch target tokens/s


def run(cmd, log, timeout):
    """Runs one benchmark command, echoing and logging its output."""
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    log.write(f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}(exit {p.returncode}, {time.time() - t0:.1f} s)\n\n")
    log.flush()
    sys.stderr.write(p.stdout)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt_ratio(x):
    return f"{x:.2f}×"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--small-steps", type=int, default=5, help="timed steps of the small config (after 2 warm-ups)")
    ap.add_argument("--base-steps", type=int, default=3, help="timed steps of the base config (after 2 warm-ups)")
    ap.add_argument("--iters", type=int, default=20, help="timed iterations per op with --ops")
    ap.add_argument("--no-base", action="store_true", help="skip the base configuration")
    ap.add_argument("--timeout", type=int, default=360, help="seconds allowed to each benchmark command")
    ap.add_argument("--out", help="output folder (default bench/results/train-<cpu>-<date>)")
    a = ap.parse_args()

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    exe = os.path.join(a.build if os.path.isabs(a.build) else os.path.join(root, a.build),
                       "bench", "halformer_bench_train")
    torch_py = os.path.join(root, "bench", "torch_train.py")
    if not os.path.exists(exe):
        raise SystemExit(f"{exe} is missing: cmake --build {a.build} --target halformer_bench_train")
    machine = cpu_name()
    date = datetime.date.today().isoformat()
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":(exclude)bench/results"], capture_output=True, text=True).stdout.strip()
    slug = re.sub(r"[^a-z0-9]+", "-", machine.lower()).strip("-")[:40]
    outdir = a.out or os.path.join(root, "bench", "results", f"train-{slug}-{date}")
    os.makedirs(outdir, exist_ok=True)
    load_avg = os.getloadavg()
    nproc = os.cpu_count()

    configs = [("small", a.small_steps)] + ([] if a.no_base else [("base", a.base_steps)])
    th = ["--threads", str(a.threads)]
    train = {}
    with open(os.path.join(outdir, "run.log"), "w") as log:
        for cfg, steps in configs:
            tj, hj = os.path.join(outdir, f"torch-{cfg}.json"), os.path.join(outdir, f"halformer-{cfg}.json")
            run(["/usr/bin/python3", torch_py, "--config", cfg, "--steps", str(steps), "--json", tj] + th, log,
                a.timeout)
            run([exe, "--config", cfg, "--steps", str(steps), "--json", hj] + th, log, a.timeout)
            train[cfg] = (load(tj), load(hj))
        tj, hj = os.path.join(outdir, "torch-ops.json"), os.path.join(outdir, "halformer-ops.json")
        run(["/usr/bin/python3", torch_py, "--ops", "--iters", str(a.iters), "--json", tj] + th, log, a.timeout)
        run([exe, "--ops", "--iters", str(a.iters), "--json", hj] + th, log, a.timeout)
        t_ops, h_ops = load(tj), load(hj)

    torch_version = t_ops.get("torch_version", "?")
    lines = [f"# Halformer training against PyTorch: {machine}", "",
             f"- date {date}, machine {machine} ({nproc} CPUs), commit `{commit}`"
             f"{' (with uncommitted changes)' if dirty else ''}, {a.threads} threads for both",
             f"- PyTorch {torch_version} (fp32, eager, bench/torch_train.py) against halformer_bench_train "
             f"(bench/train_bench.cpp); load average before the run {load_avg[0]:.2f} / {load_avg[1]:.2f} / "
             f"{load_avg[2]:.2f}",
             f"- command: `/usr/bin/python3 bench/train_report.py --threads {a.threads} --small-steps {a.small_steps}"
             f" --base-steps {a.base_steps} --iters {a.iters}{' --no-base' if a.no_base else ''}`",
             "- a step is zero_grad + forward + label-smoothed loss + backward + Adam (with the warm-up schedule); "
             "dropout 0.1, smoothing 0.1; random full-length token batches, a new one each step; median of the "
             "timed steps after 2 warm-up steps",
             "- the models: the same encoder-decoder (post-LN, ReLU, sinusoidal positions, embeddings × √d, "
             "source/target embeddings and output projection one tensor, Adam β = (0.9, 0.98), ε = 1e-9, warm-up "
             "4000). Differences in work: PyTorch's model (tests/make_fixtures.py) adds final LayerNorms to both "
             "stacks (the params' difference) and nn.Transformer's dropout also on the attention weights and the "
             "FFN hidden layer; ours drops out the embedding sums and each sub-layer's output only (the paper's "
             "section 5.4)",
             "- tokens/s counts target tokens (the decoder's predicted positions: 23 random tokens + eos per "
             "sequence, read as bos + the 23), the same count on both sides", "",
             "## Whole training step", "",
             "| config | shape (batch × src / tgt) | params torch / ours | steps | torch s/step | ours s/step "
             "| torch tgt tok/s | ours tgt tok/s | ours / torch | goal ≥ 2× |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for cfg, _ in configs:
        t, h = train[cfg]
        r = h["tgt_tokens_per_s"] / t["tgt_tokens_per_s"]
        goal = (f"met ({r / GOAL_SPEED:.2f}× the goal)" if r >= GOAL_SPEED else
                f"missed: {r:.2f}× is {GOAL_SPEED / r:.2f}× short of 2×")
        lines.append(f"| {cfg} | {h['batch']} × {h['src_len']} / {h['tgt_len']} | {t['params']:,} / "
                     f"{h['params']:,} | {h['steps']} | {t['median_step_s']:.3f} | {h['median_step_s']:.3f} "
                     f"| {t['tgt_tokens_per_s']:.0f} | {h['tgt_tokens_per_s']:.0f} | {fmt_ratio(r)} | {goal} |")
    lines += ["", "## Peak memory", "",
              "peak = ru_maxrss of each process (the whole process: PyTorch's includes Python and torch "
              "themselves); start = VmRSS just before the first step (model, optimizer state and batches made); "
              "peak − start = what training added. Ours' start already holds the gradients and both Adam moments "
              "(4 × params × 4 B, allocated by Trainer::create); PyTorch makes .grad and Adam's state in the first "
              "step, so they fall in its peak − start. Goal: ours ≤ PyTorch's.", "",
              "| config | torch peak MB | ours peak MB | ours / torch | torch start MB | ours start MB "
              "| torch peak − start MB | ours peak − start MB | ours / torch | goal peak ≤ torch |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for cfg, _ in configs:
        t, h = train[cfg]
        td, hd = t["peak_rss_mb"] - t["start_rss_mb"], h["peak_rss_mb"] - h["start_rss_mb"]
        pr = h["peak_rss_mb"] / t["peak_rss_mb"]
        goal = "met" if pr <= 1 else f"missed by {h['peak_rss_mb'] - t['peak_rss_mb']:.0f} MB"
        lines.append(f"| {cfg} | {t['peak_rss_mb']:.0f} | {h['peak_rss_mb']:.0f} | {fmt_ratio(pr)} | "
                     f"{t['start_rss_mb']:.0f} | {h['start_rss_mb']:.0f} | {td:.0f} | {hd:.0f} | "
                     f"{fmt_ratio(hd / td) if td > 0 else '–'} | {goal} |")

    # Per-op backward.
    lines += ["", "## Backward of single ops (small config's shapes)", "",
              f"Median ms of {a.iters} runs after 2 warm-ups. PyTorch: y.backward(dY) with autograd (the forward "
              "untimed before it). Ours: the generated kernels called directly; a linear's backward is "
              "hf_linear_backward_data (dX) + hf_linear_backward_weight (dW, db); the cross-entropy kernel "
              "computes the loss and dlogits in one pass (so it includes what torch's untimed forward does); "
              "nn_mha_self is composed as the trainer runs it (out_proj dX, dW/db; causal attention over strided "
              "views of the fused QKV; in_proj dW/db, dX); embedding includes the host's distinct-id/slot pass; "
              "layer_norm_256 is the post-LN LN(x + residual) backward training runs, layer_norm_256_plain the "
              "plain one. speed-up = torch ms / ours ms (> 1: ours faster).", "",
              "| op | torch forward ms | torch backward ms | ours ms | speed-up | ours' parts (ms) |",
              "|---|---|---|---|---|---|"]
    plot_ops = []
    for name, ms in h_ops["ops"].items():
        cp = h_ops.get("counterpart", {}).get(name, name)
        tb = t_ops["ops"].get(cp)
        tf = t_ops.get("ops_forward", {}).get(cp)
        parts = ", ".join(f"{k} {v:.3f}" for k, v in h_ops.get("parts", {}).get(name, {}).items())
        label = name if cp == name else f"{name} (vs torch {cp})"
        lines.append(f"| {label} | {tf:.3f} | {tb:.3f} | {ms:.3f} | {fmt_ratio(tb / ms)} | {parts} |"
                     if tb is not None else f"| {label} | – | – | {ms:.3f} | – | {parts} |")
        if tb is not None:
            plot_ops.append((name, tb / ms))
    missing = [n for n in t_ops["ops"] if n not in h_ops.get("counterpart", {}).values()]
    for n in missing:
        lines.append(f"| {n} (torch only) | {t_ops['ops_forward'][n]:.3f} | {t_ops['ops'][n]:.3f} | – | – | |")

    # Our kernel breakdown.
    for cfg, _ in configs:
        t, h = train[cfg]
        # The profile is a sum over the timed steps: shares are of the mean step.
        step_ms = 1e3 * sum(h["step_s"]) / len(h["step_s"])
        ks = sorted(h["kernels"].items(), key=lambda kv: -kv[1])
        total = sum(v for _, v in ks)
        lines += ["", f"## Our kernels per step: {cfg}", "",
                  f"model().profile() summed over the {h['steps']} timed steps / {h['steps']} (ms per step; shares "
                  f"of the mean step, {step_ms:.0f} ms; the median is {h['median_step_s'] * 1e3:.0f} ms). "
                  "Names are the runtime's kernel families: "
                  "`linear` is every forward projection (the output head included), `linear_backward` every dX "
                  "and dW/db kernel (the head's included).", "",
                  "| kernel | ms / step | calls / step | share of step |", "|---|---|---|---|"]
        for name, ms in ks:
            calls = h.get("kernel_calls", {}).get(name, 0)
            lines.append(f"| {name} | {ms:.1f} | {calls:.0f} | {ms / step_ms:.1%} |")
        lines.append(f"| (outside kernels: host work, step − Σ kernels) | {step_ms - total:.1f} | | "
                     f"{(step_ms - total) / step_ms:.1%} |")
    lines += ["", "![training throughput and per-op speed-ups](train.png)", ""]
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("\n".join(lines))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [1, 1.6]})
        names = [cfg for cfg, _ in configs]
        xs = range(len(names))
        tv = [train[c][0]["tgt_tokens_per_s"] for c in names]
        hv = [train[c][1]["tgt_tokens_per_s"] for c in names]
        ax1.bar([x - 0.2 for x in xs], tv, width=0.4, label=f"PyTorch {torch_version}")
        ax1.bar([x + 0.2 for x in xs], hv, width=0.4, label="Halformer")
        ax1.scatter([x + 0.2 for x in xs], [GOAL_SPEED * v for v in tv], marker="_", s=900, color="black",
                    label="goal: 2× PyTorch", zorder=3)
        ax1.set_ylim(0, 1.3 * max(hv + [GOAL_SPEED * v for v in tv]))
        for x, (t_, h_) in enumerate(zip(tv, hv)):
            ax1.annotate(f"{h_ / t_:.2f}×", (x + 0.2, h_), ha="center", va="bottom", fontsize=8)
        ax1.set_xticks(list(xs))
        ax1.set_xticklabels(names)
        ax1.set_ylabel("target tokens / s")
        ax1.set_title(f"whole training step, {a.threads} threads", fontsize=9)
        ax1.legend(fontsize=8, loc="upper left")
        ax2.barh(range(len(plot_ops)), [r for _, r in plot_ops],
                 color=["tab:green" if r >= 1 else "tab:red" for _, r in plot_ops])
        ax2.set_yticks(range(len(plot_ops)))
        ax2.set_yticklabels([n for n, _ in plot_ops], fontsize=7)
        ax2.set_xscale("log")
        ax2.axvline(1.0, color="black", lw=0.8)
        ax2.axvline(GOAL_SPEED, color="gray", lw=0.8, ls="--")
        ax2.invert_yaxis()
        ax2.set_xlabel("backward speed-up, torch ms / ours ms (> 1: ours faster)")
        ax2.set_title("single ops (small config's shapes)", fontsize=9)
        fig.suptitle(f"Halformer vs PyTorch training — {machine}, {date}, {commit}", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "train.png"), dpi=110)
    except ImportError:
        print("python3-matplotlib is missing: no plot (apt-get install python3-matplotlib)", file=sys.stderr)
    print(os.path.join(outdir, "report.md"))


if __name__ == "__main__":
    main()
