"""The NumPy reference of mtlinv.quant (which runs the C++ core's src/core/quant.cpp): the implementation that
reproduced mlx.core.quantize / dequantize bit for bit before the quantiser moved into the core, kept as the oracle
that tests/ops/test_quant_format.py compares the core's every result with, bit for bit. Arguments are assumed valid
(mtlinv.quant checks them)."""
import numpy as np

# MLX's lower bound on the step of a group, so a constant group does not divide by zero.
_EPS = np.float32(1e-7)


def pack(q, bits):
    """Pack integers into MLX's little-endian bit stream.

    q: ``[..., K]`` integer array with values in ``[0, 2**bits)``, K a multiple of 32 (as every
    group is). Returns uint32 ``[..., K*bits/32]``.
    """
    q = np.asarray(q)
    lead, k = q.shape[:-1], q.shape[-1]
    # Every 8 consecutive values fill exactly `bits` bytes of the stream, for every supported width:
    # assemble them in a little-endian uint64 and keep its low `bits` bytes.
    octets = q.reshape(*lead, k // 8, 8)
    chunk = np.zeros((*lead, k // 8), dtype="<u8")
    for j in range(8):
        chunk |= octets[..., j].astype(np.uint64) << np.uint64(j * bits)
    stream = chunk.view(np.uint8).reshape(*lead, k // 8, 8)[..., :bits]
    words = np.ascontiguousarray(stream).reshape(*lead, k * bits // 8).view("<u4")
    return words.astype(np.uint32, copy=False)


def unpack(wq, bits, k):
    """Inverse of :func:`pack`: uint32 ``[..., k*bits/32]`` -> uint8 ``[..., k]``."""
    words = np.ascontiguousarray(wq, dtype="<u4")
    lead = words.shape[:-1]
    padded = np.zeros((*lead, k // 8, 8), dtype=np.uint8)
    padded[..., :bits] = words.view(np.uint8).reshape(*lead, k // 8, bits)
    chunk = padded.view("<u8")[..., 0]
    mask = np.uint64((1 << bits) - 1)
    q = np.empty((*lead, k // 8, 8), dtype=np.uint8)
    for j in range(8):
        q[..., j] = (chunk >> np.uint64(j * bits)) & mask
    return q.reshape(*lead, k)


def _group_params(w_max, w_min, bits):
    """MLX's per-group scale and bias, in float32 and before rounding to the output dtype.

    w_max, w_min: float32 ``[..., G]``, each group's extremes. Returns ``(scale, bias)`` float32
    ``[..., G]``.

    The step ``(max - min) / n_bins`` is signed so that the group's extreme of largest magnitude
    (``edge``) maps to q=0; the step is then re-derived as ``edge / q0`` so that ``edge`` itself is
    reproduced exactly (``bias = edge``). When ``edge`` rounds to q0 == 0 (an all-zero group, or one
    whose values are below half the minimal step) the bias stays 0 and the step is kept.
    """
    n_bins = np.float32((1 << bits) - 1)
    min_is_edge = np.abs(w_min) > np.abs(w_max)
    step = np.maximum((w_max - w_min) / n_bins, _EPS)
    step = np.where(min_is_edge, step, -step)
    edge = np.where(min_is_edge, w_min, w_max)
    with np.errstate(over="ignore"):
        # A constant group beyond ~3e31 overflows to q0 = -inf here, giving scale = -0.0 as in MLX.
        q0 = np.rint(edge / step)
    has_zero_point = q0 != 0
    scale = np.where(has_zero_point, edge / np.where(has_zero_point, q0, np.float32(1)), step)
    bias = np.where(has_zero_point, edge, np.float32(0))
    return scale.astype(np.float32, copy=False), bias.astype(np.float32, copy=False)


def quantize(w, group_size, bits):
    """mlx.core.quantize(w, group_size, bits) for a finite float32, float16 or bfloat16 w [..., N, K]."""
    dtype = w.dtype
    k = w.shape[-1]
    wg = w.astype(np.float32, copy=True).reshape(*w.shape[:-1], k // group_size, group_size)
    w_max, w_min = wg.max(axis=-1), wg.min(axis=-1)
    scale, bias = _group_params(w_max, w_min, bits)
    n_bins = np.float32((1 << bits) - 1)
    q = np.subtract(wg, bias[..., None], out=wg)
    with np.errstate(invalid="ignore"):
        np.divide(q, scale[..., None], out=q)
    np.rint(q, out=q)
    np.fmax(q, np.float32(0), out=q)
    np.minimum(q, n_bins, out=q)
    q = q.astype(np.uint8).reshape(w.shape)
    return pack(q, bits), scale.astype(dtype), bias.astype(dtype)


def dequantize(wq, scales, biases, group_size, bits):
    """mlx.core.dequantize: scale * q + bias, the product rounded to the scales' dtype before the sum."""
    dtype = scales.dtype
    k = wq.shape[-1] * 32 // bits
    q = unpack(wq, bits, k).reshape(*scales.shape, group_size).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        product = (q * scales[..., None].astype(np.float32)).astype(dtype)
        out = (product.astype(np.float32) + biases[..., None].astype(np.float32)).astype(dtype)
    return out.reshape(*wq.shape[:-1], k)


def dequantize_float32(wq, scales, biases, group_size, bits):
    """float32(scale) * q + float32(bias), one rounding per operation."""
    k = wq.shape[-1] * 32 // bits
    q = unpack(wq, bits, k).reshape(*scales.shape, group_size).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        out = q * scales[..., None].astype(np.float32) + biases[..., None].astype(np.float32)
    return out.reshape(*wq.shape[:-1], k)
