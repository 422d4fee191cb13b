"""Lossless import of llama.cpp's Q5_0, Q5_1, Q4_K, Q5_K and Q6_K blocks into the affine format: group 32, or
group 16 for Q6_K, whose scales cover 16 elements.

A K-quant super-block covers 256 consecutive elements of a row (QK_K). Layouts (little-endian), per block:

=====  =====  ==========================================================================  ======================
type   bytes  fields                                                                      element of sub-block j
=====  =====  ==========================================================================  ======================
Q5_0   22     f16 d, u32 qh (5th bits), 16 bytes of low nibbles (as Q4_0)                 d * (q - 16)
Q5_1   24     f16 d, f16 m, u32 qh, 16 bytes of low nibbles                               d * q + m
Q4_K   144    f16 d, f16 dmin, 12 bytes: eight 6-bit scales sc_j and mins m_j, 128 bytes  (d sc_j) q - (dmin m_j)
              of nibbles (32-element sub-blocks: 64 elements per 32 bytes, low then high)
Q5_K   176    as Q4_K, then 32 bytes qh (bit j of byte i: 5th bit of element 32 j + i)    (d sc_j) q - (dmin m_j)
Q6_K   210    128 bytes low nibbles, 64 bytes 2-bit highs, 16 int8 scales, f16 d          (d sc_j) (q - 32)
              (16-element sub-blocks)
=====  =====  ==========================================================================  ======================

Why the affine form is exact (float32 scales and biases; `quant.dequantize_float32` computes scale * q + bias):
d, dmin, m are float16 (at most 11 significant bits); sc_j and m_j are 6-bit integers. So d * sc_j and
dmin * m_j have at most 17 significant bits: exact in float32, the very products gguf's and llama.cpp's float32
code forms. The code q has at most 5 bits, so scale * q (at most 22 bits) is exact too, and the one rounding left
is the sum's, the same single rounding as llama.cpp's `d * q - dm`. For Q4_K/Q5_K, x + (-y) and x - y are the same
IEEE operation, so even the sign of a zero agrees; for Q5_0 (bias -16 d) the value agrees and only a zero's sign
can differ, as for Q4_0 (see `gguf_blocks`).

Q6_K: scale d * sc_j (sc_j an int8, |sc_j| <= 128: at most 7 significant bits, so 18 with d's), bias -32 d sc_j
(a power of two times it), code q in [0, 64). scale * q has at most 24 significant bits: exact; the element
(d sc_j)(q - 32) has at most 23 (|q - 32| <= 32): exact, so the sum rounds to it, and gguf's single product is
exact too. Equal values; only a zero's sign can differ (q = 32 with a negative scale: gguf's product is -0, the
sum +0). Its groups of 16 need qgemv's group size 16, built at 8 bits (6-bit codes are stored as 8-bit ones).

The super-block form (`to_super`, what the device model runs Q4_K, Q5_K and Q6_K matrices in): the same weights at
about the blocks' own bytes. The codes stay at their width (4, 5, 6 bits), each group keeps its int8 scale and bias
codes, and each block of 256 its two factors as float32 (Q4_K/Q5_K: d and -dmin; Q6_K: d and -32 d, its one scale
code serving both); qgemv forms d * code and b * code in float32, the exact products of the affine import, so its
weights are the import's bit for bit. Bytes a weight: Q4_K 4.75 (the file 4.5, the affine import 6), Q5_K 5.75
(5.5; 10), Q6_K 6.75 (6.56; 12; its one code array passed as both scales and biases).
tests/model/test_kquants.py checks bit equality with `gguf.quants.dequantize` on llama.cpp's own quantisations and
on random blocks.
"""
import numpy as np

from . import quant
from .gguf_blocks import QK, _blocks as _raw_blocks, _f16_field, _split_nibbles

QK_K = quant.SUPER_K  # elements of a K-quant super-block: the super-block form's factors cover as many
AFFINE_KINDS = ("q5_0", "q5_1", "q4_k", "q5_k", "q6_k")  # the types `to_affine` imports
SUPER_KINDS = ("q4_k", "q5_k", "q6_k")  # the types `to_super` imports (super-blocks of QK_K elements)
BLOCK_BYTES = {"q5_0": 22, "q5_1": 24, "q4_k": 144, "q5_k": 176, "q6_k": 210}
_BLOCK_ELEMENTS = {"q5_0": QK, "q5_1": QK, "q4_k": QK_K, "q5_k": QK_K, "q6_k": QK_K}


def _blocks(raw, shape, kind, what):
    """Raw GGUF bytes as ``[N, K / block_elements, block_bytes]`` uint8, checked (gguf_blocks._blocks)."""
    return _raw_blocks(raw, shape, kind, what, _BLOCK_ELEMENTS[kind], BLOCK_BYTES[kind])


def _fifth_bits(qh_u32):
    """``[N, G]`` uint32 -> ``[N, G, 32]`` uint8: bit i of the word is element i's fifth bit (Q5_0, Q5_1)."""
    return ((qh_u32[..., None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)


def _q5_codes(b, offset):
    """The 32 five-bit codes of Q5_0/Q5_1 blocks whose qh word starts at byte ``offset``."""
    qh = np.ascontiguousarray(b[..., offset:offset + 4]).view("<u4")[..., 0]
    return _split_nibbles(b[..., offset + 4:]) | (_fifth_bits(qh) << 4)


def _k_scales(scales):
    """Q4_K/Q5_K's 12 scale bytes ``[N, G, 12]`` -> (sc, m), each ``[N, G, 8]`` 6-bit values (llama.cpp's
    get_scale_min_k4: sub-blocks 0-3 in the low 6 bits of bytes 0-3 and 4-7; 4-7 split across bytes 8-11)."""
    d, m, md = scales[..., 0:4], scales[..., 4:8], scales[..., 8:12]
    sc = np.concatenate([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], axis=-1)
    mn = np.concatenate([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], axis=-1)
    return sc, mn


def _fields(a, shifts, mask):
    """``(a >> s) & mask`` for each shift s, stacked before a's last axis: uint8 ``[..., L]`` -> ``[..., S, L]``. One
    shift at a time over the whole array: a broadcast over the shifts took about 8x as long on an 8B's tensors."""
    out = np.empty(a.shape[:-1] + (len(shifts), a.shape[-1]), np.uint8)
    for i, shift in enumerate(shifts):
        np.bitwise_and(a >> shift, mask, out=out[..., i, :])
    return out


def _k_low_nibbles(qs):
    """``[N, G, 128]`` bytes -> ``[N, G, 8, 32]``: each 32 bytes hold sub-block 2i in low and 2i+1 in high nibbles."""
    return _fields(qs.reshape(*qs.shape[:-1], 4, 32), (0, 4), 0x0F).reshape(*qs.shape[:-1], 8, 32)


def _parts(raw, shape, kind, what):
    """A K-quant tensor's blocks as ``(q, sc, mc, d, b, bits)``: codes q uint8 ``[N, K/G, G]`` (G = 32, or 16 for
    Q6_K), per group int8 scale and bias codes sc and mc ``[N, K/G]``, and per 256-element block the float32
    factors d and b ``[N, K/256]``, with element = (d sc) q + (b mc), each product exact in float32 (see above)."""
    b = _blocks(raw, shape, kind, what)
    n = b.shape[0]
    if kind == "q6_k":
        q, sc, d = _q6_k_codes(b)
        return q, sc, sc, d, np.float32(-32) * d, 6
    d, dmin = _f16_field(b, 0), _f16_field(b, 2)
    sc, mn = _k_scales(b[..., 4:16])
    q = _k_low_nibbles(b[..., 16:144] if kind == "q4_k" else b[..., 48:176])
    if kind == "q5_k":
        qh = b[..., 16:48]  # [N, G, 32]: bit j of byte i is the fifth bit of element i of sub-block j
        q = q | (_fields(qh, range(8), 1) << 4)
    return (q.reshape(n, -1, QK), sc.reshape(n, -1).astype(np.int8), mn.reshape(n, -1).astype(np.int8), d, -dmin,
            4 if kind == "q4_k" else 5)


def decode(raw, shape, kind):
    """``(q, scale, bias, bits)`` of a tensor's blocks, per group of G elements (32; 16 for Q6_K): q uint8
    ``[N, K/G, G]`` in ``[0, 2^bits)``, scale and bias float32 ``[N, K/G]`` with element = scale * q + bias
    (exactly; see above). kind: one of AFFINE_KINDS."""
    what = f"{kind}_to_affine"
    if kind == "q5_0":
        b = _blocks(raw, shape, kind, what)
        d = _f16_field(b, 0)
        return _q5_codes(b, 2), d, np.float32(-16) * d, 5
    if kind == "q5_1":
        b = _blocks(raw, shape, kind, what)
        return _q5_codes(b, 4), _f16_field(b, 0), _f16_field(b, 2), 5
    if kind not in SUPER_KINDS:
        raise ValueError(f"{what}: no affine import for {kind!r}")
    q, sc, mc, d, b, bits = _parts(raw, shape, kind, what)
    return (q, *quant.expand_supers(sc, mc, np.stack([d, b], axis=-1), q.shape[-1]), bits)


def to_affine(raw, shape, kind):
    """``(wq, scales, biases, bits, group_size)`` of a tensor's blocks in the affine format, float32 scales; group
    size 32, or 16 for Q6_K."""
    q, scale, bias, bits = decode(raw, shape, kind)
    return quant.pack(q.reshape(q.shape[0], -1), bits), scale, bias, bits, q.shape[-1]


def to_super(raw, shape, kind):
    """``(wq, scales, biases, supers, bits, group_size)`` of a K-quant tensor's blocks in qgemv's super-block form,
    at about the blocks' own bytes: codes packed at the type's width (Q4_K 4 bits, Q5_K 5, Q6_K 6), int8 scale and
    bias codes ``[N, K/G]`` (G = 32, or 16 for Q6_K) and float32 ``supers [N, K/256, 2]`` holding each block's
    (d, b), so that a group's scale is d * scale code and its bias b * bias code (Q4_K/Q5_K: d, -dmin with the
    6-bit sc_j and m_j; Q6_K: d, -32 d with sc_j for both, one array returned as scales and biases). The weights
    are `to_affine`'s, bit for bit (``quant.expand_supers`` gives its scales and biases). kind: one of
    SUPER_KINDS."""
    if kind not in SUPER_KINDS:
        raise ValueError(f"{kind}_to_super: the super-block form holds {', '.join(SUPER_KINDS)}, not {kind!r}")
    q, sc, mc, d, b, bits = _parts(raw, shape, kind, f"{kind}_to_super")
    return quant.pack(q.reshape(q.shape[0], -1), bits), sc, mc, np.stack([d, b], axis=-1), bits, q.shape[-1]


def _q6_k_codes(b):
    """Q6_K blocks ``[N, G, 210]`` -> q ``[N, 16 G, 16]`` (6-bit, unsigned), the int8 scales sc_j ``[N, 16 G]`` and
    d ``[N, G]`` (llama.cpp's ``dequantize_row_q6_K``)."""
    n, g = b.shape[:2]
    ql, qh = b[..., :128], b[..., 128:192]
    sc = np.ascontiguousarray(b[..., 192:208]).view(np.int8).reshape(n, -1)
    d = _f16_field(b, 208)
    # Each half of 128 elements is four runs of 32: ql byte l holds run 0 (low nibble) and run 2 (high), byte
    # l + 32 runs 1 and 3; qh byte l holds the two high bits of runs 0, 1, 2, 3 at shifts 0, 2, 4, 6.
    low = _fields(ql.reshape(n, g, 2, 64), (0, 4), 0x0F).reshape(n, g, 2, 4, 32)
    high = _fields(qh.reshape(n, g, 2, 32), (0, 2, 4, 6), 0x03)  # [N, G, 2, 4, 32]
    q = (low | (high << 4)).reshape(n, -1, 16)
    return q, sc, d
