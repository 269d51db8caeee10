#!/usr/bin/python3
"""Writes report.md and gpu.png for a bench/gpu/run_gpu.sh results folder:
halformer's CUDA kernels and model against PyTorch fp32 on the same GPU, as
ratios (> 1: halformer faster), and the issue's goals: linear >= 0.8x cuBLAS,
attention >= 1x SDPA at T >= 1024, encoder forward >= 1x PyTorch eager.

  python3 bench/gpu/report_gpu.py RESULTS_DIR [--commit C]
"""
import argparse
import datetime
import json
import os


def lines(path):
    out = []
    if not os.path.exists(path):
        return out
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--commit", default="unknown")
    a = ap.parse_args()
    ours = {(r["op"], r["shape"]): r for r in lines(os.path.join(a.dir, "halformer_kernels.json"))}
    torch_rows = lines(os.path.join(a.dir, "torch.json"))
    theirs = {(r["op"], r["shape"]): r for r in torch_rows if "shape" in r}
    device = next((r for r in torch_rows if r.get("op") == "device"), {})
    tmodel = next((r for r in torch_rows if r.get("op") == "model"), None)
    hmodel = (lines(os.path.join(a.dir, "halformer_model.json")) or [None])[0]

    md = [f"# halformer on {device.get('name', os.path.basename(a.dir))} vs PyTorch fp32", "",
          f"date {datetime.date.today()}, commit {a.commit}, torch {device.get('torch', '?')}; "
          "medians; ratio = PyTorch time / halformer time (> 1: halformer faster).", "",
          "| op | shape | halformer ms | PyTorch ms | ratio | halformer rate | err vs CPU | goal |",
          "|---|---|---|---|---|---|---|---|"]
    plot = []
    li = {}
    for key, r in list(ours.items()):
        if r["op"].endswith("_li2018"):
            li[(r["op"][:-len("_li2018")], r["shape"])] = ours.pop(key)
    for key, r in ours.items():
        t = theirs.get(key)
        ratio = t["ms"] / r["ms"] if t else None
        goal = ""
        if ratio is not None:
            if r["op"] == "linear":
                goal = "met (>= 0.8)" if ratio >= 0.8 else "missed (< 0.8)"
            elif r["op"].startswith("attention") and int(r["shape"].split("T")[1].split()[0]) >= 1024:
                goal = "met (>= 1)" if ratio >= 1 else "missed (< 1)"
            plot.append((f"{r['op']} {r['shape']}", ratio))
        md.append(f"| {r['op']} | {r['shape']} | {r['ms']:.4f} | {t['ms']:.4f} | {ratio:.2f} | "
                  f"{r['rate']:.0f} {r['unit']} | {r['rel_err_vs_cpu']:.1e} | {goal} |" if t else
                  f"| {r['op']} | {r['shape']} | {r['ms']:.4f} | - | - | {r['rate']:.0f} {r['unit']} | "
                  f"{r['rel_err_vs_cpu']:.1e} | no baseline |")
    md.append("")
    if li:
        md += ["## Hand GPU schedules vs Halide's Li2018 autoscheduler", "",
               "| op | shape | hand ms | Li2018 ms | Li2018 time / hand time |", "|---|---|---|---|---|"]
        for key, l in li.items():
            h = ours.get(key)
            if h:
                md.append(f"| {key[0]} | {key[1]} | {h['ms']:.4f} | {l['ms']:.4f} | {l['ms'] / h['ms']:.2f} |")
        md.append("")
    if hmodel and tmodel:
        enc = tmodel["encoder_ms"] / hmodel["encoder_ms"]
        tok = hmodel["greedy_tokens_per_s"] / tmodel["greedy_tokens_per_s"]
        md += ["## Base model (6+6 layers, d_model 512), batch "
               f"{tmodel['batch']}, source length {tmodel['src_len']}", "",
               "| | halformer | PyTorch eager | ratio |", "|---|---|---|---|",
               f"| encoder forward ms | {hmodel['encoder_ms']:.3f} | {tmodel['encoder_ms']:.3f} | {enc:.2f} "
               f"({'met' if enc >= 1 else 'missed'}: goal >= 1) |",
               f"| greedy tokens/s | {hmodel['greedy_tokens_per_s']:.1f} | {tmodel['greedy_tokens_per_s']:.1f} | "
               f"{tok:.2f} |", ""]
        plot += [("encoder forward", enc), ("greedy decode", tok)]
    open(os.path.join(a.dir, "report.md"), "w").write("\n".join(md) + "\n")
    print("\n".join(md))
    if plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(8, 0.35 * len(plot) + 1.5))
            names, vals = zip(*plot)
            ax.barh(range(len(vals)), vals, color=["tab:green" if v >= 1 else "tab:orange" for v in vals])
            ax.set_yticks(range(len(vals)))
            ax.set_yticklabels(names, fontsize=8)
            ax.axvline(1.0, color="k", lw=0.8)
            ax.axvline(0.8, color="gray", lw=0.8, ls="--")
            ax.invert_yaxis()
            ax.set_xlabel("PyTorch fp32 time / halformer time (> 1: halformer faster)")
            ax.set_title(f"halformer CUDA vs PyTorch on {device.get('name', '?')}")
            fig.tight_layout()
            fig.savefig(os.path.join(a.dir, "gpu.png"), dpi=110)
        except ImportError:
            print("(matplotlib missing: no gpu.png)")


if __name__ == "__main__":
    main()
