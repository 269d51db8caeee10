#!/usr/bin/python3
"""How near the machine's peak the projections and attention run: linear
(fp32 and int8, 512 -> 2048, M in 1, 4, 32, 128, 1024) against oneDNN, and
attention against the FMA peak, in one run of build/bench/halformer_bench_kernels
with every benchmark's repetitions interleaved in random order. Writes
bench/results/<cpu>-<date>/peak.md, peak.json and peak.png.

  /usr/bin/python3 bench/peak_report.py [--build build] [--out DIR] [--models]

--models adds the whole base model against PyTorch (bench/torch_baseline.py,
ours in fp32 and in int8, each interleaved with PyTorch) to the same report.

"ours" is the kernel the runtime calls for that shape on this CPU
(runtime/src/model/packed.cpp, layers/linear.cpp, as the benchmark's context
halformer_fp32_packing says): float32 packed panels at every M on an AVX-512
or AVX2 variant ("all"), at a decoding step's M <= 4 on SSE4.1 ("steps":
prefill on W as stored), the one-row packed kernel at M = 1; with packing off ("none") the
unpacked ones, their dot-product form at M <= 4; int8 the one-row kernel at
M = 1. Needs Debian's python3-matplotlib for the plot.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import run_kernels  # noqa: E402  (the benchmark run and its medians)

MS = [1, 4, 32, 128, 1024]


def cpu_tag():
    name = "cpu"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


FILTER = (r"^(linear|linear_int8)/(1|4|32|128|1024)x512x2048/(hand|hand_dot|packed|packed_dot|onednn)/"
          r"|^attention(_causal)?/8x(128|512|2048)x64/hand/")


def ours(rows, op, M, packing):
    shape = f"{M}x512x2048"
    if op == "linear":
        packs = packing == "all" or (packing == "steps" and M <= 4)
        names = (["packed_dot"] if M == 1 else ["packed"]) if packs else (["hand_dot"] if M <= 4 else ["hand"])
    else:
        names = ["hand_dot"] if M == 1 else ["hand"]
    for n in names:
        if (op, shape, n) in rows:
            return n, rows[(op, shape, n)]
    return None, None


def whole_models(a, root, outdir):
    """The paper's base model, ours in fp32 and int8 against PyTorch in
    float32, each run interleaved with PyTorch's (torch_baseline.py)."""
    lines = ["", f"## the whole base model against PyTorch (`torch_baseline.py {a.model_args}`)", "",
             "| halformer precision | encoder ms (PyTorch) | decoder step ms | greedy tokens/s | beam tokens/s |",
             "|---|---|---|---|---|"]
    for precision in ("fp32", "int8"):
        out = os.path.join(outdir, f"model-{precision}.json")
        print(f"whole model, {precision}: torch_baseline.py {a.model_args}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, os.path.join(root, "bench", "torch_baseline.py"), *a.model_args.split(),
                        "--halformer", os.path.join(a.build, "halformer"), "--precision", precision,
                        "--json-out", out], check=True)
        with open(out) as f:
            r = json.load(f)["results"]

        def cell(k):
            return f"{r[k]['halformer']:.1f} ({r[k]['pytorch']:.1f}): {r[k]['ratio']:.2f}×"
        lines.append(f"| {precision} | " + " | ".join(cell(k) for k in ("encoder_ms", "decoder_step_ms",
                                                                          "greedy_tokens_per_s", "beam_tokens_per_s"))
                     + " |")
    lines += ["", "Ratios above 1: ours faster (time: PyTorch's over ours; tokens/s: ours over PyTorch's); "
              "PyTorch runs float32 both times."]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="")
    ap.add_argument("--models", action="store_true",
                    help="then the whole base model against PyTorch (bench/torch_baseline.py, fp32 and int8), "
                         "in the same report")
    ap.add_argument("--model-args", default="--batch 8 --src-len 64 --new-tokens 32 --beam 4 --iters 3",
                    help="torch_baseline.py's workload with --models")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    date = datetime.date.today().isoformat()
    outdir = a.out or os.path.join(root, "bench", "results", f"{cpu_tag()}-{date}")
    os.makedirs(outdir, exist_ok=True)
    exe = os.path.join(a.build, "bench", "halformer_bench_kernels")
    context, rows = run_kernels(exe, None, FILTER, os.path.join(outdir, "peak.json"))
    header = [f"machine: {context.get('num_cpus')} threads; probes: FMA peak "
              f"{float(context.get('fma_peak_gflops', 0)):.1f} GFLOP/s, read bandwidth "
              f"{float(context.get('read_bandwidth_gbs', 0)):.1f} GB/s",
              f"schedules: {context.get('halformer_schedules', '?')}"]
    variant = context.get("halformer_variant", "?")
    # (Runs before the context said it: the variant's default.)
    packing = context.get("halformer_fp32_packing", "all" if variant in ("avx512", "sapphirerapids") else "steps")
    peak = float(context.get("fma_peak_gflops", 0))
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    lines = [f"# Near the peak: {context.get('cpu', cpu_tag())}", "",
             f"- {date}, commit `{commit}`, {context.get('num_cpus')} threads, variant `{variant}`, "
             f"float32 packing `{packing}`"] + \
            [f"- {h}" for h in header] + \
            ["- medians of 5 repetitions, all benchmarks' repetitions interleaved in random order; "
             "ratio = oneDNN's time / ours (> 1: ours faster); `peak` = fraction of the FMA peak (GFLOP/s) or "
             "of the read bandwidth (GB/s: cache-resident weights exceed 1)", "",
             "## linear 512 → 2048 against oneDNN (its weights prepacked in its own layout)", "",
             "| op | M | ours (kernel) | ms | oneDNN ms | ratio | metric | ours | oneDNN |", "|---|---|---|---|---|---|---|---|---|"]
    plot = []
    for op in ("linear", "linear_int8"):
        for M in MS:
            name, r = ours(rows, op, M, packing)
            d = rows.get((op, f"{M}x512x2048", "onednn"))
            if not r or not d:
                continue
            ratio = d["ms"] / r["ms"]
            plot.append((f"{'fp32' if op == 'linear' else 'int8'} M={M}", ratio))
            lines.append(f"| {'fp32' if op == 'linear' else 'int8'} | {M} | {name} | {r['ms']:.4f} | {d['ms']:.4f} "
                         f"| {ratio:.2f}× | {r['metric']} | {r['value']:.1f} ({r['peak']:.0%}) | "
                         f"{d['value']:.1f} ({d['peak']:.0%}) |")
    lines += ["", f"## attention (8 heads, d_k 64) against the FMA peak ({peak:.1f} GFLOP/s)", "",
              "| op | T | ms | GFLOP/s | of peak |", "|---|---|---|---|---|"]
    for op in ("attention", "attention_causal"):
        for T in (128, 512, 2048):
            r = rows.get((op, f"8x{T}x64", "hand"))
            if r:
                lines.append(f"| {op} | {T} | {r['ms']:.3f} | {r['value']:.1f} | {r['peak']:.0%} |")
    if a.models:
        lines += whole_models(a, root, outdir)
    lines += ["", "![ratios](peak.png)", ""]
    with open(os.path.join(outdir, "peak.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(9, 4))
        ax.bar([p[0] for p in plot], [p[1] for p in plot],
               color=["tab:blue" if p[0].startswith("fp32") else "tab:orange" for p in plot])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(0.9, color="tab:green", lw=0.8, ls="--")
        ax.axhline(0.8, color="tab:red", lw=0.8, ls=":")
        ax.set_ylabel("oneDNN time / ours")
        ax.set_title(f"linear 512→2048 against oneDNN, {context.get('cpu', '')[:60]}", fontsize=9)
        plt.xticks(rotation=45, ha="right", fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "peak.png"), dpi=110)
    except ImportError:
        print("no plot: python3-matplotlib is missing", file=sys.stderr)


if __name__ == "__main__":
    main()
