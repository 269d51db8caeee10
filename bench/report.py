#!/usr/bin/python3
"""Cross-hardware report: every kernel benchmark and the end-to-end model
benchmark, forced onto each compiled x86 variant in turn (sse41, avx2,
avx512, sapphirerapids; variants this CPU cannot run are skipped), with the
baselines (OpenBLAS, oneDNN, Halide's autoschedulers) measured in the same
run. Writes bench/results/<cpu>-<date>/: report.md, kernels.png, and the raw
JSON of every run.

  /usr/bin/python3 bench/report.py [--build build] [--quick]

--quick runs fewer shapes (a smoke test of the report itself).
Needs Debian's python3-matplotlib for the plot.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys

VARIANTS = ["sse41", "avx2", "avx512", "sapphirerapids"]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown cpu"


def run_kernels(exe, variant, filt, out):
    """Runs the kernel benchmarks forced onto `variant` (None: the CPU's own);
    returns the run's context and {(op, shape, impl): median row}."""
    env = dict(os.environ, HALFORMER_ISA=variant) if variant else dict(os.environ)
    # Repetitions of all benchmarks in random order: ours and the baselines
    # are measured interleaved in time, so a machine that slows down or
    # speeds up mid-run moves both (this machine is shared and noisy).
    cmd = [exe, f"--benchmark_filter={filt}", "--benchmark_format=json", f"--benchmark_out={out}",
           "--benchmark_enable_random_interleaving=true",
           "--benchmark_out_format=json"]
    print(f"[{variant or 'native'}] kernels: {' '.join(cmd[1:2])}", file=sys.stderr, flush=True)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median" or b.get("error_occurred"):
            continue
        name = re.sub(r"/min_time:.*$", "", b["run_name"])
        op, shape, impl = name.split("/")
        metric = "GFLOP/s" if b.get("GFLOP/s") else "GB/s"  # (the other is 0, or absent in older runs)
        rows[(op, shape, impl)] = {"ms": b["real_time"], "metric": metric, "value": b[metric], "peak": b["peak"]}
    return data["context"], rows


def run_model(exe, variant, args):
    cmd = [exe, "bench", "--config", "base", "--isa", variant, "--json"] + args
    print(f"[{variant}] model: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    ap.add_argument("--native-only", action="store_true",
                    help="only the variant this CPU runs (no --isa sweep over the older ones)")
    ap.add_argument("--filter", default="", help="kernel benchmarks to run (a Google Benchmark regex)")
    ap.add_argument("--tag", default="", help="prefix of the results folder's name")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    kexe = os.path.join(a.build, "bench", "halformer_bench_kernels")
    hexe = os.path.join(a.build, "halformer")
    # A variant runs here when the kernels, capped at it, choose it.
    fixture = os.path.join(root, "tests", "fixtures", "ed_post_relu")
    variants = []
    for v in VARIANTS:
        info = subprocess.run([hexe, "info", fixture, "--isa", v], capture_output=True, text=True).stdout
        if f"kernel variant this CPU runs: {v}" in info:
            variants.append(v)
    native = variants[-1]
    if a.native_only:
        variants = [native]
    date = datetime.date.today().isoformat()
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":(exclude)bench/results"], capture_output=True, text=True).stdout.strip()
    slug = re.sub(r"[^a-z0-9]+", "-", cpu_name().lower()).strip("-")[:40]
    outdir = os.path.join(root, "bench", "results", f"{a.tag + '-' if a.tag else ''}{slug}-{date}")
    os.makedirs(outdir, exist_ok=True)

    base_filter = a.filter or ("linear/(1|128)x512x2048|attention/8x512|softmax/1024|layer_norm/128" if a.quick else "")
    model_args = ["--iters", "1", "--new-tokens", "8"] if a.quick else ["--iters", "3"]
    results, models, context = {}, {}, None
    for v in variants:
        # Baselines do not depend on the variant: measure them once, with
        # the native run; the other variants run our hand kernels only.
        filt = base_filter if v == native else (base_filter + "/hand" if base_filter else "/hand")
        if v != native and base_filter:
            filt = "(" + base_filter + ")/hand"
        ctx, rows = run_kernels(kexe, v, filt, os.path.join(outdir, f"kernels-{v}.json"))
        context = context or ctx
        results[v] = rows
        models[v] = run_model(hexe, v, model_args)
    with open(os.path.join(outdir, "model.json"), "w") as f:
        json.dump(models, f, indent=1)

    # PyTorch side by side (native variant): the whole model at batch 1 and
    # at batch 32 × beam 4 (CTranslate2's published setting), plus
    # nn.MultiheadAttention and one encoder layer against ours.
    torch_runs = {}
    if not a.no_torch:
        for tag, extra in (("batch1", ["--batch", "1"]), ("batch32_beam4", ["--batch", "32", "--beam", "4"])):
            out = os.path.join(outdir, f"torch-{tag}.json")
            cmd = ["/usr/bin/python3", os.path.join(root, "bench", "torch_baseline.py"), "--halformer", hexe,
                   "--json-out", out] + extra + (["--iters", "1", "--new-tokens", "8"] if a.quick else ["--iters", "3"])
            if tag == "batch1":
                cmd += ["--layers", "--kernels", kexe]
            print(f"[pytorch] {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
            if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode == 0:
                with open(out) as f:
                    torch_runs[tag] = json.load(f)

    peak_f = float(results[native] and context.get("fma_peak_gflops", 0))
    lines = [f"# Halformer benchmark report: {cpu_name()}", "",
             f"- date {date}, commit `{commit}`{' (with uncommitted changes)' if dirty else ''}, "
             f"{context.get('num_cpus')} CPUs, {platform.system()} {platform.release()}",
             f"- probes (native run): FMA peak {float(context.get('fma_peak_gflops', 0)):.1f} GFLOP/s, "
             f"read bandwidth {float(context.get('read_bandwidth_gbs', 0)):.1f} GB/s",
             "- medians of 5 repetitions, all benchmarks' repetitions in random order (interleaved in time); `peak` = fraction of the FMA peak (GFLOP/s rows) or of the read "
             "bandwidth (GB/s rows; cache-resident data can exceed 1)",
             f"- our hand-scheduled kernels forced onto each compiled variant with HALFORMER_ISA; baselines "
             f"(OpenBLAS, oneDNN, Halide autoschedulers on the host target) measured in the {native} run",
             f"- Adams2019's search in this build: {context.get('adams2019_search', 'unknown')}"
             + (" (one greedy pass: scripts/test.sh's build; not the schedules to compare speeds with, "
                "configure with -DHALFORMER_ADAMS2019_SEARCH=beam)" if context.get("adams2019_search") == "greedy" else ""),
             "",
             "## Kernels", ""]
    keys = sorted({(op, shape) for rows in results.values() for (op, shape, _) in rows})
    baselines = sorted({impl for (op, shape, impl) in results[native] if impl != "hand"})
    head = ["op", "shape", "metric"] + [f"hand {v}" for v in variants] + baselines + ["hand / best baseline"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    plot_rows = []
    for op, shape in keys:
        ref = results[native].get((op, shape, "hand"))
        if not ref:
            continue
        cells = [op, shape, ref["metric"]]
        for v in variants:
            r = results[v].get((op, shape, "hand"))
            cells.append(f"{r['value']:.1f} ({r['peak']:.0%})" if r else "–")
        best = None
        for b in baselines:
            r = results[native].get((op, shape, b))
            cells.append(f"{r['value']:.1f}" if r else "–")
            if r and b in ("openblas", "onednn", "adams2019", "mullapudi2016"):
                best = max(best or 0, r["value"])
        cells.append(f"{ref['value'] / best:.2f}×" if best else "–")
        lines.append("| " + " | ".join(cells) + " |")
        plot_rows.append((f"{op} {shape}", [results[v].get((op, shape, "hand"), {}).get("value", 0) / (best or ref["value"])
                                             for v in variants]))
    lines += ["", "## Whole model (paper base, `halformer bench --config base`)", "",
              "| variant | encoder_ms | decoder_step_ms | greedy tokens/s | beam tokens/s | peak RSS MB |",
              "|---|---|---|---|---|---|"]
    for v in variants:
        m = models[v]
        lines.append(f"| {v} | {m['encoder_ms']:.2f} | {m['decoder_step_ms']:.2f} | {m['greedy_tokens_per_s']:.1f} "
                     f"| {m['beam_tokens_per_s']:.1f} | {m['peak_rss_mb']:.0f} |")
    m = models[native]
    lines += ["", f"Workload: batch {m['batch']}, source length {m['src_len']}, {m['new_tokens']} new tokens, "
              f"beam {m['beam']}, {m['threads']} threads, medians of {m['iters']} runs.", ""]
    if torch_runs:
        lines += ["## Against PyTorch (same machine, threads and run)", "",
                  "PyTorch " + next(iter(torch_runs.values()))["torch"] + ", fp32 eager, KV-cached decoder "
                  "(bench/torch_baseline.py; its iterations and ours alternate); speed-up > 1 means Halformer is "
                  "faster.", "",
                  "| workload | metric | halformer | pytorch | speed-up |", "|---|---|---|---|---|"]
        for tag, r in torch_runs.items():
            for k, v in r["results"].items():
                lines.append(f"| {tag} | {k} | {v['halformer']:.2f} | {v['pytorch']:.2f} | {v['ratio']:.2f}× |")
        layers = torch_runs.get("batch1", {}).get("layers") or {}
        if layers:
            lines += ["", "| layer (ours and PyTorch's measured in alternating rounds) | halformer ms | pytorch ms "
                      "| speed-up |", "|---|---|---|---|"]
            names = {**{f"mha_1x{T}": f"nn.MultiheadAttention 1×{T} (QKV + attention + out proj)"
                        for T in (128, 512, 2048)},
                     **{f"encoder_layer_{B}x128": f"encoder layer {B}×128 (ours: the encoder's time / 6)"
                        for B in (1, 8)}}
            for key, label in names.items():
                p = layers.get(key)
                if isinstance(p, dict):
                    lines.append(f"| {label} | {p['halformer']:.3f} | {p['pytorch']:.3f} | {p['ratio']:.2f}× |")
        lines.append("")
    lines += ["![kernels](kernels.png)", ""]
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(10, max(4, 0.32 * len(plot_rows))))
        h = 0.8 / len(variants)
        for k, v in enumerate(variants):
            ax.barh([i + k * h for i in range(len(plot_rows))], [r[1][k] for r in plot_rows], height=h, label=v)
        ax.set_yticks([i + 0.4 - h / 2 for i in range(len(plot_rows))])
        ax.set_yticklabels([r[0] for r in plot_rows], fontsize=7)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.invert_yaxis()
        ax.set_xlabel("hand-scheduled kernel / best baseline (OpenBLAS, oneDNN, autoschedulers); > 1 is faster")
        ax.set_title(f"Halformer kernels per compiled variant — {cpu_name()}, {date}, {commit}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "kernels.png"), dpi=110)
    except ImportError:
        print("python3-matplotlib is missing: no plot (apt-get install python3-matplotlib)", file=sys.stderr)
    print(os.path.join(outdir, "report.md"))


if __name__ == "__main__":
    main()
