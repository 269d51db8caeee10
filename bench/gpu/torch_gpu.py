#!/usr/bin/python3
"""PyTorch fp32 baselines on the GPU, at the shapes of halformer_bench_gpu:
linear through cuBLAS SGEMM in strict fp32 (TF32 off), attention through
torch.nn.functional.scaled_dot_product_attention in fp32, softmax and
layer_norm; then the base model (bench/torch_baseline.py's, fp32 eager) for
the encoder forward and greedy decoding tokens/s, as `halformer bench`.

  python3 bench/gpu/torch_gpu.py [--iters 20] [--repeats 7] [--batch 8]
      [--src-len 64] [--new-tokens 32]

Prints one JSON object per line (kernels: op, shape, ms, rate, unit; model:
op = "model", encoder_ms, greedy_tokens_per_s).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

sys.argv += [] if "--threads" in sys.argv else ["--threads", "1"]  # torch_baseline reads it at import
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")


def timed(fn, iters, repeats):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(ms)


def emit(op, shape, ms, work, unit):
    print(json.dumps({"op": op, "shape": shape, "ms": ms, "rate": work / ms / 1e6, "unit": unit}), flush=True)


def attention(q, k, v, causal):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    w = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        T = q.shape[-2]
        w = w.masked_fill(torch.ones(T, T, device=dev, dtype=torch.bool).triu(1), -float("inf"))
    return torch.softmax(w, -1) @ v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--src-len", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    print(json.dumps({"op": "device", "name": torch.cuda.get_device_name(0), "torch": torch.__version__}), flush=True)
    n = 64 << 20
    a_, b_ = torch.ones(n, device=dev), torch.empty(n, device=dev)
    ms = timed(lambda: b_.copy_(a_), a.iters, a.repeats)
    print(json.dumps({"op": "copy", "shape": "256MiB", "ms": ms, "rate": 8.0 * n / ms / 1e6, "unit": "GB/s"}),
          flush=True)
    del a_, b_
    for M, K, N in [(1024, 512, 2048), (1024, 2048, 512), (4096, 512, 2048), (4096, 1024, 4096),
                    (128, 512, 37000), (8, 512, 2048), (8, 4096, 4096), (32, 4096, 4096),
                    (1, 512, 2048), (4, 512, 2048), (1, 4096, 4096), (4, 4096, 4096)]:
        x, w, b = torch.randn(M, K, device=dev), torch.randn(N, K, device=dev) * 0.05, torch.randn(N, device=dev)
        ms = timed(lambda: F.linear(x, w, b), a.iters, a.repeats)
        # The decode shapes (M <= 4) are halformer's linear_dot kernel: the same baseline under both names.
        for op in ("linear", "linear_dot") if M <= 4 else ("linear",):
            row = {"op": op, "shape": f"{M}x{K}->{N}", "ms": ms, "rate": 2.0 * M * K * N / ms / 1e6,
                   "unit": "GFLOP/s"}
            if M <= 32:
                row["weight_gbs"] = 4.0 * K * N / ms / 1e6
            print(json.dumps(row), flush=True)
    for T in (512, 1024, 2048, 4096):
        for causal in (False, True):
            q, k, v = (torch.randn(4, 8, T, 64, device=dev) for _ in range(3))
            ms = timed(lambda: attention(q, k, v, causal), a.iters, a.repeats)
            emit("attention_causal" if causal else "attention", f"B4 H8 T{T} dk64", ms,
                 4.0 * 4 * 8 * T * T * 64 * (0.5 if causal else 1.0), "GFLOP/s")
    x = torch.randn(4096, 37000 // 8, device=dev)
    emit("softmax", f"4096x{37000 // 8}", timed(lambda: torch.softmax(x, -1), a.iters, a.repeats), 8.0 * x.numel(), "GB/s")
    x = torch.randn(128, 37000, device=dev)
    emit("log_softmax", "128x37000", timed(lambda: torch.log_softmax(x, -1), a.iters, a.repeats), 8.0 * x.numel(),
         "GB/s")
    x = torch.randn(8, 37000, device=dev)
    emit("argmax", "8x37000", timed(lambda: torch.argmax(x, -1), a.iters, a.repeats), 4.0 * x.numel(), "GB/s")
    x, g, bb = torch.randn(8192, 512, device=dev), torch.randn(512, device=dev), torch.randn(512, device=dev)
    emit("layer_norm", "8192x512", timed(lambda: F.layer_norm(x, (512,), g, bb, 1e-5), a.iters, a.repeats),
         8.0 * x.numel(), "GB/s")

    # The whole base model, fp32 eager.
    torch.set_default_tensor_type(torch.cuda.FloatTensor)
    import torch_baseline as tb  # noqa: E402
    m = tb.Base().to(dev).eval()
    src = torch.randint(4, tb.V, (a.batch, a.src_len), device=dev)
    with torch.no_grad():
        enc = timed(lambda: m.encode(src), 3, 5)
        steps = []
        t0 = time.perf_counter()
        tb.greedy(m, src, a.new_tokens, steps)
        torch.cuda.synchronize()
        total = time.perf_counter() - t0
    print(json.dumps({"op": "model", "batch": a.batch, "src_len": a.src_len, "encoder_ms": enc,
                      "greedy_tokens_per_s": a.batch * a.new_tokens / total}), flush=True)


if __name__ == "__main__":
    main()
