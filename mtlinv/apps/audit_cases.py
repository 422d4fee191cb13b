"""Audit cases of `mtlinv check` for the quantized matmul and attention (gemv and rms_norm are in audit.py)."""
from __future__ import annotations

import numpy as np

import mtlinv

from .. import quant
from .audit_case import DTYPES, Case, rows_invariant


def _qgemv_case(k: int, n: int, dtype_name: str, group_size: int, bits: int, tiled: bool = False):
    """tiled: the weights in the tile layout (mtlinv.quant.tile), which devices with matrix units run."""

    def run(limit: int):
        rng = np.random.default_rng(k + n + bits)
        dtype = DTYPES[dtype_name]
        weights = quant.quantize(rng.standard_normal((n, k)).astype(dtype), group_size=group_size, bits=bits)
        if tiled:
            weights = quant.tile(*weights, group_size=group_size, bits=bits)
        wq, scales, biases = (mtlinv.asarray(a) for a in weights)
        x = rng.standard_normal((limit, k)).astype(dtype)
        return rows_invariant(
            lambda a: mtlinv.qgemv(a, wq, scales, biases, group_size=group_size, bits=bits), x, limit)
    layout = ", tile layout" if tiled else ""
    return Case("qgemv", f"K={k} N={n} {dtype_name} g{group_size} {bits}-bit{layout}", run)


def _sdpa_case(kv_len: int, dtype_name: str, q_heads: int, kv_heads: int, head_dim: int):
    """Query i of a causal block of Lq queries equals the single query at position kv_len - Lq + i over the first
    kv_len - Lq + i + 1 keys, for every Lq up to the limit."""

    def run(limit: int):
        rng = np.random.default_rng(kv_len)
        dtype = DTYPES[dtype_name]
        k = mtlinv.asarray(rng.standard_normal((1, kv_heads, kv_len, head_dim)).astype(dtype))
        v = mtlinv.asarray(rng.standard_normal((1, kv_heads, kv_len, head_dim)).astype(dtype))
        q = rng.standard_normal((1, q_heads, limit, head_dim)).astype(dtype)
        # Single queries: query j of the last `limit` positions, alone over its visible prefix.
        singles = [np.asarray(mtlinv.sdpa(q[:, :, j:j + 1], k, v, kv_len=kv_len - limit + j + 1))
                   for j in range(limit)]
        with mtlinv.batch_invariant(limit):
            for lq in range(1, limit + 1):
                block = np.asarray(mtlinv.sdpa(q[:, :, limit - lq:], k, v, kv_len=kv_len))
                for i in range(lq):
                    j = limit - lq + i
                    if block[:, :, i:i + 1].tobytes() != singles[j].tobytes():
                        return False, f"Lq={lq} query {i} differs from the query alone"
        return True, f"Lq=1..{limit}, every query"
    return Case("sdpa", f"keys={kv_len} {dtype_name} Hq={q_heads} Hkv={kv_heads} D={head_dim}", run)


def extra_cases(quick: bool) -> list:
    k, n = (512, 24) if quick else (4096, 512)
    cases = [_qgemv_case(k, n, dt, 64, 4) for dt in ("f16", "bf16")]
    cases.append(_qgemv_case(k, n, "f32", 32, 8))
    if mtlinv.device_info()["matrix_units"]:
        cases += [_qgemv_case(k, 32 if quick else n, dt, 64, 4, tiled=True) for dt in ("f16", "bf16")]
    lengths = (300,) if quick else (257, 4100)
    for kv in lengths:
        cases.append(_sdpa_case(kv, "bf16", 8, 2, 64))
        cases.append(_sdpa_case(kv, "f16", 4, 1, 128))
    return cases
