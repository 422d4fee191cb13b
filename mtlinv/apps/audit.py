"""`mtlinv check`: a bitwise invariance audit of every op on the active device.

For each op and case (rms_norm, add_rms_norm, gemv with w [N, K], [K, N] and, on devices with matrix units, w in
the tile layout, qgemv, sdpa; f32/f16/bf16), every row of an M-row call (M = 1..limit) must equal the same row
computed alone, bit for bit, and every query of a causal block of Lq queries must equal that query alone over its
visible keys. The elementwise decoder ops (add, swiglu, RoPE and the cache writes, embedding) compute each element
from its own inputs only and are covered by the test suite instead.
"""
from __future__ import annotations

import time

import numpy as np

import mtlinv

from . import audit_cases
from .audit_case import DTYPES, Case, rows_invariant

# The largest limit audited: a causal block of Lq queries needs Lq <= the keys of the shortest attention case
# (257, audit_cases.extra_cases), and each limit audits every M up to it.
MAX_LIMIT = 256


def _gemv_case(k: int, n: int, dtype_name: str, transpose: bool, tiled: bool = False) -> Case:
    """tiled: w [N, K] in the tile layout (mtlinv.tile_weights), which devices with matrix units run."""
    def run(limit: int):
        rng = np.random.default_rng(k * 31 + n)
        dtype = DTYPES[dtype_name]
        w = (rng.standard_normal((n, k) if transpose else (k, n)) * k ** -0.5).astype(dtype)
        tw = mtlinv.asarray(mtlinv.tile_weights(w) if tiled else w)
        x = rng.standard_normal((limit, k)).astype(dtype)
        return rows_invariant(lambda a: mtlinv.gemv(a, tw, transpose=transpose), x, limit)
    layout = "[N,K] tiles" if tiled else "[N,K]" if transpose else "[K,N]"
    return Case("gemv", f"K={k} N={n} {dtype_name} w{layout}", run)


def _rms_norm_case(cols: int, dtype_name: str) -> Case:
    def run(limit: int):
        rng = np.random.default_rng(cols)
        dtype = DTYPES[dtype_name]
        w = rng.standard_normal(cols).astype(dtype)
        x = rng.standard_normal((limit, cols)).astype(dtype)
        return rows_invariant(lambda a: mtlinv.rms_norm(a, w, 1e-6), x, limit)
    return Case("rms_norm", f"C={cols} {dtype_name}", run)


def _add_rms_norm_case(cols: int, dtype_name: str) -> Case:
    """The fused residual add and norm: both outputs (the sum and its norm) of each row."""
    def run(limit: int):
        rng = np.random.default_rng(cols + 1)
        dtype = DTYPES[dtype_name]
        w = rng.standard_normal(cols).astype(dtype)
        x = rng.standard_normal((limit, 2 * cols)).astype(dtype)  # each row: x, then the residual
        return rows_invariant(
            lambda a: np.concatenate([np.asarray(t) for t in mtlinv.add_rms_norm(a[:, :cols], a[:, cols:], w)], -1),
            x, limit)
    return Case("add_rms_norm", f"C={cols} {dtype_name}", run)


def cases(quick: bool) -> list[Case]:
    out = []
    for dt in DTYPES:
        out.append(_rms_norm_case(576, dt))
        out.append(_add_rms_norm_case(576, dt))
        for transpose in (True, False):
            out.append(_gemv_case(1000 if quick else 4096, 24 if quick else 512, dt, transpose))
        if dt != "f32" and mtlinv.device_info()["matrix_units"]:
            out.append(_gemv_case(992 if quick else 4096, 32 if quick else 512, dt, True, tiled=True))
    out += audit_cases.extra_cases(quick)
    return out


def run_audit(limit: int = 8, quick: bool = False, out=print) -> bool:
    info = mtlinv.device_info()
    out(f"mtlinv check on {info['backend']} ({info['name']}), limit {limit}")
    out(f"{'op':<12} {'case':<34} {'result':<6} {'seconds':>7}  detail")
    ok = True
    for case in cases(quick):
        t0 = time.perf_counter()
        try:
            passed, detail = case.run(limit)
        except mtlinv.MtlinvError as e:
            passed, detail = False, f"error: {e}"
        ok &= passed
        out(f"{case.op:<12} {case.desc:<34} {'PASS' if passed else 'FAIL':<6} {time.perf_counter() - t0:7.2f}  {detail}")
    out("all PASS" if ok else "FAILURES above")
    return ok
