#!/usr/bin/python3
"""The GGUF reader's fixtures (tests/fixtures/gguf/) and the GGUF fuzz target's seeds (tests/fuzz/corpus/gguf/),
written with tests/gguf_writer.py (numpy only) from a fixed seed:

  types.gguf           version 3, general.alignment 64: metadata of every value type (arrays of strings,
                       numbers, bools, an empty array, a nested array) and one tensor of every type the reader
                       dequantizes, [3, 512] in numpy order (ne = [512, 3]: two K-quant blocks a row), plus a
                       [2, 64] F32, odd row counts, a 1-D, a 3-D and a 4-D tensor, and F16/BF16 tensors of
                       special values (signed zeros, subnormals, the largest half, infinities, NaN).
  types.expected.f32   the numpy dequantization of each tensor of types.gguf, from the file's bytes: raw
                       little-endian float32, the tensors one after another.
  types.expected.json  {"version", "alignment", "data_offset", "tensors": [{"name", "ne", "type", "offset" (from
                       the data section), "bytes", "expected_offset", "count" (floats in types.expected.f32)}]}
                       in file order.
  small.gguf           version 2 without general.alignment (the default, 32): two small tensors.

Seeds: types.gguf, small.gguf, tiny.gguf (one block of each type) and meta.gguf (metadata only, nested arrays).

    /usr/bin/python3 tests/make_gguf_fixtures.py
"""

import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "gguf")
CORPUS = os.path.join(HERE, "fuzz", "corpus", "gguf")

TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]

METADATA = {
    "general.architecture": ("STRING", "llama"),
    "general.name": ("STRING", "halformer gguf fixture"),
    "general.alignment": ("UINT32", 64),
    "test.u8": ("UINT8", 200),
    "test.i8": ("INT8", -100),
    "test.u16": ("UINT16", 60000),
    "test.i16": ("INT16", -30000),
    "test.u32": ("UINT32", 4000000000),
    "test.i32": ("INT32", -2000000000),
    "test.f32": ("FLOAT32", 0.1),
    "test.bool": ("BOOL", True),
    "test.string": ("STRING", "h\u00e9llo, w\u00f6rld"),
    "test.u64": ("UINT64", 2**63 + 5),
    "test.i64": ("INT64", -2**62),
    "test.f64": ("FLOAT64", 1.0 / 3.0),
    "test.array.strings": ("ARRAY", ("STRING", ["a", "bc", "", "\u00fcn\u00ef"])),
    "test.array.i32": ("ARRAY", ("INT32", [1, -2, 3])),
    "test.array.f32": ("ARRAY", ("FLOAT32", [0.25, -1.5, 1e-3])),
    "test.array.u64": ("ARRAY", ("UINT64", [0, 2**64 - 1])),
    "test.array.bool": ("ARRAY", ("BOOL", [True, False, True])),
    "test.array.empty": ("ARRAY", ("UINT8", [])),
    "test.array.nested": ("ARRAY", ("ARRAY", [("UINT8", [1, 2]), ("STRING", ["x"]), ("ARRAY", [("INT16", [-1])])])),
    "llama.context_length": ("UINT32", 2048),
    "tokenizer.ggml.tokens": ("ARRAY", ("STRING", ["<s>", "</s>", "\u2581the"])),
}

# Half and bfloat16 values that must convert exactly: zeros, 1, -2, the largest half, the smallest normal,
# subnormals (the smallest, 3 x the smallest, the largest), infinities, NaN and a few inexact ones.
SPECIAL = np.array([0.0, -0.0, 1.0, -2.0, 65504.0, -65504.0, 2.0**-14, 2.0**-24, 3 * 2.0**-24, 1023 * 2.0**-24,
                    np.inf, -np.inf, np.nan, 1.0 / 3.0, 1e-3, 100.0], np.float32)


def weights(rng, shape):
    """Normal values with rows and 32-value chunks of different scales (so the K quants' sub-block scales
    and mins differ, high bits included) and an offset (so min-max types see a nonzero min)."""
    x = rng.standard_normal(shape).astype(np.float32)
    rows = int(np.prod(shape[:-1]))
    x = x.reshape(rows, shape[-1])
    x *= np.exp(rng.uniform(-2, 2, (rows, 1))).astype(np.float32)
    x *= np.repeat(rng.uniform(0.05, 2.0, shape[-1] // 32 or 1).astype(np.float32), 32)[None, :shape[-1]]
    x += rng.uniform(-0.5, 0.5, (rows, 1)).astype(np.float32)
    return x.reshape(shape)


def types_tensors(rng):
    tensors = [(f"t.{t}", weights(rng, (3, 512)), t) for t in TYPES]
    odd_q4_0 = weights(rng, (7, 32))
    odd_q4_0[3] = 0  # a block of zeros: its scale is 0
    tensors += [
        ("f32.small", weights(rng, (2, 64)), "F32"),
        ("odd.Q4_0", odd_q4_0, "Q4_0"),
        ("odd.Q6_K", weights(rng, (1, 256)), "Q6_K"),
        ("odd.Q5_K", weights(rng, (5, 256)), "Q5_K"),
        ("odd.Q8_0.3d", weights(rng, (3, 5, 64)), "Q8_0"),
        ("odd.F16.4d", weights(rng, (2, 3, 1, 8)), "F16"),
        ("odd.F32.1d", weights(rng, (5,)), "F32"),
        ("special.F16", SPECIAL, "F16"),
        ("special.BF16", SPECIAL, "BF16"),
    ]
    return tensors


def main():
    rng = np.random.default_rng(20240611)
    os.makedirs(FIXTURES, exist_ok=True)
    os.makedirs(CORPUS, exist_ok=True)

    tensors = types_tensors(rng)
    data, layout = gw.gguf_bytes(METADATA, tensors, version=3)
    with open(os.path.join(FIXTURES, "types.gguf"), "wb") as f:
        f.write(data)
    expected, at = [], 0
    for entry in layout["tensors"]:
        start = layout["data_offset"] + entry["offset"]
        y = gw.dequantize(data[start:start + entry["bytes"]], entry["type"], entry["shape"])
        expected.append(y.reshape(-1).astype("<f4"))
        entry["expected_offset"] = at
        entry["count"] = int(y.size)
        at += y.size
        del entry["shape"]
    with open(os.path.join(FIXTURES, "types.expected.f32"), "wb") as f:
        f.write(np.concatenate(expected).tobytes())
    with open(os.path.join(FIXTURES, "types.expected.json"), "w") as f:
        json.dump(layout, f, indent=1)
        f.write("\n")

    small = [("a", weights(rng, (2, 32)), "Q8_0"), ("b", weights(rng, (4,)), "F32")]
    gw.write_gguf(os.path.join(FIXTURES, "small.gguf"), {"general.architecture": ("STRING", "test")}, small,
                  version=2)

    shutil.copy(os.path.join(FIXTURES, "types.gguf"), os.path.join(CORPUS, "types.gguf"))
    shutil.copy(os.path.join(FIXTURES, "small.gguf"), os.path.join(CORPUS, "small.gguf"))
    tiny = [(f"{t}", weights(rng, (1, gw.GGML_TYPES[t][1] if gw.GGML_TYPES[t][1] > 1 else 2)), t) for t in TYPES]
    gw.write_gguf(os.path.join(CORPUS, "tiny.gguf"), {"general.alignment": ("UINT32", 32)}, tiny)
    meta = {k: v for k, v in METADATA.items() if k != "general.alignment"}
    gw.write_gguf(os.path.join(CORPUS, "meta.gguf"), meta, [])
    total = sum(os.path.getsize(os.path.join(FIXTURES, n)) for n in os.listdir(FIXTURES))
    print(f"wrote {FIXTURES} ({total} bytes) and {CORPUS}")


if __name__ == "__main__":
    main()
