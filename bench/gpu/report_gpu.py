#!/usr/bin/python3
"""Writes report.md and gpu.png for a bench/gpu/run_gpu.sh results folder:
halformer's CUDA kernels and model against PyTorch fp32 on the same GPU
(ratio = PyTorch time / halformer time, > 1: halformer faster) and against
the machine's limits (the FMA peak without tensor cores, given; the memory
bandwidth, measured by a device-to-device copy in the same run), with the
goals of issue 40:
  linear at M >= 128               >= 0.6x cuBLAS fp32
  decode linear (M <= 32)          weights read at >= 60% of the bandwidth
  attention                        >= 0.5x SDPA fp32
  row ops (softmax, log_softmax,   >= 60% of the bandwidth
  layer_norm, argmax)

  python3 bench/gpu/report_gpu.py RESULTS_DIR [--commit C] [--fma-tflops 67]
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
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def goal(r, t, bw):
    """(text, met or None) for one of our rows, its PyTorch row t, bandwidth bw GB/s."""
    op, shape = r["op"], r["shape"]
    ratio = t["ms"] / r["ms"] if t else None
    if op == "linear" and int(shape.split("x")[0]) >= 128:
        return ("0.6x cuBLAS", None if ratio is None else ratio >= 0.6)
    if op.startswith("linear") and "weight_gbs" in r and bw:
        return ("60% of bandwidth", r["weight_gbs"] / bw >= 0.6)
    if op.startswith("attention"):
        return ("0.5x SDPA", None if ratio is None else ratio >= 0.5)
    if op in ("softmax", "log_softmax", "layer_norm", "argmax") and bw:
        return ("60% of bandwidth", r["rate"] / bw >= 0.6)
    return ("", None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--fma-tflops", type=float, default=67.0,
                    help="the GPU's fp32 FMA peak without tensor cores (H100 SXM: about 67)")
    a = ap.parse_args()
    kernel_rows = lines(os.path.join(a.dir, "halformer_kernels.json"))
    ours = {(r["op"], r["shape"]): r for r in kernel_rows if "shape" in r and r["op"] != "copy"}
    checks = [r for r in kernel_rows if r.get("op") == "check" and "what" in r]
    copy = next((r for r in kernel_rows if r.get("op") == "copy"), None)
    torch_rows = lines(os.path.join(a.dir, "torch.json"))
    theirs = {(r["op"], r["shape"]): r for r in torch_rows if "shape" in r and r["op"] != "copy"}
    tcopy = next((r for r in torch_rows if r.get("op") == "copy"), None)
    device = next((r for r in torch_rows if r.get("op") == "device"), {})
    tmodel = next((r for r in torch_rows if r.get("op") == "model"), None)
    hmodel = (lines(os.path.join(a.dir, "halformer_model.json")) or [None])[0]
    bw = copy["rate"] if copy else (tcopy["rate"] if tcopy else None)
    failed = [c for c in checks if not c.get("ok")]

    md = [f"# halformer on {device.get('name', os.path.basename(a.dir))} vs PyTorch fp32", "",
          f"date {datetime.date.today()}, commit {a.commit}, torch {device.get('torch', '?')}; medians; "
          "ratio = PyTorch time / halformer time (> 1: halformer faster).", "",
          f"Limits: FMA peak {a.fma_tflops:.0f} TFLOP/s (given); memory bandwidth "
          + (f"{bw:.0f} GB/s (a device-to-device copy, this run)" if bw else "unmeasured") + ".", "",
          f"Checks: {len(checks) - len(failed)} of {len(checks)} passed"
          + ("" if not failed else " — FAILED: " + "; ".join(c["what"] for c in failed)) + ".", "",
          "| op | shape | halformer ms | PyTorch ms | ratio | halformer rate | of the limit | goal |",
          "|---|---|---|---|---|---|---|---|"]
    plot = []
    li = {}
    for key, r in list(ours.items()):
        if r["op"].endswith("_li2018"):
            li[(r["op"][:-len("_li2018")], r["shape"])] = ours.pop(key)
    met = missed = 0
    for key, r in ours.items():
        t = theirs.get(key)
        ratio = t["ms"] / r["ms"] if t else None
        if r["unit"] == "GFLOP/s":
            limit = r["rate"] / (a.fma_tflops * 1e3)
            frac = f"{limit:.0%} of FMA peak"
            if "weight_gbs" in r and bw:
                frac += f"; weights {r['weight_gbs'] / bw:.0%} of bandwidth"
        else:
            frac = f"{r['rate'] / bw:.0%} of bandwidth" if bw else ""
        text, ok = goal(r, t, bw)
        if ok is not None:
            met += ok
            missed += not ok
            text = f"{'met' if ok else 'missed'} ({text})"
        if ratio is not None:
            plot.append((f"{r['op']} {r['shape']}", ratio))
        md.append(f"| {r['op']} | {r['shape']} | {r['ms']:.4f} | " + (f"{t['ms']:.4f} | {ratio:.2f}" if t else "- | -")
                  + f" | {r['rate']:.0f} {r['unit']} | {frac} | {text} |")
    md += ["", f"Goals: {met} met, {missed} missed.", ""]
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
               f"| encoder forward ms | {hmodel['encoder_ms']:.3f} | {tmodel['encoder_ms']:.3f} | {enc:.2f} |",
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
            ax.axvline(0.6, color="gray", lw=0.8, ls="--")
            ax.invert_yaxis()
            ax.set_xlabel("PyTorch fp32 time / halformer time (> 1: halformer faster)")
            ax.set_title(f"halformer CUDA vs PyTorch on {device.get('name', '?')}")
            fig.tight_layout()
            fig.savefig(os.path.join(a.dir, "gpu.png"), dpi=110)
        except ImportError:
            print("(matplotlib missing: no gpu.png)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
