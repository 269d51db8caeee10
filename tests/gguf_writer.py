#!/usr/bin/python3
"""A GGUF (version 3, or 2) writer for tests, with quantizers and dequantizers in numpy only.

Written from llama.cpp's descriptions of the formats (ggml/include/gguf.h for the file layout,
ggml/src/ggml-common.h for the quantized block structs, ggml/src/ggml-quants.c for what the values
mean), not from its code: no torch, no `gguf` package.

    write_gguf(path, metadata, tensors, version=3)

metadata: {key: (type, value)} in file order; type is one of GGUF_TYPES' names. An ARRAY's value is
(element_type, [elements]), and an element of an ARRAY of ARRAY is itself (element_type, [elements]).
general.alignment (UINT32) sets the alignment; 32 without it.

tensors: [(name, array, ggml_type_name)]: a float32 array in numpy (PyTorch) order, whose LAST axis is
GGUF's ne[0] (a PyTorch weight [rows, cols] is stored with ne = [cols, rows]); ggml_type_name one of
QUANTIZERS' keys. The last axis must be a whole number of the type's blocks.

quantize(array, type) -> bytes and dequantize(bytes, type, shape) -> float32 array are the two halves:
the quantizers are simple (max-abs or min-max scales a block, rounding to nearest) but write valid bytes;
the dequantizers read the bytes as the block layouts define them, computing in float32 in ggml's order
of operations, so that they give the same bits as ggml's dequantize_row_* (and Halformer's).

    python3 tests/gguf_writer.py selftest

quantizes random data to every type, dequantizes it and checks that the error is small for the type.
"""

import struct
import sys

import numpy as np

GGUF_TYPES = {
    "UINT8": 0, "INT8": 1, "UINT16": 2, "INT16": 3, "UINT32": 4, "INT32": 5, "FLOAT32": 6, "BOOL": 7,
    "STRING": 8, "ARRAY": 9, "UINT64": 10, "INT64": 11, "FLOAT64": 12,
}
_SCALAR_FORMATS = {
    "UINT8": "<B", "INT8": "<b", "UINT16": "<H", "INT16": "<h", "UINT32": "<I", "INT32": "<i",
    "FLOAT32": "<f", "UINT64": "<Q", "INT64": "<q", "FLOAT64": "<d",
}

# name: (ggml type number, values a block, bytes a block), as ggml.h and ggml.c define them.
GGML_TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "BF16": (30, 1, 2),
    "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34),
    "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
}

DEFAULT_ALIGNMENT = 32


# --- half and bfloat16 -------------------------------------------------------------------------------------

def f16_bits(x):
    """float32 -> IEEE half bits (uint16), rounded to nearest even (numpy's conversion)."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).view(np.uint16)


def f16_to_f32(bits):
    return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float32)


def bf16_bits(x):
    """float32 -> bfloat16 bits, rounded to nearest even; NaN stays a (quiet) NaN."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, ((b >> 16) | 0x40).astype(np.uint16), rounded).astype(np.uint16)


def bf16_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _f16_round(x):
    """A scale as the block stores it: through half precision and back."""
    return f16_to_f32(f16_bits(x))


def _safe_inverse(d):
    d = np.asarray(d, dtype=np.float32)
    return np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)


def _u8(a):
    return np.ascontiguousarray(a).view(np.uint8)


# --- quantizers: x is (blocks, block size) float32; each returns (blocks, bytes a block) uint8 ----------------

def _signed_max(x):
    """Each row's value of largest magnitude, with its sign."""
    idx = np.argmax(np.abs(x), axis=-1)
    return np.take_along_axis(x, idx[..., None], axis=-1)[..., 0]


def _q_f32(x):
    return _u8(x.astype("<f4")).reshape(len(x), -1)


def _q_f16(x):
    return _u8(f16_bits(x).astype("<u2")).reshape(len(x), -1)


def _q_bf16(x):
    return _u8(bf16_bits(x).astype("<u2")).reshape(len(x), -1)


def _q8_0(x):
    d = _f16_round(np.abs(x).max(axis=1) / np.float32(127))
    q = np.clip(np.rint(x * _safe_inverse(d)[:, None]), -127, 127).astype(np.int8)
    out = np.zeros((len(x), 34), np.uint8)
    out[:, 0:2] = _u8(f16_bits(d).astype("<u2")).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out


def _pack_nibbles(q):
    """32 4-bit values a block -> 16 bytes: value j in the low nibble of byte j, value j + 16 in the high."""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def _pack_high_bits(q):
    """The fifth bits of 32 values -> a little-endian u32 (bit j: value j), as 4 bytes."""
    bits = ((q >> 4) & 1).astype(np.uint64)
    qh = (bits << np.arange(32, dtype=np.uint64)).sum(axis=1).astype("<u4")
    return _u8(qh).reshape(-1, 4)


def _q4_0(x):
    d = _f16_round(_signed_max(x) / np.float32(-8))
    q = np.clip(np.rint(x * _safe_inverse(d)[:, None]) + 8, 0, 15).astype(np.uint8)
    out = np.zeros((len(x), 18), np.uint8)
    out[:, 0:2] = _u8(f16_bits(d).astype("<u2")).reshape(-1, 2)
    out[:, 2:] = _pack_nibbles(q)
    return out


def _min_max(x, levels):
    lo, hi = x.min(axis=1), x.max(axis=1)
    d = _f16_round((hi - lo) / np.float32(levels))
    m = _f16_round(lo)
    q = np.clip(np.rint((x - m[:, None]) * _safe_inverse(d)[:, None]), 0, levels).astype(np.uint8)
    return d, m, q


def _q4_1(x):
    d, m, q = _min_max(x, 15)
    out = np.zeros((len(x), 20), np.uint8)
    out[:, 0:2] = _u8(f16_bits(d).astype("<u2")).reshape(-1, 2)
    out[:, 2:4] = _u8(f16_bits(m).astype("<u2")).reshape(-1, 2)
    out[:, 4:] = _pack_nibbles(q & 15)
    return out


def _q5_0(x):
    d = _f16_round(_signed_max(x) / np.float32(-16))
    q = np.clip(np.rint(x * _safe_inverse(d)[:, None]) + 16, 0, 31).astype(np.uint8)
    out = np.zeros((len(x), 22), np.uint8)
    out[:, 0:2] = _u8(f16_bits(d).astype("<u2")).reshape(-1, 2)
    out[:, 2:6] = _pack_high_bits(q)
    out[:, 6:] = _pack_nibbles(q & 15)
    return out


def _q5_1(x):
    d, m, q = _min_max(x, 31)
    out = np.zeros((len(x), 24), np.uint8)
    out[:, 0:2] = _u8(f16_bits(d).astype("<u2")).reshape(-1, 2)
    out[:, 2:4] = _u8(f16_bits(m).astype("<u2")).reshape(-1, 2)
    out[:, 4:8] = _pack_high_bits(q)
    out[:, 8:] = _pack_nibbles(q & 15)
    return out


def _k_scales_mins(x, levels):
    """Q4_K/Q5_K: 8 sub-blocks of 32 with x = d sc q - dmin m (sc, m 6-bit). Returns d, dmin (as stored),
    sc, m (nb, 8) and q (nb, 8, 32)."""
    sub = x.reshape(len(x), 8, 32)
    lo = np.minimum(sub.min(axis=2), np.float32(0))
    scale = (sub.max(axis=2) - lo) / np.float32(levels)
    mins = -lo
    d = _f16_round(scale.max(axis=1) / np.float32(63))
    dmin = _f16_round(mins.max(axis=1) / np.float32(63))
    sc = np.clip(np.rint(scale * _safe_inverse(d)[:, None]), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(mins * _safe_inverse(dmin)[:, None]), 0, 63).astype(np.uint8)
    eff_scale = (d[:, None] * sc).astype(np.float32)
    eff_min = (dmin[:, None] * m).astype(np.float32)
    q = np.clip(np.rint((sub + eff_min[:, :, None]) * _safe_inverse(eff_scale)[:, :, None]), 0, levels)
    return d, dmin, sc, m, q.astype(np.uint8)


def _pack_k_scales(sc, m):
    """8 6-bit scales and mins -> 12 bytes (see _unpack_k_scales)."""
    out = np.zeros((len(sc), 12), np.uint8)
    out[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return out


def _pack_k_nibbles(q):
    """(nb, 8, 32) 4-bit values -> 128 bytes: 32 bytes per pair of sub-blocks, sub-block 2c in the low
    nibbles and 2c + 1 in the high ones."""
    return (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(len(q), 128).astype(np.uint8)


def _q4_k(x):
    d, dmin, sc, m, q = _k_scales_mins(x, 15)
    out = np.zeros((len(x), 144), np.uint8)
    out[:, 0:2] = _u8(f16_bits(d).astype("<u2")).reshape(-1, 2)
    out[:, 2:4] = _u8(f16_bits(dmin).astype("<u2")).reshape(-1, 2)
    out[:, 4:16] = _pack_k_scales(sc, m)
    out[:, 16:] = _pack_k_nibbles(q)
    return out


def _q5_k(x):
    d, dmin, sc, m, q = _k_scales_mins(x, 31)
    out = np.zeros((len(x), 176), np.uint8)
    out[:, 0:2] = _u8(f16_bits(d).astype("<u2")).reshape(-1, 2)
    out[:, 2:4] = _u8(f16_bits(dmin).astype("<u2")).reshape(-1, 2)
    out[:, 4:16] = _pack_k_scales(sc, m)
    # qh[l]: bit s is the fifth bit of value l of sub-block s.
    high = ((q >> 4) & 1).astype(np.uint8)                              # (nb, 8, 32)
    out[:, 16:48] = (high << np.arange(8, dtype=np.uint8)[None, :, None]).sum(axis=1).astype(np.uint8)
    out[:, 48:] = _pack_k_nibbles(q & 15)
    return out


def _q6_k(x):
    """16 sub-blocks of 16 with x = d sc (q - 32), sc int8, q 6-bit."""
    nb = len(x)
    sub = x.reshape(nb, 16, 16)
    s = _signed_max(sub) / np.float32(-32)
    d = _f16_round(np.abs(s).max(axis=1) / np.float32(127))
    sc = np.clip(np.rint(s * _safe_inverse(d)[:, None]), -128, 127).astype(np.int8)
    eff = (d[:, None] * sc.astype(np.float32)).astype(np.float32)
    q = (np.clip(np.rint(sub * _safe_inverse(eff)[:, :, None]), -32, 31) + 32).astype(np.uint8).reshape(nb, 256)
    out = np.zeros((nb, 210), np.uint8)
    for h in range(2):  # each 128 values: 64 bytes of ql, 32 of qh
        v = q[:, 128 * h:128 * h + 128]
        a, b, c, e = v[:, 0:32], v[:, 32:64], v[:, 64:96], v[:, 96:128]
        out[:, 64 * h:64 * h + 32] = (a & 15) | ((c & 15) << 4)
        out[:, 64 * h + 32:64 * h + 64] = (b & 15) | ((e & 15) << 4)
        out[:, 128 + 32 * h:128 + 32 * h + 32] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6)
    out[:, 192:208] = sc.view(np.uint8)
    out[:, 208:210] = _u8(f16_bits(d).astype("<u2")).reshape(-1, 2)
    return out


QUANTIZERS = {
    "F32": _q_f32, "F16": _q_f16, "BF16": _q_bf16, "Q8_0": _q8_0, "Q4_0": _q4_0, "Q4_1": _q4_1,
    "Q5_0": _q5_0, "Q5_1": _q5_1, "Q4_K": _q4_k, "Q5_K": _q5_k, "Q6_K": _q6_k,
}


# --- dequantizers: b is (blocks, bytes a block) uint8; each returns (blocks, block size) float32 --------------

def _half_field(b, at):
    return f16_to_f32(b[:, at:at + 2].copy().view("<u2")[:, 0])


def _unpack_nibbles(qs):
    """16 bytes -> 32 values: byte j holds value j (low nibble) and value j + 16 (high nibble)."""
    return np.concatenate([qs & 15, qs >> 4], axis=1)


def _unpack_high_bits(b4):
    qh = b4.copy().view("<u4")[:, 0].astype(np.uint64)
    return ((qh[:, None] >> np.arange(32, dtype=np.uint64)) & 1).astype(np.int32)


def _d_f32(b):
    return b.copy().view("<f4").astype(np.float32)


def _d_f16(b):
    return f16_to_f32(b.copy().view("<u2"))


def _d_bf16(b):
    return bf16_to_f32(b.copy().view("<u2"))


def _d8_0(b):
    d = _half_field(b, 0)
    return b[:, 2:34].view(np.int8).astype(np.float32) * d[:, None]


def _d4_0(b):
    d = _half_field(b, 0)
    q = _unpack_nibbles(b[:, 2:18]).astype(np.int32) - 8
    return q.astype(np.float32) * d[:, None]


def _d4_1(b):
    d, m = _half_field(b, 0), _half_field(b, 2)
    q = _unpack_nibbles(b[:, 4:20]).astype(np.float32)
    return q * d[:, None] + m[:, None]


def _d5_0(b):
    d = _half_field(b, 0)
    q = (_unpack_nibbles(b[:, 6:22]).astype(np.int32) | (_unpack_high_bits(b[:, 2:6]) << 4)) - 16
    return q.astype(np.float32) * d[:, None]


def _d5_1(b):
    d, m = _half_field(b, 0), _half_field(b, 2)
    q = _unpack_nibbles(b[:, 8:24]).astype(np.int32) | (_unpack_high_bits(b[:, 4:8]) << 4)
    return q.astype(np.float32) * d[:, None] + m[:, None]


def _unpack_k_scales(s):
    """12 bytes -> 8 scales and 8 mins of 6 bits. Sub-blocks 0-3: the low 6 bits of bytes 0-3 (scales)
    and 4-7 (mins). Sub-blocks 4-7: the low (scale) and high (min) nibbles of bytes 8-11, with bits 4-5
    taken from the top 2 bits of bytes 0-3 (scales) and 4-7 (mins)."""
    s = s.astype(np.int32)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    m = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc, m


def _k_nibbles(qs):
    """128 bytes -> (nb, 8, 32): 32 bytes per pair of sub-blocks, low nibbles first."""
    q = qs.reshape(len(qs), 4, 32).astype(np.int32)
    return np.stack([q & 15, q >> 4], axis=2).reshape(len(qs), 8, 32)


def _dk(b, q):
    """x = (d sc) q - (dmin m), each product rounded to float32 as ggml computes it."""
    d, dmin = _half_field(b, 0), _half_field(b, 2)
    sc, m = _unpack_k_scales(b[:, 4:16])
    d1 = (d[:, None] * sc.astype(np.float32)).astype(np.float32)
    m1 = (dmin[:, None] * m.astype(np.float32)).astype(np.float32)
    y = d1[:, :, None] * q.astype(np.float32) - m1[:, :, None]
    return y.reshape(len(b), 256)


def _d4_k(b):
    return _dk(b, _k_nibbles(b[:, 16:144]))


def _d5_k(b):
    qh = b[:, 16:48].astype(np.int32)                                       # (nb, 32)
    high = (qh[:, None, :] >> np.arange(8)[None, :, None]) & 1              # (nb, 8, 32)
    return _dk(b, _k_nibbles(b[:, 48:176]) + 16 * high)


def _d6_k(b):
    nb = len(b)
    ql, qh = b[:, 0:128].astype(np.int32), b[:, 128:192].astype(np.int32)
    sc = b[:, 192:208].view(np.int8).astype(np.float32)
    d = _half_field(b, 208)
    q = np.zeros((nb, 256), np.int32)
    for h in range(2):
        lo, hi = ql[:, 64 * h:64 * h + 64], qh[:, 32 * h:32 * h + 32]
        q[:, 128 * h + 0:128 * h + 32] = (lo[:, 0:32] & 15) | (((hi >> 0) & 3) << 4)
        q[:, 128 * h + 32:128 * h + 64] = (lo[:, 32:64] & 15) | (((hi >> 2) & 3) << 4)
        q[:, 128 * h + 64:128 * h + 96] = (lo[:, 0:32] >> 4) | (((hi >> 4) & 3) << 4)
        q[:, 128 * h + 96:128 * h + 128] = (lo[:, 32:64] >> 4) | (((hi >> 6) & 3) << 4)
    # Value v of the block is in sub-block v // 16: x = (d sc) (q - 32).
    ds = (d[:, None] * sc).astype(np.float32)                               # (nb, 16)
    return (np.repeat(ds, 16, axis=1) * (q - 32).astype(np.float32)).astype(np.float32)


DEQUANTIZERS = {
    "F32": _d_f32, "F16": _d_f16, "BF16": _d_bf16, "Q8_0": _d8_0, "Q4_0": _d4_0, "Q4_1": _d4_1,
    "Q5_0": _d5_0, "Q5_1": _d5_1, "Q4_K": _d4_k, "Q5_K": _d5_k, "Q6_K": _d6_k,
}


def _check_shape(shape, type_name):
    if type_name not in GGML_TYPES:
        raise ValueError(f"unknown ggml type {type_name!r} (known: {', '.join(GGML_TYPES)})")
    block = GGML_TYPES[type_name][1]
    if len(shape) < 1 or len(shape) > 4 or shape[-1] % block:
        raise ValueError(f"shape {tuple(shape)}: 1 to 4 axes, the last a multiple of {type_name}'s block of {block}")


def quantize(array, type_name):
    """A float32 array (last axis = ne[0]) -> the tensor's bytes."""
    x = np.asarray(array, dtype=np.float32)
    _check_shape(x.shape, type_name)
    block = GGML_TYPES[type_name][1]
    return QUANTIZERS[type_name](x.reshape(-1, block)).tobytes()


def dequantize(data, type_name, shape):
    """A tensor's bytes -> float32 array of `shape` (numpy order)."""
    _check_shape(shape, type_name)
    _, block, size = GGML_TYPES[type_name]
    n = int(np.prod(shape))
    b = np.frombuffer(bytes(data), dtype=np.uint8)
    if len(b) != n // block * size:
        raise ValueError(f"{len(b)} bytes do not hold {tuple(shape)} of {type_name}")
    return DEQUANTIZERS[type_name](b.reshape(n // block, size)).astype(np.float32).reshape(shape)


# --- the file -------------------------------------------------------------------------------------------------

def _string(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _value(type_name, value):
    """A value's bytes (without its type: the caller writes that)."""
    if type_name in _SCALAR_FORMATS:
        return struct.pack(_SCALAR_FORMATS[type_name], value)
    if type_name == "BOOL":
        return struct.pack("<B", 1 if value else 0)
    if type_name == "STRING":
        return _string(value)
    if type_name == "ARRAY":
        elem, items = value
        out = struct.pack("<IQ", GGUF_TYPES[elem], len(items))
        return out + b"".join(_value(elem, v) for v in items)
    raise ValueError(f"unknown GGUF value type {type_name!r}")


def _pad(n, alignment):
    return (alignment - n % alignment) % alignment


def gguf_bytes(metadata, tensors, version=3):
    """The whole file; see write_gguf. Returns (bytes, layout) where layout lists, per tensor, its name, ne,
    type, offset (from the data section), byte count, and gives the data section's start and alignment."""
    alignment = DEFAULT_ALIGNMENT
    if "general.alignment" in metadata:
        t, v = metadata["general.alignment"]
        if t != "UINT32":
            raise ValueError("general.alignment must be UINT32")
        alignment = v
    header = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, (t, v) in metadata.items():
        header += _string(key) + struct.pack("<I", GGUF_TYPES[t]) + _value(t, v)
    blobs, layout, offset = [], [], 0
    for name, array, type_name in tensors:
        x = np.asarray(array, dtype=np.float32)
        data = quantize(x, type_name)
        ne = list(reversed(x.shape))
        header += _string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        header += struct.pack("<IQ", GGML_TYPES[type_name][0], offset)
        layout.append({"name": name, "ne": ne, "type": type_name, "offset": offset, "bytes": len(data),
                       "shape": list(x.shape)})
        blobs.append(data + b"\0" * _pad(len(data), alignment))
        offset += len(blobs[-1])
    data_start = len(header) + _pad(len(header), alignment)
    out = header + b"\0" * (data_start - len(header)) + b"".join(blobs)
    return out, {"version": version, "alignment": alignment, "data_offset": data_start, "tensors": layout}


def write_gguf(path, metadata, tensors, version=3):
    data, layout = gguf_bytes(metadata, tensors, version)
    with open(path, "wb") as f:
        f.write(data)
    return layout


# --- selftest ---------------------------------------------------------------------------------------------------

# The largest relative RMS error each type may show on normal data: the quantizers' sanity, not their quality.
_SELFTEST_LIMITS = {
    "F32": 0.0, "F16": 1e-3, "BF16": 5e-3, "Q8_0": 0.01, "Q6_K": 0.03, "Q5_0": 0.05, "Q5_1": 0.05,
    "Q5_K": 0.06, "Q4_0": 0.1, "Q4_1": 0.1, "Q4_K": 0.12,
}


def selftest():
    rng = np.random.default_rng(1234)
    failed = 0
    for type_name, (_, block, size) in GGML_TYPES.items():
        # Rows of different scales, and a sub-block pattern that makes the K quants' scales differ.
        x = rng.standard_normal((4, 512)).astype(np.float32)
        x *= np.array([1.0, 0.01, 30.0, 3.0], np.float32)[:, None]
        x *= np.repeat(np.linspace(0.2, 2.0, 512 // 32).astype(np.float32), 32)[None, :]
        data = quantize(x, type_name)
        ok = len(data) == x.size // block * size
        y = dequantize(data, type_name, x.shape)
        err = float(np.sqrt(np.mean((y - x) ** 2, axis=1) / np.mean(x ** 2, axis=1)).max())
        ok = ok and y.dtype == np.float32 and err <= _SELFTEST_LIMITS[type_name]
        # A block of zeros stays zeros.
        z = dequantize(quantize(np.zeros((1, 256), np.float32), type_name), type_name, (1, 256))
        ok = ok and not z.any()
        print(f"{type_name:5s} {len(data):6d} bytes  relative RMS error {err:.2e}  "
              f"(limit {_SELFTEST_LIMITS[type_name]:.0e})  {'ok' if ok else 'FAILED'}")
        failed += not ok
    # The file layout: a tensor's offset is aligned and the data section starts aligned.
    data, layout = gguf_bytes({"general.alignment": ("UINT32", 64), "k": ("ARRAY", ("STRING", ["a", "b"]))},
                              [("a", np.ones((1, 32), np.float32), "Q8_0"), ("b", np.ones(3, np.float32), "F32")])
    ok = data[:4] == b"GGUF" and layout["data_offset"] % 64 == 0 and layout["tensors"][1]["offset"] == 64
    ok = ok and len(data) == layout["data_offset"] + 128
    print(f"layout {'ok' if ok else 'FAILED'}")
    failed += not ok
    if failed:
        print(f"{failed} FAILED")
        return 1
    print("all ok")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["selftest"]:
        sys.exit(selftest())
    print(__doc__)
    sys.exit(2)
