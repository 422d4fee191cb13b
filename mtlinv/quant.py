"""Affine quantized weights in MLX's format: the layout ``qgemv`` consumes.

A weight ``w [..., N, K]`` is quantized along its last axis in groups of ``group_size`` consecutive
elements. Each group has one ``scale`` and one ``bias`` in ``w``'s dtype and stores integers
``q in [0, 2**bits - 1]`` so that ``w ~= scale * q + bias``.

Packing: the ``q`` of a row form one little-endian bit stream (element ``k`` occupies bits
``[k*bits, (k+1)*bits)``), stored as ``uint32`` words, ``K*bits/32`` words a row. For bits 2, 4 and 8
this is "value ``j`` of a word at bit ``bits*j``" (16, 8, 4 values a word). For bits 3, 5 and 6 MLX
uses the same bit stream, so every 32 elements fill exactly ``bits`` whole words (a group always starts
on a word boundary) but single values may straddle two words (e.g. 3-bit element 10 = bits 30..32).

``quantize``/``dequantize`` reproduce ``mlx.core.quantize``/``dequantize`` (mode "affine", CPU
backend, MLX 0.32) bit for bit (group size 16, which MLX refuses, by the same per-group arithmetic);
``dequantize_float32`` is the float32 dequantisation a kernel with float32 accumulation performs. The work is
the C++ core's (src/core/quant.h, also the C API's mtlinv_quantize and friends); this module checks the Python
arguments and shapes.
"""

import ml_dtypes
import numpy as np

from . import _native
from ._kinds import is_int

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), BFLOAT16)
SUPPORTED_BITS = (2, 3, 4, 5, 6, 8)
# MLX's group sizes, and 16: qgemv's exact import of GGUF's Q6_K (16-element scales) at 8 bits. MLX refuses 16; the
# same per-group arithmetic quantizes it here.
SUPPORTED_GROUP_SIZES = (16, 32, 64, 128)
MLX_GROUP_SIZES = (32, 64, 128)

def check_params(group_size, bits):
    """Raise ValueError unless (group_size, bits) is a supported pair of ints (4.0 or True are not: 4.0 == 4
    would pass the membership tests below and fail later, in a shift, with a message naming neither). Returns
    them as Python ints: a NumPy int8 bits=8 would overflow in 1 << bits, a uint8 in K*bits."""
    bits = _check_bits(bits, "quant")
    _require_int("quant", "group_size", group_size)
    if group_size not in SUPPORTED_GROUP_SIZES:
        raise ValueError(
            f"quant: group_size={group_size!r} is not supported; use one of {SUPPORTED_GROUP_SIZES}"
        )
    return int(group_size), bits


def _require_int(what, name, value):
    if not is_int(value):
        raise TypeError(f"{what}: {name} must be an int, got {type(value).__name__} {value!r}")


def _check_bits(bits, what):
    """bits as a Python int (see check_params), or TypeError / ValueError."""
    _require_int(what, "bits", bits)
    if bits not in SUPPORTED_BITS:
        raise ValueError(f"{what}: bits={bits!r} is not supported; use one of {SUPPORTED_BITS}")
    return int(bits)


def check_float_dtype(dtype, what):
    """Return ``np.dtype(dtype)``; TypeError unless it is float32, float16 or bfloat16."""
    dt = np.dtype(dtype)
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{what}: dtype {dt} is not supported; use float32, float16 or bfloat16")
    return dt


def pack(q, bits):
    """Pack integers into MLX's little-endian bit stream.

    q: ``[..., K]`` integer array with values in ``[0, 2**bits)``, K a multiple of 32 (as every
    group is). Returns uint32 ``[..., K*bits/32]``.
    """
    q = np.asarray(q)
    if q.ndim == 0 or q.dtype.kind not in "iu":
        raise TypeError(f"pack: q must be an integer array [..., K], got {q.dtype} of shape {q.shape}")
    k = q.shape[-1]
    bits = _check_bits(bits, "pack")
    if k % 32:
        raise ValueError(f"pack: K={k} is not a multiple of 32")
    if q.size and (q.min() < 0 or q.max() >= 1 << bits):
        raise ValueError(f"pack: values must lie in [0, {(1 << bits) - 1}] for bits={bits}")
    return _native._pack(np.ascontiguousarray(q, dtype=np.uint8), bits)


def unpack(wq, bits, k):
    """Inverse of :func:`pack`: uint32 ``[..., k*bits/32]`` -> uint8 ``[..., k]``."""
    bits = _check_bits(bits, "unpack")
    words = np.ascontiguousarray(wq, dtype=np.uint32)
    if k % 32 or words.shape[-1] * 32 != k * bits:
        raise ValueError(f"unpack: {words.shape[-1]} words a row cannot hold K={k} values of bits={bits}")
    return _native._unpack(words, bits, k)


def quantize(w, group_size=64, bits=4):
    """Quantize ``w`` along its last axis exactly as ``mlx.core.quantize(w, group_size, bits)``.

    w: ``[..., N, K]`` float32, float16 or bfloat16 (``ml_dtypes.bfloat16``), finite, K a multiple of
    ``group_size``.
    Returns ``(wq, scales, biases)``: ``wq`` uint32 ``[..., N, K*bits/32]``; ``scales`` and ``biases``
    ``[..., N, K/group_size]`` in ``w``'s dtype.

    All arithmetic is float32 with one rounding per operation, as in MLX; q is computed from the
    float32 scale and bias, which are rounded to ``w``'s dtype only when stored (no re-fit of the bias
    after rounding the scale).
    """
    group_size, bits = check_params(group_size, bits)
    w = _native._to_host_array(w, "quantize", "w")
    dtype = check_float_dtype(w.dtype, "quantize")
    if w.ndim < 2:
        raise ValueError(f"quantize: w must have at least 2 dimensions [..., N, K], got shape {w.shape}")
    k = w.shape[-1]
    if k % group_size:
        raise ValueError(f"quantize: K={k} (w.shape={w.shape}) is not a multiple of group_size={group_size}")
    # The finiteness and range checks are the core's (they name the first offending group).
    return _native._quantize(np.ascontiguousarray(w), group_size, bits)


def _check_quantized(wq, scales, biases, group_size, bits, what, codes=False):
    """Validate a quantized triple (codes: int8 scale and bias codes, the super-block form's); return
    ``(wq, scales, biases, K)`` as numpy arrays."""
    check_params(group_size, bits)
    wq, scales, biases = (_native._to_host_array(a, what, name)
                          for a, name in ((wq, "wq"), (scales, "scales"), (biases, "biases")))
    if wq.dtype != np.uint32:
        raise TypeError(f"{what}: wq must be uint32, got {wq.dtype}")
    if codes:
        if scales.dtype != np.int8:
            raise TypeError(f"{what}: with supers, scales and biases are int8 codes, got {scales.dtype}")
    elif scales.dtype == np.int8:
        raise TypeError(f"{what}: int8 scales are the super-block form's codes; pass supers= with them")
    else:
        check_float_dtype(scales.dtype, what)
    if scales.dtype != biases.dtype:
        raise TypeError(f"{what}: scales ({scales.dtype}) and biases ({biases.dtype}) must share a dtype")
    if wq.ndim < 2:
        raise ValueError(f"{what}: wq must have at least 2 dimensions [..., N, K*bits/32], got {wq.shape}")
    if scales.shape != biases.shape:
        raise ValueError(f"{what}: scales.shape={scales.shape} differs from biases.shape={biases.shape}")
    if (wq.shape[-1] * 32) % (bits * group_size):
        raise ValueError(f"{what}: wq rows of {wq.shape[-1]} words hold {wq.shape[-1] * 32 / bits:g} values of "
                         f"bits={bits}, not a whole number of groups of {group_size}")
    k = wq.shape[-1] * 32 // bits
    expected = wq.shape[:-1] + (k // group_size,)
    if scales.shape != expected:
        raise ValueError(
            f"{what}: wq.shape={wq.shape} with bits={bits}, group_size={group_size} needs scales and "
            f"biases of shape {expected}, got {scales.shape}"
        )
    return wq, scales, biases, k


def _contiguous(*arrays):
    return (np.ascontiguousarray(a) for a in arrays)


def dequantize(wq, scales, biases, group_size=64, bits=4):
    """``scale * q + bias`` exactly as ``mlx.core.dequantize`` computes it.

    wq: uint32 ``[..., N, K*bits/32]``; scales, biases: ``[..., N, K/group_size]``, one float dtype.
    Returns ``[..., N, K]`` in the scales' dtype.

    MLX multiplies and adds in the scales' dtype, rounding after each operation. Computing each
    operation in float32 and rounding once to float16/bfloat16 gives the same bits: the product of a
    (<= 11-bit) scale and an 8-bit q is exact in float32, and for the sum float32's 24 bits are at
    least 2p + 2 for p = 11 (float16) and p = 8 (bfloat16), so the double rounding is innocuous.
    """
    group_size, bits = check_params(group_size, bits)
    wq, scales, biases, k = _check_quantized(wq, scales, biases, group_size, bits, "dequantize")
    return _native._dequantize(*_contiguous(wq, scales, biases), group_size, bits, False)


def dequantize_float32(wq, scales, biases, group_size=64, bits=4):
    """Dequantise in float32: ``float32(scale) * q + float32(bias)``, one rounding per operation.

    This is the weight a float32-accumulating kernel multiplies; it is also what the lossless GGUF
    importers (``mtlinv.gguf_blocks``) promise to reproduce. Shapes as :func:`dequantize`; returns
    float32 ``[..., N, K]``.
    """
    group_size, bits = check_params(group_size, bits)
    wq, scales, biases, k = _check_quantized(wq, scales, biases, group_size, bits, "dequantize_float32")
    return _native._dequantize(*_contiguous(wq, scales, biases), group_size, bits, True)


# K positions of a super-block: the super-block form's factors (qgemv's supers) cover as many (the kernels' constant)
SUPER_K = _native.QGEMV_SUPER_K


def expand_supers(scales, biases, supers, group_size):
    """The float32 scales and biases of the super-block form (``mtlinv.gguf_kquants.to_super``): int8 codes
    ``[N, K/group_size]`` times their super-block's factors ``supers [N, K/256, 2]`` (``[..., 0]`` for the scales,
    ``[..., 1]`` for the biases), each product rounded to float32, as qgemv forms them. With them
    :func:`dequantize_float32` gives the weights qgemv computes with."""
    scales, biases, supers = (_native._to_host_array(a, "expand_supers", name)
                              for a, name in ((scales, "scales"), (biases, "biases"), (supers, "supers")))
    if scales.dtype != np.int8 or biases.dtype != np.int8:
        raise TypeError(f"expand_supers: scales and biases must be int8 codes, got {scales.dtype}, {biases.dtype}")
    if supers.dtype != np.float32:
        raise TypeError(f"expand_supers: supers must be float32, got {supers.dtype}")
    if scales.ndim != 2 or scales.shape != biases.shape:
        raise ValueError(f"expand_supers: scales and biases must be one [N, K/group_size] shape, got {scales.shape} "
                         f"and {biases.shape}")
    n, groups = scales.shape
    per = SUPER_K // group_size if is_int(group_size) and group_size > 0 and SUPER_K % group_size == 0 else 0
    if not per or groups % per or supers.shape != (n, groups // per, 2) or n * groups == 0:
        raise ValueError(f"expand_supers: scales {scales.shape} at group_size={group_size!r} need supers "
                         f"[N, K/256, 2] (N and K positive, K a multiple of 256), got {supers.shape}")
    def expand(codes, factor):
        return (factor[..., None] * codes.reshape(n, -1, per).astype(np.float32)).reshape(n, groups)
    return expand(scales, supers[..., 0]), expand(biases, supers[..., 1])


TILE_ROWS = 16  # rows of a tile in the tile layout (qgemv_mma's output tile)


def tile(wq, scales, biases, group_size=64, bits=4, supers=None):
    """The same weights in the tile layout that ``qgemv``'s matrix-unit kernel reads in whole blocks.

    Takes the row layout of :func:`quantize` (2-D: wq ``[N, K*bits/32]``, scales and biases ``[N, K/group_size]``)
    and returns ``(wq, scales, biases)`` as numpy arrays: wq ``[N/16, S, 16, 4*bits]``, where block ``[t, s]``
    holds K positions ``[128 s, 128 s + 128)`` of rows ``16 t .. 16 t + 15`` (S = ceil(K/128); a last partial step
    is padded with zero words), and scales and biases ``[N/16, K/group_size, 16]``, a group's 16 rows side by side.
    ``qgemv`` takes either layout and gives the same bits at or below the limit (above it each layout has its
    own throughput kernel); the tile layout runs on devices with matrix units
    (``device_info()["matrix_units"]``: CUDA) with 16-bit x, and needs bits 4 or 8 (8 at group size 16) and N a
    multiple of 16. On an H200 a 4-bit qgemv took 8-20% less time at M = 1..16 (docs/decisions.md, "qgemv: tile
    layout").
    The super-block form (int8 codes with ``supers [N, K/256, 2]``: ``mtlinv.gguf_kquants.to_super``) tiles in each
    of its formats (Q4_K, Q5_K, Q6_K); it returns ``(wq, scales, biases, supers)``, supers ``[N/16, K/256, 16, 2]``.
    """
    group_size, bits = check_params(group_size, bits)
    wq, scales, biases, _ = _check_quantized(wq, scales, biases, group_size, bits, "tile", codes=supers is not None)
    if wq.ndim != 2:
        raise ValueError(f"tile: wq must be [N, K*bits/32], got shape {wq.shape}")
    if supers is not None:
        supers = _native._to_host_array(supers, "tile", "supers")
    # The rearrangement is the C++ core's (src/core/tile_layout.h), which the C and C++ APIs export too.
    return _native._quant_tile(wq, scales, biases, group_size, bits, supers)
