#!/usr/bin/python3
"""Plots a `halformer train` log (one JSON object a line): training loss and,
when present, validation loss against steps, with the learning rate on a
second axis.  Usage: plot_training.py train.log training.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    log, out = sys.argv[1], sys.argv[2]
    rows = [json.loads(l) for l in open(log) if l.strip()]
    if not rows:
        sys.exit("empty log")
    # A resumed run appends: keep the last entry of each step.
    by_step = {}
    for r in rows:
        by_step[r["step"]] = r
    rows = [by_step[s] for s in sorted(by_step)]
    steps = [r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(steps, [r["loss"] for r in rows], lw=1, label="training loss (label-smoothed)")
    vs = [(r["step"], r["valid_loss"]) for r in rows if "valid_loss" in r]
    if vs:
        ax.plot([s for s, _ in vs], [v for _, v in vs], "o-", ms=3, label="validation loss (NLL)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss per target token")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(steps, [r["lr"] for r in rows], color="gray", lw=0.8, ls="--", label="learning rate")
    ax2.set_ylabel("learning rate")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper right", fontsize=8)
    ax.set_title("halformer train: %d steps, final loss %.4f" % (steps[-1], rows[-1]["loss"]))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
