#!/usr/bin/env python3
"""halformer serve under load: throughput, latency and time to first token,
with requests joining running batches, without (a request waits for a batch
to start), and one at a time.

    bench/serve_load.py [--rounds 3] [--out bench/results/serve-<machine>-<date>]
                        [--baseline OTHER_BUILD/tests/server/halformer_server_tests]

Runs the server load test (tests/server/test_server.cpp,
Serve.LoadOf64ClientsEqualsEachRequestAlone: 64 clients x 20 mixed requests
on the committed translator, every answer checked against the request run
alone, first with joining at the next step, then without; then the same mix
one request at a time through a server with one worker and batches of one)
--rounds times, and writes report.md, the rounds
as JSON and serve.png. Medians and ranges over the rounds; the ratio is taken
within each round (the machine is shared and noisy).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--join-fair-ms", type=float, default=None,
                help="the joining server's join_fair_ms (default: the server's default)")
ap.add_argument("--workers", type=int, default=None,
                help="batches at once, in both servers under load (default: the server's default, 2)")
ap.add_argument("--binary", default=os.path.join(root, "build/tests/server/halformer_server_tests"))
ap.add_argument("--baseline", default=None,
                help="another build's halformer_server_tests (an earlier commit's): each round runs it right "
                     "after --binary, and the report compares the two")
ap.add_argument("--out", default=os.path.join(
    root, "bench/results/serve-amd-epyc-" + datetime.date.today().isoformat()))
a = ap.parse_args()

rounds = []


def derived(x):
    x["p99_over_p50"] = x["p99_s"] / x["p50_s"]
    x["no_join_p99_over_p50"] = x["no_join_p99_s"] / x["no_join_p50_s"]
    x["slowdown_p99_over_p50"] = x["slowdown_p99"] / x["slowdown_p50"]
    x["no_join_slowdown_p99_over_p50"] = x["no_join_slowdown_p99"] / x["no_join_slowdown_p50"]
    for prefix in ("", "no_join_", "single_"):
        for kind, v in x[prefix + "kinds"].items():
            x[f"{prefix}{kind}_p50_s"] = v["p50_s"]
            x[f"{prefix}{kind}_p99_s"] = v["p99_s"]
            x[f"{prefix}{kind}_p99_over_p50"] = v["p99_s"] / v["p50_s"] if v["p50_s"] > 0 else 0
    return x


base_rounds = []


def load_round(binary):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        env = dict(os.environ, HALFORMER_LOAD_REPORT=f.name)
        if a.join_fair_ms is not None:
            env["HALFORMER_LOAD_JOIN_FAIR_MS"] = str(a.join_fair_ms)
        if a.workers is not None:
            env["HALFORMER_LOAD_WORKERS"] = str(a.workers)
        p = subprocess.run([binary, "--gtest_filter=Serve.LoadOf64ClientsEqualsEachRequestAlone"], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(p.stdout[-3000:] + p.stderr[-2000:])
        return derived(json.load(open(f.name)))


for r in range(a.rounds):
    rounds.append(load_round(a.binary))
    if a.baseline:
        base_rounds.append(load_round(a.baseline))
        b = base_rounds[-1]
        print(f"[serve] round {r + 1}/{a.rounds}, baseline: {b['tokens_per_s']:.0f} tokens/s joining, "
              f"{b['no_join_tokens_per_s']:.0f} without, {b['single_tokens_per_s']:.0f} one at a time")
    x = rounds[-1]
    print(f"[serve] round {r + 1}/{a.rounds}: {x['tokens_per_s']:.0f} tokens/s joining, "
          f"{x['no_join_tokens_per_s']:.0f} without ({x['join_ratio']:.2f}x), "
          f"{x['single_tokens_per_s']:.0f} one at a time ({x['ratio']:.2f}x); p50 {x['p50_s']:.3f} s, "
          f"p99 {x['p99_s']:.3f} s (without: {x['no_join_p50_s']:.3f}, {x['no_join_p99_s']:.3f}); "
          f"slowdown p50 {x['slowdown_p50']:.2f} p99 {x['slowdown_p99']:.2f} (without: {x['no_join_slowdown_p50']:.2f}, "
          f"{x['no_join_slowdown_p99']:.2f}); "
          f"errors {x['errors']}, mismatches {x['mismatches']}")

os.makedirs(a.out, exist_ok=True)
json.dump(rounds, open(os.path.join(a.out, "rounds.json"), "w"), indent=2)


def stat(key, fmt):
    v = [x[key] for x in rounds]
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})"


r0 = rounds[0]
lines = [
    "# halformer serve under load",
    "",
    f"Machine: {os.cpu_count()} vCPUs ({open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}),"
    f" {datetime.datetime.now().isoformat(timespec='minutes')}. Model: models/en-de (9.6 M parameters, fp32).",
    "",
    f"Load: {r0['clients']} clients x {r0['requests_per_client']} requests each, a mix of 64 requests (16 sentences x"
    " greedy / beam 4 with 2-best / seeded top-k sampling / 4-token limit), keep-alive connections, loopback.",
    "Joining server's join_fair_ms: " + ("its default" if a.join_fair_ms is None else f"{a.join_fair_ms:g}") + "; "
    "workers (batches at once) under load: " + ("the default, 2" if a.workers is None else str(a.workers)) + ".",
    f"One at a time: the first {r0['single_requests']} requests of the mix, one client, a server with one worker and"
    " batches of one. Medians over the rounds (range in brackets).",
    "",
    "| measure | joining at the next step | waiting for a batch to start | one at a time |",
    "|---|---|---|---|",
    f"| tokens/s | {stat('tokens_per_s', '{:.0f}')} | {stat('no_join_tokens_per_s', '{:.0f}')} | "
    f"{stat('single_tokens_per_s', '{:.0f}')} |",
    f"| p50 latency (s) | {stat('p50_s', '{:.3f}')} | {stat('no_join_p50_s', '{:.3f}')} | {stat('single_p50_s', '{:.3f}')} |",
    f"| p99 latency (s) | {stat('p99_s', '{:.3f}')} | {stat('no_join_p99_s', '{:.3f}')} | {stat('single_p99_s', '{:.3f}')} |",
    f"| p99 / p50 | {stat('p99_over_p50', '{:.2f}')} | {stat('no_join_p99_over_p50', '{:.2f}')} | – |",
    f"| time to first token p50 (s) | {stat('first_token_p50_s', '{:.3f}')} | {stat('no_join_first_token_p50_s', '{:.3f}')} | – |",
    f"| time to first token p99 (s) | {stat('first_token_p99_s', '{:.3f}')} | {stat('no_join_first_token_p99_s', '{:.3f}')} | – |",
    f"| slowdown p50 (latency / the request alone) | {stat('slowdown_p50', '{:.2f}')} | "
    f"{stat('no_join_slowdown_p50', '{:.2f}')} | 1 |",
    f"| slowdown p99 | {stat('slowdown_p99', '{:.2f}')} | {stat('no_join_slowdown_p99', '{:.2f}')} | 1 |",
    f"| slowdown p99 / p50 | {stat('slowdown_p99_over_p50', '{:.2f}')} | "
    f"{stat('no_join_slowdown_p99_over_p50', '{:.2f}')} | – |",
    f"| errors / answers unlike the request alone | {sum(x['errors'] for x in rounds)} / "
    f"{sum(x['mismatches'] for x in rounds)} | – | – |",
    "",
    f"Throughput ratios within a round: joining / waiting {stat('join_ratio', '{:.2f}')}x, joining / one at a time "
    f"{stat('ratio', '{:.2f}')}x.",
    f"Requests that joined a running batch: {stat('joined', '{:.0f}')} of {r0['clients'] * r0['requests_per_client']}; "
    f"batches started per round: {stat('batches', '{:.0f}')}.",
    "Time to first token: greedy and sampled requests (beam search has no token before its end), arrival to the"
    " step that chose it, from each answer's first_token_ms.",
    "",
    "The one-at-a-time latencies are those of a lone client with nothing queued; 64 clients served one at a time",
    "would each wait behind the others' requests.",
    "",
    "Slowdown: each request's latency under load over the same request's latency one at a time (the one-at-a-time",
    "run takes each of the 64 requests of the mix once). The mix's kinds differ in work several times over, so",
    "percentiles over all latencies measure the mix as much as the server; by kind:",
    "",
    "| kind | joining p50 / p99 (s) | p99 / p50 | waiting p50 / p99 (s) | p99 / p50 | one at a time p50 / p99 (s) |",
    "|---|---|---|---|---|---|",
] + [
    f"| {k} | {stat(k + '_p50_s', '{:.3f}')} / {stat(k + '_p99_s', '{:.3f}')} | {stat(k + '_p99_over_p50', '{:.2f}')} | "
    f"{stat('no_join_' + k + '_p50_s', '{:.3f}')} / {stat('no_join_' + k + '_p99_s', '{:.3f}')} | "
    f"{stat('no_join_' + k + '_p99_over_p50', '{:.2f}')} | "
    f"{stat('single_' + k + '_p50_s', '{:.3f}')} / {stat('single_' + k + '_p99_s', '{:.3f}')} |"
    for k in r0["kinds"]
]
if base_rounds:
    json.dump(base_rounds, open(os.path.join(a.out, "baseline_rounds.json"), "w"), indent=2)

    def both(key, fmt):
        v = [x[key] for x in base_rounds]
        ratio = [x[key] / y[key] for x, y in zip(rounds, base_rounds) if y[key]]
        return (f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))}) | "
                f"{stat(key, fmt)} | {statistics.median(ratio):.2f} ({min(ratio):.2f}–{max(ratio):.2f})")
    lines += ["", f"Against the baseline build `{a.baseline}`, run right after this one in each round "
              "(ratio: this build over the baseline, within each round):", "",
              "| measure | baseline | this build | ratio |", "|---|---|---|---|",
              f"| tokens/s joining | {both('tokens_per_s', '{:.0f}')} |",
              f"| tokens/s waiting for a batch | {both('no_join_tokens_per_s', '{:.0f}')} |",
              f"| tokens/s one at a time | {both('single_tokens_per_s', '{:.0f}')} |",
              f"| p50 latency joining (s) | {both('p50_s', '{:.3f}')} |",
              f"| p99 latency joining (s) | {both('p99_s', '{:.3f}')} |",
              f"| time to first token p50 (s) | {both('first_token_p50_s', '{:.3f}')} |",
              f"| time to first token p99 (s) | {both('first_token_p99_s', '{:.3f}')} |"]
open(os.path.join(a.out, "report.md"), "w").write("\n".join(lines) + "\n")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, (ax1, ax2, ax3, ax4) = plt.subplots(1, 4, figsize=(17, 3.8))
names = ["joining", "waiting for\na batch", "one at a time"]
tps = [[x["tokens_per_s"] for x in rounds], [x["no_join_tokens_per_s"] for x in rounds],
       [x["single_tokens_per_s"] for x in rounds]]
ax1.bar(names, [statistics.median(v) for v in tps], color=["tab:blue", "tab:orange", "tab:gray"])
for i, v in enumerate(tps):
    ax1.plot([i] * len(v), v, "k.", ms=4)
ax1.set_ylabel("generated tokens/s")
ax1.set_title("throughput")
w = 0.35


def p50_p99(ax, pairs, ylabel, title):
    """Median p50 and p99 bars, one pair per mode."""
    for i, (k50, k99) in enumerate(pairs):
        ax.bar(i - w / 2, statistics.median(x[k50] for x in rounds), w, color="tab:green", label="p50" if i == 0 else None)
        ax.bar(i + w / 2, statistics.median(x[k99] for x in rounds), w, color="tab:red", label="p99" if i == 0 else None)
    ax.set_xticks(range(len(pairs)))
    ax.set_xticklabels(names[:len(pairs)])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()


p50_p99(ax2, [("p50_s", "p99_s"), ("no_join_p50_s", "no_join_p99_s"), ("single_p50_s", "single_p99_s")],
        "request latency (s)", "latency")
p50_p99(ax3, [("first_token_p50_s", "first_token_p99_s"), ("no_join_first_token_p50_s", "no_join_first_token_p99_s")],
        "time to first token (s)", "first token (greedy, sampled)")
p50_p99(ax4, [("slowdown_p50", "slowdown_p99"), ("no_join_slowdown_p50", "no_join_slowdown_p99")],
        "latency / the request alone", "slowdown")
fig.suptitle("halformer serve, models/en-de, " + str(os.cpu_count()) + " vCPUs")
fig.tight_layout()
fig.savefig(os.path.join(a.out, "serve.png"), dpi=110)
print("[serve] wrote", a.out)
