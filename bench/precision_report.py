#!/usr/bin/python3
"""Precision report: fp32, bf16 and int8 side by side, in one run.

  /usr/bin/python3 bench/precision_report.py [--build build] [--model models/en-de]
                                              [--test-src F --test-ref F] [--quick]

1. linear kernels (build/bench/halformer_bench_kernels): ours in fp32, bf16
   and int8 beside oneDNN's f32, bf16 and u8·s8 matmuls, at decode (1, 32
   rows) and prefill (128, 1024 rows) shapes; and PyTorch's fp32 and bf16
   matmul (Debian's python3-torch, same threads) at the prefill shapes;
2. the demo translator (`halformer bench`, batch 32 x beam 4) and the
   paper's base model (random weights) in each precision: tokens/s;
3. given a test split, the translator's BLEU and chrF in each precision
   (`halformer eval`, beam 4).
Writes bench/results/precision-<cpu>-<date>/: report.md, precision.png and
the raw JSON. Our kernels run this CPU's best variant; 2 threads unless
HALFORMER_THREADS says otherwise.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from report import cpu_name  # noqa: E402  (bench/report.py)
ROOT = os.path.dirname(HERE)
PRECISIONS = ["fp32", "bf16", "int8"]


def progress(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_kernels(exe, filt, out):
    # Repetitions of all benchmarks in random order: ours and the baselines
    # are measured interleaved in time, so a machine that slows down or
    # speeds up mid-run moves both (this machine is shared and noisy).
    cmd = [exe, f"--benchmark_filter={filt}", "--benchmark_format=json", f"--benchmark_out={out}",
           "--benchmark_enable_random_interleaving=true",
           "--benchmark_out_format=json"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        op, shape, impl = b["name"].split("/")[:3]
        unit = "GFLOP/s" if b.get("GFLOP/s") else "GB/s"  # (the other is 0, or absent in older runs)
        rate = b.get(unit)
        rows.setdefault((op, shape), {})[impl] = {"rate": rate, "unit": unit,
                                                   "peak": b.get("peak")}
    return data.get("context", {}), rows


def torch_matmul(shapes, threads):
    code = r"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
out = {}
for M, K, N in json.loads(sys.argv[2]):
    for dt in ("fp32", "bf16"):
        t = torch.float32 if dt == "fp32" else torch.bfloat16
        x = torch.randn(M, K).to(t); w = torch.randn(N, K).to(t); b = torch.randn(N).to(t)
        f = lambda: torch.nn.functional.linear(x, w, b)
        for _ in range(3): f()
        ts = []
        for _ in range(15):
            t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
        ts.sort()
        out[f"{M}x{K}x{N}/{dt}"] = 2.0 * M * K * N / ts[len(ts) // 2] / 1e9
print(json.dumps(out))
"""
    try:
        r = subprocess.run(["/usr/bin/python3", "-c", code, str(threads), json.dumps(shapes)], check=True,
                           capture_output=True, text=True)
        return json.loads(r.stdout)
    except (subprocess.CalledProcessError, FileNotFoundError, json.JSONDecodeError) as e:
        progress(f"PyTorch baseline skipped: {e}")
        return {}


def run_json(cmd):
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "en-de"))
    ap.add_argument("--test-src")
    ap.add_argument("--test-ref")
    ap.add_argument("--quick", action="store_true", help="fewer shapes and iterations (a smoke test)")
    ap.add_argument("--out")
    args = ap.parse_args()
    threads = int(os.environ.get("HALFORMER_THREADS", "2"))
    exe = os.path.join(args.build, "bench", "halformer_bench_kernels")
    hf = os.path.join(args.build, "halformer")
    for p in (exe, hf):
        if not os.path.exists(p):
            sys.exit(f"precision_report: {p} is missing; build the project first (./scripts/build.sh)")
    date = datetime.date.today().isoformat()
    cpu = re.sub(r"[^a-z0-9]+", "-", cpu_name().lower()).strip("-")[:40]
    out = args.out or os.path.join(HERE, "results", f"precision-{cpu}-{date}")
    os.makedirs(out, exist_ok=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()

    ms = "(1|128)" if args.quick else "(1|32|128|1024)"
    kn = "(512x2048)" if args.quick else "(512x512|512x2048|2048x512)"
    filt = f"^linear(_bf16|_int8)?/{ms}x{kn}/(hand|hand_dot|onednn)/"
    progress("linear kernels: ours and oneDNN in fp32, bf16, int8")
    context, kernels = run_kernels(exe, filt, os.path.join(out, "kernels.json"))
    shapes = sorted({tuple(int(v) for v in s.split("x")) for (_, s) in kernels})
    progress("PyTorch fp32 / bf16 linear")
    torch_rates = torch_matmul([list(s) for s in shapes if s[0] >= 128], threads)

    models = {}
    for label, src in (("translator", [args.model]), ("base", ["--config", "base"])):
        for p in PRECISIONS:
            progress(f"{label} model, {p}: batch 32 x beam 4")
            iters = "2" if args.quick else "5"
            models[(label, p)] = run_json([hf, "bench", *src, "--batch", "32", "--src-len", "20", "--beam", "4",
                                           "--new-tokens", "32", "--iters", iters, "--precision", p, "--json",
                                           "--threads", str(threads)])
    quality = {}
    if args.test_src and args.test_ref:
        for p in PRECISIONS:
            progress(f"translator test split, {p}, beam 4")
            jpath = os.path.join(out, f"eval-{p}.json")
            if os.path.exists(jpath):
                os.remove(jpath)
            subprocess.run([hf, "eval", args.model, "--src", args.test_src, "--ref", args.test_ref, "--beam", "4",
                            "--precision", p, "--json", jpath, "--threads", str(threads)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(jpath) as f:
                quality[p] = json.load(f)

    raw = {"date": date, "commit": commit, "cpu": cpu_name(), "threads": threads, "context": context,
           "kernels": {f"{op}/{s}": v for (op, s), v in kernels.items()}, "torch": torch_rates,
           "models": {f"{m}/{p}": v for (m, p), v in models.items()}, "quality": quality}
    with open(os.path.join(out, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)

    # ---- report ----
    L = []
    L.append(f"# Precision report: fp32, bf16, int8 ({date})\n")
    L.append(f"Machine: {cpu_name()}, {threads} threads; our kernels: {context.get('halformer_variant', '?')} "
             f"variant; FMA peak probe {float(context.get('fma_peak_gflops', 0)):.0f} GFLOP/s (fp32), read "
             f"bandwidth probe {float(context.get('read_bandwidth_gbs', 0)):.1f} GB/s. Commit {commit}. "
             f"Every figure is a median, all measured in this one run by `bench/precision_report.py`.\n")
    L.append("## Linear Y = X·Wᵀ + b against oneDNN and PyTorch\n")
    L.append("Prefill shapes (M ≥ 128) in GFLOP/s (int8: GOP/s); decode shapes (M ≤ 32) in GB/s of "
             "weights + activations moved. Ours: the runtime's kernel for the shape (the one-row `_dot` "
             "variant at M = 1). oneDNN is given its best case: activations already in bf16 / u8 and weights "
             "reordered once into its layout; ours converts (bf16) or quantizes per row (int8) the float32 "
             "activations inside the call and rescales per row and column.\n")
    L.append("| shape M×K→N | fp32 ours | oneDNN f32 | ratio | bf16 ours | oneDNN bf16 | ratio | int8 ours | "
             "oneDNN u8·s8 | ratio | PyTorch fp32 | PyTorch bf16 |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    plot = []
    for M, K, N in shapes:
        s = f"{M}x{K}x{N}"
        cells = [f"{M}×{K}→{N}"]
        entry = {"shape": s}
        for op in ("linear", "linear_bf16", "linear_int8"):
            v = kernels.get((op, s), {})
            impl = "hand_dot" if M == 1 and "hand_dot" in v else "hand"
            ours, dn = v.get(impl, {}).get("rate"), v.get("onednn", {}).get("rate")
            cells += [f"{ours:.0f}" if ours else "–", f"{dn:.0f}" if dn else "–",
                      f"**{ours / dn:.2f}×**" if ours and dn else "–"]
            entry[op] = (ours, dn)
        cells += [f"{torch_rates[s + '/fp32']:.0f}" if s + "/fp32" in torch_rates else "–",
                  f"{torch_rates[s + '/bf16']:.0f}" if s + "/bf16" in torch_rates else "–"]
        L.append("| " + " | ".join(cells) + " |")
        plot.append(entry)
    L.append("")
    L.append("## Whole models, batch 32 × beam 4 (32 new tokens, sources of 20 tokens)\n")
    L.append("| model | precision | beam tokens/s | × fp32 | greedy tokens/s | × fp32 | encoder ms | decoder step ms | peak RSS MB |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for label in ("translator", "base"):
        f32 = models[(label, "fp32")]
        for p in PRECISIONS:
            m = models[(label, p)]
            L.append(f"| {label} ({m['parameters'] / 1e6:.1f} M) | {p} | {m['beam_tokens_per_s']:.0f} | "
                     f"{m['beam_tokens_per_s'] / f32['beam_tokens_per_s']:.2f}× | {m['greedy_tokens_per_s']:.0f} | "
                     f"{m['greedy_tokens_per_s'] / f32['greedy_tokens_per_s']:.2f}× | {m['encoder_ms']:.2f} | "
                     f"{m['decoder_step_ms']:.2f} | {m['peak_rss_mb']:.0f} |")
    L.append("")
    if quality:
        L.append(f"## Translation quality ({quality['fp32']['sentences']} test sentences, beam 4)\n")
        L.append("| precision | BLEU | Δ fp32 | chrF | Δ fp32 | seconds |")
        L.append("|---|---|---|---|---|---|")
        for p in PRECISIONS:
            q = quality[p]
            L.append(f"| {p} | {q['bleu']:.2f} | {q['bleu'] - quality['fp32']['bleu']:+.2f} | {q['chrf']:.2f} | "
                     f"{q['chrf'] - quality['fp32']['chrf']:+.2f} | {q['seconds']:.1f} |")
        L.append("")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(L))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(14, 5), gridspec_kw={"width_ratios": [3, 1]})
        ax = axes[0]
        xs = range(len(plot))
        width = 0.14
        series = [("linear", 0, "fp32 ours"), ("linear", 1, "oneDNN f32"), ("linear_bf16", 0, "bf16 ours"),
                  ("linear_bf16", 1, "oneDNN bf16"), ("linear_int8", 0, "int8 ours"), ("linear_int8", 1, "oneDNN int8")]
        for k, (op, idx, label) in enumerate(series):
            vals = [(e[op][idx] or 0) for e in plot]
            ax.bar([x + (k - 2.5) * width for x in xs], vals, width, label=label,
                   hatch="//" if idx else None, color=f"C{k // 2}", alpha=0.6 if idx else 1.0)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([e["shape"].replace("x", "×", 1).replace("x", "→") for e in plot], rotation=30, ha="right")
        ax.set_ylabel("GFLOP/s (M ≥ 128) or GB/s (M ≤ 32)")
        ax.set_title("linear: ours vs oneDNN, same run")
        ax.legend(fontsize=8, ncol=3)
        ax = axes[1]
        for k, label in enumerate(("translator", "base")):
            vals = [models[(label, p)]["beam_tokens_per_s"] / models[(label, "fp32")]["beam_tokens_per_s"]
                    for p in PRECISIONS]
            ax.bar([x + (k - 0.5) * 0.35 for x in range(3)], vals, 0.35, label=label)
        ax.set_xticks(range(3))
        ax.set_xticklabels(PRECISIONS)
        ax.set_ylabel("beam tokens/s relative to fp32")
        ax.set_title("batch 32 × beam 4")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "precision.png"), dpi=110)
    except ImportError:
        progress("matplotlib missing (apt-get install python3-matplotlib): no plot")
    progress(f"wrote {out}/report.md")


if __name__ == "__main__":
    main()
