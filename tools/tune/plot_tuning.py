#!/usr/bin/env python3
"""Plots a `halformer tune` run: per task, the best time found so far
(relative to the hand schedule) against tuning time.

usage: plot_tuning.py WORK/curve.csv OUT.png TITLE
curve.csv rows: task, spent_s, best_ms, hand_ms, kind (hand | adams2019 | confirmed)
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    curve, out, title = sys.argv[1:]
    tasks = {}
    with open(curve) as f:
        for row in csv.DictReader(f):
            try:
                t, best, hand = float(row["spent_s"]), float(row["best_ms"]), float(row["hand_ms"])
            except (KeyError, ValueError):
                continue
            if best > 0 and hand > 0 and best < float("inf"):
                adams = row["kind"] == "adams2019"
                tasks.setdefault((row["task"], adams), []).append((t / 60, hand / best, row["kind"]))
    fig, ax = plt.subplots(figsize=(12, 5.5))
    colors = {}
    for (name, adams), pts in tasks.items():
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        color = colors.setdefault(name, f"C{len(colors) % 10}")
        line, = ax.step(xs, ys, where="post", color=color, ls="--" if adams else "-", lw=1 if adams else 1.6,
                        label=f"{name} (Adams2019 samples)" if adams else name)
        final = [p for p in pts if p[2] == "confirmed"]
        if final:
            ax.plot(final[-1][0], final[-1][1], "o", color=line.get_color())
    ax.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_xlabel("tuning time (minutes)")
    ax.set_ylabel("speed-up over the hand schedule (best so far)")
    ax.set_title(f"halformer tune: {title}\nsolid: hand-schedule space (dot: confirmed by re-timing); dashed: Adams2019 with retraining")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
