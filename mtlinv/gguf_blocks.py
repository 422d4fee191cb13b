"""Lossless import of llama.cpp's GGUF block formats Q4_0, Q4_1 and Q8_0 into the affine format.

A GGUF tensor of logical shape ``[N, K]`` (numpy order: GGUF lists it as ``ne = [K, N]``) is stored
as ``N * K/32`` blocks, row after row, each covering 32 consecutive elements of a row:

=======  =====  ============================================  ======================
type     bytes  layout (little-endian)                        element ``i`` of block
=======  =====  ============================================  ======================
Q4_0     18     f16 ``d``, 16 bytes of nibbles                ``d * (q_i - 8)``
Q4_1     20     f16 ``d``, f16 ``m``, 16 bytes of nibbles     ``d * q_i + m``
Q8_0     34     f16 ``d``, 32 int8 ``q``                      ``d * q_i``
=======  =====  ============================================  ======================

Nibble order: byte ``j`` holds element ``j`` in its low nibble and element ``j + 16`` in its high
nibble. The affine format (``mtlinv.quant``) packs element ``k`` at bits ``4k..4k+3`` of the row's bit
stream instead, so the importers repack.

Conversions (group_size 32):

- Q4_0 -> bits 4, ``scale = d``, ``bias = -8 d``.
- Q4_1 -> bits 4, ``scale = d``, ``bias = m``.
- Q8_0 -> bits 8, ``q_u = q + 128`` (unsigned), ``scale = d``, ``bias = -128 d``.

Why this is exact in float32 (``quant.dequantize_float32``, the kernel's dequantisation): ``d`` is a
float16, so as a float32 it has at most 11 significant bits, is a multiple of ``2**-24`` and
``|d| <= 65504``; the integer factor has at most 8 bits. Every product ``d * q``, ``d * (q - 8)`` and
``d * q_u`` therefore has at most 19 significant bits and, if nonzero, a magnitude in
``[2**-24, 2**24]``, far inside float32's normal range, so it is computed exactly; ``-8 d`` and
``-128 d`` are exact (powers of two). Hence ``d*q + (-8d)`` is the float32 rounding of the exact
real ``d*(q-8)``, which is itself a float32, so it *is* ``d*(q-8)`` (the same holds for a fused
multiply-add, and for Q8_0 with ``d*q_u + (-128d) = d*q``). Q4_1 uses llama.cpp's own formula.
The only difference is the sign of zero: where ``q == 8`` (Q4_0) or ``q == 0`` (Q8_0) the affine form
gives ``+0.0`` (``x + (-x)``) while llama.cpp gives ``d * 0``, which is ``-0.0`` when ``d < 0``; the
values compare equal and no product or sum with a nonzero term can tell them apart.

Storing scale and bias in the activation dtype: float32 is always exact. float16 holds every ``d`` and
``m`` but ``-8 d`` overflows when ``|d| > 8188`` and ``-128 d`` when ``|d| > 511.75``. bfloat16 has
only 8 significant bits, so an f16 ``d`` whose low 3 mantissa bits are nonzero (typically most
blocks of a tensor) is not representable. The importers never round silently: if any scale or bias is not exactly
representable in the requested dtype they raise ValueError naming the first offending block, and the
caller picks float32 (or float16) scales instead.
"""

import numpy as np

from . import quant
from ._kinds import is_int

QK = 32  # elements per block, for all three types (QK4_0 == QK4_1 == QK8_0)
BLOCK_BYTES = {"q4_0": 18, "q4_1": 20, "q8_0": 34}


def _check_shape(shape, what):
    """Return ``(N, K)`` from a logical shape; ValueError unless 2-D, positive, K % 32 == 0."""
    shape = tuple(shape)
    if len(shape) != 2 or any(not is_int(s) or s <= 0 for s in shape):
        raise ValueError(f"{what}: shape must be two positive integers [N, K], got {shape}")
    n, k = (int(s) for s in shape)
    if k % QK:
        raise ValueError(f"{what}: K={k} is not a multiple of the block size {QK}")
    return n, k


def _blocks(raw, shape, kind, what, per=QK, nbytes=None):
    """View raw GGUF bytes as ``[N, K / per, nbytes]`` uint8 (blocks of `per` elements, `nbytes` bytes each; by
    default this module's 32-element types); validate dtype and size."""
    raw = np.asarray(raw)
    if raw.dtype != np.uint8:
        raise TypeError(f"{what}: blocks must be a uint8 array of raw bytes, got {raw.dtype}")
    n, k = _check_shape(shape, what)
    if k % per:
        raise ValueError(f"{what}: K={k} is not a multiple of the {kind.upper()} block size {per}")
    nbytes = BLOCK_BYTES[kind] if nbytes is None else nbytes
    expected = n * (k // per) * nbytes
    if raw.size != expected:
        raise ValueError(
            f"{what}: shape [{n}, {k}] in {kind.upper()} needs {expected} bytes "
            f"({n * (k // per)} blocks of {nbytes}), got {raw.size}"
        )
    return np.ascontiguousarray(raw).reshape(n, k // per, nbytes)


def _f16_field(blocks, offset):
    """The little-endian float16 at byte ``offset`` of each block, as float32 ``[N, K/32]``."""
    field = np.ascontiguousarray(blocks[..., offset : offset + 2]).view("<f2")[..., 0]
    return field.astype(np.float32)


def _split_nibbles(qs):
    """``[N, G, 16]`` bytes -> ``[N, G, 32]`` uint8 values in element order (low nibbles first)."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def _join_nibbles(q):
    """``[N, G, 32]`` values < 16 -> ``[N, G, 16]`` bytes: element j low, element j + 16 high."""
    return (q[..., :16] | (q[..., 16:] << 4)).astype(np.uint8)


def _assemble(n, g, fields):
    """Concatenate per-block byte fields (each ``[N, G, b]`` uint8) into flat GGUF bytes."""
    return np.concatenate([f.reshape(n, g, -1) for f in fields], axis=-1).reshape(-1)


def _f16_bytes(values, what):
    """float32 ``[N, G]`` -> round-to-nearest float16, as ``[N, G, 2]`` little-endian bytes; ValueError where a
    value overflows float16 (llama.cpp would store inf and decode the block to inf or NaN)."""
    with np.errstate(over="ignore"):
        half = values.astype("<f2")
    bad = np.isinf(half) & np.isfinite(values)
    if bad.any():
        n, g = np.argwhere(bad)[0]
        raise ValueError(f"{what}: block {g} of row {n} needs a float16 field of {values[n, g]:g}, beyond float16")
    return half.view(np.uint8).reshape(*values.shape, 2)


def _as_rows(x, what):
    """Float32 blocks ``[N, K/32, 32]`` of a float ``[N, K]`` matrix, as llama.cpp's encoders see it."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating) and x.dtype != quant.BFLOAT16:
        raise TypeError(f"{what}: x must be a float array, got {x.dtype}")
    n, k = _check_shape(x.shape, what)
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(x))[0])
        raise ValueError(f"{what}: x has a non-finite value at {where}")
    return x.reshape(n, k // QK, QK)


def _inverse(d):
    """llama.cpp's ``id = d ? 1.0f/d : 0.0f`` in float32."""
    return np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)


def _round_half_away(x):
    """C ``roundf``: ties away from zero. ``x - trunc(x)`` is exact, unlike ``trunc(x + 0.5)``."""
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= np.float32(0.5), np.sign(x), np.float32(0))


def quantize_q4_0(x):
    """Encode float ``[N, K]`` as Q4_0 bytes like llama.cpp's ``quantize_row_q4_0_ref``.

    Per block: ``max`` is the first element of largest magnitude, ``d = max / -8`` (stored as f16),
    ``q = min(15, trunc(x / d_f32 + 8.5))`` with the float32 ``d``. Returns flat uint8 bytes.
    """
    xb = _as_rows(x, "quantize_q4_0")
    first_max = np.argmax(np.abs(xb), axis=-1)[..., None]
    d = np.take_along_axis(xb, first_max, axis=-1)[..., 0] / np.float32(-8)
    x0 = xb * _inverse(d)[..., None]
    q = np.minimum(np.trunc(x0 + np.float32(8.5)), 15).astype(np.uint8)
    return _assemble(*d.shape, [_f16_bytes(d, "quantize_q4_0"), _join_nibbles(q)])


def quantize_q4_1(x):
    """Encode float ``[N, K]`` as Q4_1 bytes like llama.cpp's ``quantize_row_q4_1_ref``.

    Per block: ``d = (max - min) / 15``, ``m = min`` (both stored as f16),
    ``q = min(15, trunc((x - min) / d_f32 + 0.5))``. Returns flat uint8 bytes.
    """
    xb = _as_rows(x, "quantize_q4_1")
    lo, hi = xb.min(axis=-1), xb.max(axis=-1)
    d = (hi - lo) / np.float32(15)
    x0 = (xb - lo[..., None]) * _inverse(d)[..., None]
    q = np.minimum(np.trunc(x0 + np.float32(0.5)), 15).astype(np.uint8)
    return _assemble(*d.shape, [_f16_bytes(d, "quantize_q4_1"), _f16_bytes(lo, "quantize_q4_1"), _join_nibbles(q)])


def quantize_q8_0(x):
    """Encode float ``[N, K]`` as Q8_0 bytes like llama.cpp's ``quantize_row_q8_0_ref``.

    Per block: ``d = max|x| / 127`` (stored as f16), ``q = roundf(x / d_f32)``. Returns flat uint8 bytes.
    """
    xb = _as_rows(x, "quantize_q8_0")
    d = np.abs(xb).max(axis=-1) / np.float32(127)
    q = _round_half_away(xb * _inverse(d)[..., None]).astype(np.int8)
    return _assemble(*d.shape, [_f16_bytes(d, "quantize_q8_0"), q.view(np.uint8)])


def _decode_q4_0(raw, shape, what):
    """``(d, q)``: float32 ``[N, G]`` and uint8 ``[N, G, 32]`` of Q4_0 bytes."""
    b = _blocks(raw, shape, "q4_0", what)
    return _f16_field(b, 0), _split_nibbles(b[..., 2:])


def _decode_q4_1(raw, shape, what):
    """``(d, m, q)``: float32 ``[N, G]`` twice and uint8 ``[N, G, 32]`` of Q4_1 bytes."""
    b = _blocks(raw, shape, "q4_1", what)
    return _f16_field(b, 0), _f16_field(b, 2), _split_nibbles(b[..., 4:])


def _decode_q8_0(raw, shape, what):
    """``(d, q)``: float32 ``[N, G]`` and int8 ``[N, G, 32]`` of Q8_0 bytes."""
    b = _blocks(raw, shape, "q8_0", what)
    return _f16_field(b, 0), np.ascontiguousarray(b[..., 2:]).view(np.int8)


def dequantize_q4_0(raw, shape):
    """llama.cpp's ``dequantize_row_q4_0``: float32 ``[N, K]`` with ``d * (q - 8)``."""
    d, q = _decode_q4_0(raw, shape, "dequantize_q4_0")
    return ((q.astype(np.float32) - np.float32(8)) * d[..., None]).reshape(q.shape[0], -1)


def dequantize_q4_1(raw, shape):
    """llama.cpp's ``dequantize_row_q4_1``: float32 ``[N, K]`` with ``q * d + m``."""
    d, m, q = _decode_q4_1(raw, shape, "dequantize_q4_1")
    return (q.astype(np.float32) * d[..., None] + m[..., None]).reshape(q.shape[0], -1)


def dequantize_q8_0(raw, shape):
    """llama.cpp's ``dequantize_row_q8_0``: float32 ``[N, K]`` with ``q * d``."""
    d, q = _decode_q8_0(raw, shape, "dequantize_q8_0")
    return (q.astype(np.float32) * d[..., None]).reshape(q.shape[0], -1)


def _exact(values, dtype, name, what):
    """Cast float32 ``[N, G]`` to ``dtype``; ValueError if any value would change (or overflow)."""
    if not np.isfinite(values).all():
        r, g = np.argwhere(~np.isfinite(values))[0]
        raise ValueError(f"{what}: block (row {r}, block {g}) has a non-finite {name} {values[r, g]}")
    with np.errstate(over="ignore"):
        cast = values.astype(dtype)
    lossy = cast.astype(np.float32) != values
    if lossy.any():
        r, g = np.argwhere(lossy)[0]
        raise ValueError(
            f"{what}: {int(lossy.sum())} of {lossy.size} {name} values are not exactly representable in "
            f"{dtype} (first: row {r}, block {g}, value {float(values[r, g])!r}); the conversion would "
            f"not be lossless. Use dtype=float32, which is always exact (float16 is exact unless "
            f"|d| is huge)."
        )
    return cast


def _affine(q, scale, bias, bits, dtype, what):
    """Pack ``q [N, G, 32]`` and store exact scales/biases: the ``(wq, scales, biases)`` triple."""
    dtype = quant.check_float_dtype(dtype, what)
    n, g = scale.shape
    wq = quant.pack(q.reshape(n, g * QK), bits)
    return wq, _exact(scale, dtype, "scale (d)", what), _exact(bias, dtype, "bias", what)


def q4_0_to_affine(raw, shape, dtype=np.float16):
    """Q4_0 bytes of a ``[N, K]`` tensor -> ``(wq, scales, biases)``, group_size 32, bits 4.

    ``wq`` uint32 ``[N, K/8]``; ``scales = d``, ``biases = -8 d``, ``[N, K/32]`` in ``dtype``
    (float16, bfloat16 or float32). ValueError if a scale or bias is not exact in ``dtype``.
    """
    d, q = _decode_q4_0(raw, shape, "q4_0_to_affine")
    return _affine(q, d, np.float32(-8) * d, 4, dtype, "q4_0_to_affine")


def q4_1_to_affine(raw, shape, dtype=np.float16):
    """Q4_1 bytes of a ``[N, K]`` tensor -> ``(wq, scales, biases)``, group_size 32, bits 4.

    ``wq`` uint32 ``[N, K/8]``; ``scales = d``, ``biases = m``, ``[N, K/32]`` in ``dtype``.
    ValueError if a scale or bias is not exact in ``dtype``.
    """
    d, m, q = _decode_q4_1(raw, shape, "q4_1_to_affine")
    return _affine(q, d, m, 4, dtype, "q4_1_to_affine")


def q8_0_to_affine(raw, shape, dtype=np.float16):
    """Q8_0 bytes of a ``[N, K]`` tensor -> ``(wq, scales, biases)``, group_size 32, bits 8.

    ``wq`` uint32 ``[N, K/4]`` holding ``q + 128``; ``scales = d``, ``biases = -128 d``,
    ``[N, K/32]`` in ``dtype``. ValueError if a scale or bias is not exact in ``dtype``.
    """
    d, q = _decode_q8_0(raw, shape, "q8_0_to_affine")
    q_unsigned = (q.astype(np.int16) + 128).astype(np.uint8)
    return _affine(q_unsigned, d, np.float32(-128) * d, 8, dtype, "q8_0_to_affine")
