#!/usr/bin/python3
"""GGUF models made from the Hugging Face fixtures (tests/fixtures/hf/), as llama.cpp's converter
(convert_hf_to_gguf.py) lays them out: its tensor names (blk.{i}.attn_q.weight, token_embd.weight, ...),
dimensions innermost first, the metadata keys of the architecture (llama.embedding_length, ...), and for the
`llama` architecture each query and key head's rows interleaved (llama.cpp rotates adjacent pairs, where
transformers rotates a head's two halves). Written with tests/gguf_writer.py (numpy only), independently of
the C++ reader, into tests/fixtures/gguf/:

  llama_gqa.f32.gguf     hf/llama_gqa in float32: Q/K permuted, grouped-query heads, linear rope scaling (2),
                         its own lm_head. Its logits must equal the directory's (test_gguf_models.cpp).
  qwen3.mixed.gguf       hf/qwen3 quantized as a real mix: Q8_0 attention, Q4_0 feed-forward, Q5_1
                         embeddings (tied head), Q4_1 output projections, F32 norms; qwen3.* keys
                         (key_length 16: head_dim), no permutation.
  qwen3.mixed.dequant/   a Hugging Face directory with the same config and the numpy dequantization of
                         qwen3.mixed.gguf's tensors: the C++ model of the GGUF file must equal this one.
  qwen2.f32.gguf         hf/qwen2 in float32 with its tokenizer as llama.cpp stores one (tokenizer.ggml.model
                         "gpt2", pre "qwen2", tokens by id, token_type 3 for the special added tokens, merges)
                         and its chat template (tokenizer.chat_template).
  llama3_mqa.bf16.gguf   hf/llama3_mqa in bfloat16 (as its file holds it), Q/K (and their biases) permuted,
                         one KV head, Llama 3's rope scaling as llama.cpp stores it (rope_freqs.weight, the
                         factor of each frequency), its tokenizer (pre "llama-bpe", add_bos_token true) and
                         chat template.
  llama3_mqa.q8_0.gguf   the same in Q8_0 wherever a row is whole blocks of 32 (the FFN's down projection,
                         56 wide, stays F32): loads as int8 packed from the file's codes, Q/K rows permuted.
  llama3_mqa.q4_0.gguf   the same in Q4_0: its projections run 4-bit (the q4 kernels).
  llama_wide.q4_k.gguf   a random Llama with rows of 256 (hidden 256, one layer, 4 heads of 64 over one KV
                         head, FFN 256, vocab 300, tied head; weights N(0, 0.02), norms 1), every 2-D tensor Q4_K
                         (the K quants' super-blocks need 256 a row): its projections run 4-bit with a minimum
                         per 32 (the q4_1 kernels, Q4_K transcoded to Q4_1 at load).

    /usr/bin/python3 tests/make_gguf_models.py
"""

import json
import os
import shutil
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HF = os.path.join(HERE, "fixtures", "hf")
OUT = os.path.join(HERE, "fixtures", "gguf")


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[b:end]
        if e["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4")
        elif e["dtype"] == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            continue
        out[name] = a.reshape(e["shape"]).astype(np.float32)
    return out


def write_safetensors(path, tensors):
    header, at, blobs = {}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def permute(w, heads):
    """llama.cpp's LlamaModel.permute: each head's rows [half 0 | half 1] -> interleaved pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight", "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate_proj.bias": "ffn_gate.bias", "mlp.up_proj.bias": "ffn_up.bias", "mlp.down_proj.bias": "ffn_down.bias",
}
TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight"}


def gguf_name(name):
    if name in TOP:
        return TOP[name]
    parts = name.split(".")
    assert parts[0] == "model" and parts[1] == "layers", name
    return f"blk.{parts[2]}." + LAYER[".".join(parts[3:])]


def tokenizer_metadata(d, vocab_size, pre, add_bos):
    """tokenizer.json and tokenizer_config.json -> the tokenizer.* keys llama.cpp's converter writes."""
    t = json.load(open(os.path.join(d, "tokenizer.json")))
    cfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
    ids = dict(t["model"]["vocab"])
    kinds = {i: 1 for i in ids.values()}
    for a in t.get("added_tokens", []):
        ids[a["content"]] = a["id"]
        kinds[a["id"]] = 3 if a.get("special") else 4
    n = max(vocab_size, max(ids.values()) + 1)
    tokens, types = [f"[PAD{i}]" for i in range(n)], [5] * n  # (llama.cpp pads a short vocabulary so)
    for tok, i in ids.items():
        tokens[i], types[i] = tok, kinds[i]
    merges = [m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]]
    meta = {
        "tokenizer.ggml.model": ("STRING", "gpt2"),
        "tokenizer.ggml.pre": ("STRING", pre),
        "tokenizer.ggml.tokens": ("ARRAY", ("STRING", tokens)),
        "tokenizer.ggml.token_type": ("ARRAY", ("INT32", types)),
        "tokenizer.ggml.merges": ("ARRAY", ("STRING", merges)),
        "tokenizer.ggml.add_bos_token": ("BOOL", add_bos),
    }
    if cfg.get("chat_template"):
        meta["tokenizer.chat_template"] = ("STRING", cfg["chat_template"])
    return meta


def convert(fixture, out, arch, type_of, extra=None):
    d = os.path.join(HF, fixture)
    c = json.load(open(os.path.join(d, "config.json")))
    w = read_safetensors(os.path.join(d, "model.safetensors"))
    heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    meta = {
        "general.architecture": ("STRING", arch),
        "general.name": ("STRING", fixture),
        f"{arch}.context_length": ("UINT32", c["max_position_embeddings"]),
        f"{arch}.embedding_length": ("UINT32", c["hidden_size"]),
        f"{arch}.block_count": ("UINT32", c["num_hidden_layers"]),
        f"{arch}.feed_forward_length": ("UINT32", c["intermediate_size"]),
        f"{arch}.attention.head_count": ("UINT32", heads),
        f"{arch}.attention.head_count_kv": ("UINT32", kv),
        f"{arch}.attention.layer_norm_rms_epsilon": ("FLOAT32", c["rms_norm_eps"]),
        f"{arch}.rope.freq_base": ("FLOAT32", c.get("rope_theta") or (c.get("rope_parameters") or {}).get(
            "rope_theta", 10000.0)),
        "tokenizer.ggml.bos_token_id": ("UINT32", c["bos_token_id"]),
        "tokenizer.ggml.eos_token_id": ("UINT32", c["eos_token_id"]),
        f"{arch}.vocab_size": ("UINT32", c["vocab_size"]),
    }
    if c.get("head_dim"):
        meta[f"{arch}.attention.key_length"] = ("UINT32", c["head_dim"])
        meta[f"{arch}.attention.value_length"] = ("UINT32", c["head_dim"])
    rs = c.get("rope_scaling") or c.get("rope_parameters")
    if rs and rs.get("rope_type", rs.get("type")) == "llama3":
        # llama.cpp's converter (LlamaModel.generate_extra_tensors): the factor dividing each frequency, as a
        # tensor; no scaling keys.
        base, dim = meta[f"{arch}.rope.freq_base"][1], c.get("head_dim") or c["hidden_size"] // heads
        freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
        factor, low, high = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
        old = rs.get("original_max_position_embeddings", 8192)
        factors = []
        for f in freqs:
            wavelen = 2 * np.pi / f
            if wavelen < old / high:
                factors.append(1.0)
            elif wavelen > old / low:
                factors.append(factor)
            else:
                smooth = (old / wavelen - low) / (high - low)
                factors.append(1 / ((1 - smooth) / factor + smooth))
        rope_freqs = np.array(factors, np.float32)
    elif rs and rs.get("rope_type", rs.get("type")) not in (None, "default"):
        meta[f"{arch}.rope.scaling.type"] = ("STRING", rs.get("rope_type", rs.get("type")))
        meta[f"{arch}.rope.scaling.factor"] = ("FLOAT32", rs["factor"])
    meta.update(extra(d, c) if callable(extra) else extra or {})
    tensors = []
    if rs and rs.get("rope_type", rs.get("type")) == "llama3":
        tensors.append(("rope_freqs.weight", rope_freqs, "F32"))
    for name, a in w.items():
        if c.get("tie_word_embeddings") and name == "lm_head.weight":
            continue
        if arch == "llama" and (name.endswith("self_attn.q_proj.weight") or name.endswith("self_attn.q_proj.bias")):
            a = permute(a, heads)
        if arch == "llama" and (name.endswith("self_attn.k_proj.weight") or name.endswith("self_attn.k_proj.bias")):
            a = permute(a, kv)
        tensors.append((gguf_name(name), a, type_of(name, a)))
    data, layout = gw.gguf_bytes(meta, tensors, version=3)
    with open(os.path.join(OUT, out), "wb") as f:
        f.write(data)
    return c, data, layout


def wide_llama(out, type_name, seed=61):
    """A random Llama-architecture file with rows of 256, every 2-D tensor in type_name."""
    rng = np.random.default_rng(seed)
    H, nh, kv, F, V = 256, 4, 1, 256, 300
    hd = H // nh
    meta = {
        "general.architecture": ("STRING", "llama"), "general.name": ("STRING", "llama_wide"),
        "llama.context_length": ("UINT32", 256), "llama.embedding_length": ("UINT32", H),
        "llama.block_count": ("UINT32", 1), "llama.feed_forward_length": ("UINT32", F),
        "llama.attention.head_count": ("UINT32", nh), "llama.attention.head_count_kv": ("UINT32", kv),
        "llama.attention.layer_norm_rms_epsilon": ("FLOAT32", 1e-5), "llama.rope.freq_base": ("FLOAT32", 10000.0),
        "llama.rope.dimension_count": ("UINT32", hd), "llama.vocab_size": ("UINT32", V),
        "tokenizer.ggml.bos_token_id": ("UINT32", 1), "tokenizer.ggml.eos_token_id": ("UINT32", 2),
    }
    shapes = [("token_embd.weight", (V, H)), ("output_norm.weight", (H,)), ("blk.0.attn_norm.weight", (H,)),
              ("blk.0.attn_q.weight", (nh * hd, H)), ("blk.0.attn_k.weight", (kv * hd, H)),
              ("blk.0.attn_v.weight", (kv * hd, H)), ("blk.0.attn_output.weight", (H, nh * hd)),
              ("blk.0.ffn_norm.weight", (H,)), ("blk.0.ffn_gate.weight", (F, H)), ("blk.0.ffn_up.weight", (F, H)),
              ("blk.0.ffn_down.weight", (H, F))]
    tensors = []
    for name, shp in shapes:
        if len(shp) == 1:
            tensors.append((name, np.ones(shp, np.float32), "F32"))
        else:
            tensors.append((name, (rng.standard_normal(shp) * 0.02).astype(np.float32), type_name))
    data, _ = gw.gguf_bytes(meta, tensors, version=3)
    with open(os.path.join(OUT, out), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    convert("llama_gqa", "llama_gqa.f32.gguf", "llama", lambda n, a: "F32")

    def mix(name, a):
        if a.ndim == 1:
            return "F32"
        if "embed_tokens" in name:
            return "Q5_1"
        if "o_proj" in name or "down_proj" in name:
            return "Q4_1"
        if "self_attn" in name:
            return "Q8_0"
        return "Q4_0"

    c, data, layout = convert("qwen3", "qwen3.mixed.gguf", "qwen3", mix)
    # The same model with the numpy dequantization of those bytes, in transformers' names and order.
    back = {v: k for k, v in TOP.items()}
    dequant = {}
    for e in layout["tensors"]:
        start = layout["data_offset"] + e["offset"]
        y = gw.dequantize(data[start:start + e["bytes"]], e["type"], e["shape"]).reshape(e["shape"])
        n = e["name"]
        if n in back:
            hf = back[n]
        else:
            _, i, rest = n.split(".", 2)
            hf = f"model.layers.{i}." + {v: k for k, v in LAYER.items()}[rest]
        dequant[hf] = y.astype(np.float32)
    d = os.path.join(OUT, "qwen3.mixed.dequant")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(HF, "qwen3", "config.json"), os.path.join(d, "config.json"))
    write_safetensors(os.path.join(d, "model.safetensors"), dequant)
    convert("qwen2", "qwen2.f32.gguf", "qwen2", lambda n, a: "F32",
            lambda d, c: tokenizer_metadata(d, c["vocab_size"], "qwen2", False))
    convert("llama3_mqa", "llama3_mqa.bf16.gguf", "llama", lambda n, a: "F32" if a.ndim == 1 else "BF16",
            lambda d, c: tokenizer_metadata(d, c["vocab_size"], "llama-bpe", True))
    convert("llama3_mqa", "llama3_mqa.q8_0.gguf", "llama",
            lambda n, a: "Q8_0" if a.ndim == 2 and a.shape[-1] % 32 == 0 else "F32",
            lambda d, c: tokenizer_metadata(d, c["vocab_size"], "llama-bpe", True))
    convert("llama3_mqa", "llama3_mqa.q4_0.gguf", "llama",
            lambda n, a: "Q4_0" if a.ndim == 2 and a.shape[-1] % 32 == 0 else "F32",
            lambda d, c: tokenizer_metadata(d, c["vocab_size"], "llama-bpe", True))
    wide_llama("llama_wide.q4_k.gguf", "Q4_K")
    print("wrote", ", ".join(sorted(os.listdir(OUT))))


if __name__ == "__main__":
    main()
