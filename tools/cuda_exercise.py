#!/usr/bin/env python3
"""Runs every kernel family once or twice on small shapes with tails, on the active device: the workload for
compute-sanitizer on the CUDA backend (the emulator's checking mode does the same job on the CPU).

    MTLINV_DEVICE=cuda compute-sanitizer --tool memcheck  python tools/cuda_exercise.py
    MTLINV_DEVICE=cuda compute-sanitizer --tool racecheck python tools/cuda_exercise.py

Each call's output is checked loosely against NumPy (the op tests check it closely), so a kernel that the tool
slows down or perturbs still has to produce sane numbers. Not reached on CUDA: the sdpa_*_unaligned kernels, which
only host memory wrapped at an odd offset selects (CUDA tensors are always fresh, aligned allocations).
"""
import sys

import ml_dtypes
import numpy as np

import mtlinv
from mtlinv import _native as ops  # every op, whichever of them mtlinv/__init__.py exports yet
from mtlinv import quant

RNG = np.random.default_rng(7)
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def close(got, ref, what, tol=3e-2):
    got = np.asarray(got, dtype=np.float64)
    err = np.abs(got - ref).max() / (np.abs(ref).max() + 1e-6)
    if not np.all(np.isfinite(got)) or err > tol:
        raise SystemExit(f"{what}: relative error {err:.3g}")


def rand(shape, dtype, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def rms_norm(dtype):
    for rows, cols in ((3, 70), (2, 4096)):
        x, w = rand((rows, cols), dtype), rand(cols, dtype)
        x64 = np.asarray(x, np.float64)
        ref = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * np.asarray(w, np.float64)
        close(ops.rms_norm(x, w, 1e-6), ref, "rms_norm")
        s, y = ops.add_rms_norm(x, np.zeros_like(x), w, 1e-6)
        close(s, x64, "add_rms_norm sum")
        close(y, ref, "add_rms_norm")


def gemv(dtype):
    for k, n in ((70, 13), (4097, 130)):
        for transpose in (True, False):
            w = rand((n, k) if transpose else (k, n), dtype, k ** -0.5)
            bias = rand(n, dtype)
            w64 = np.asarray(w, np.float64)
            # canonical tiles of R = 1, 2, 4 and 8 rows (9: two tiles), throughput
            for limit, m in ((16, 1), (16, 2), (16, 3), (16, 9), (0, 5)):
                x = rand((m, k), dtype)
                with mtlinv.batch_invariant(limit):
                    y = ops.gemv(x, w, bias, transpose=transpose)
                ref = np.asarray(x, np.float64) @ (w64.T if transpose else w64) + np.asarray(bias, np.float64)
                close(y, ref, f"gemv k={k} n={n} transpose={transpose} limit={limit} m={m}")
    if np.dtype(dtype).itemsize == 2 and mtlinv.device_info()["matrix_units"]:
        # The tile layout: gemv_nk_mma's _tiled kernels, 129 blocks of 32 (some past the groups in flight), tiles of
        # 8 and 16 rows, three row tiles above the limit.
        k, n = 4128, 144
        w = rand((n, k), dtype, k ** -0.5)
        tiles = mtlinv.tile_weights(w)
        for limit, m in ((16, 1), (16, 9), (0, 40)):
            x = rand((m, k), dtype)
            with mtlinv.batch_invariant(limit):
                y = ops.gemv(x, tiles)
            close(y, np.asarray(x, np.float64) @ np.asarray(w, np.float64).T, f"gemv tiled limit={limit} m={m}")


def qgemv(dtype, all_bits):
    k, n, group = 320, 40, 64  # 10 runs of 32: qgemv_mma's last step of 4 runs is partial
    for bits in (2, 3, 4, 5, 6, 8) if all_bits else (4, 8):
        wq, scales, biases = quant.quantize(rand((n, k), np.float32).astype(dtype), group, bits)
        # float32 scales with 16-bit activations (the *_sf32 kernels, what GGUF imports produce) at 4 and 8 bits, and
        # float16 ones beside bfloat16 x (the *_bf16_sf16 kernels) at 4, 5 and 8
        wide = np.dtype(dtype) != np.float32 and bits in (4, 8)
        half = np.dtype(dtype) == np.dtype(ml_dtypes.bfloat16) and bits in (4, 5, 8)
        for scale_dtype in ((dtype, np.float32) if wide else (dtype,)) + ((np.float16,) if half else ()):
            sc, bs = scales.astype(scale_dtype), biases.astype(scale_dtype)
            w = quant.dequantize_float32(wq, sc, bs, group, bits).astype(np.float64)
            for limit, m in ((16, 1), (16, 2), (16, 3), (16, 9), (0, 5)):  # tiles R = 1, 2, 4, 8; qgemm
                x = rand((m, k), dtype)
                with mtlinv.batch_invariant(limit):
                    y = ops.qgemv(x, wq, sc, bs, group_size=group, bits=bits)
                close(y, np.asarray(x, np.float64) @ w.T, f"qgemv bits={bits} scales={np.dtype(scale_dtype)} "
                      f"limit={limit} m={m}")
        if wide and mtlinv.device_info()["matrix_units"]:  # the tile layout: qgemv_mma's _tiled kernels, N = 48
            tq = quant.quantize(rand((48, k), np.float32).astype(dtype), group, bits)
            for scale_dtype in (dtype, np.float32) + ((np.float16,) if half else ()):
                q = (tq[0], tq[1].astype(scale_dtype), tq[2].astype(scale_dtype))
                w = quant.dequantize_float32(*q, group, bits).astype(np.float64)
                tiles = quant.tile(*q, group, bits)
                for limit, m in ((16, 1), (16, 9), (0, 40)):  # tiles R = 8, 16; three row tiles above the limit
                    x = rand((m, k), dtype)
                    with mtlinv.batch_invariant(limit):
                        y = ops.qgemv(x, *tiles, group_size=group, bits=bits)
                    close(y, np.asarray(x, np.float64) @ w.T, f"qgemv tiled bits={bits} "
                          f"scales={np.dtype(scale_dtype)} limit={limit} m={m}")
                x = rand((1, k), dtype)  # a decoder's projection: the _early instance, its weights read before its wait
                y = ops.qgemv(x, *tiles, group_size=group, bits=bits, constant_weights=True)
                close(y, np.asarray(x, np.float64) @ w.T,
                      f"qgemv tiled early bits={bits} scales={np.dtype(scale_dtype)}")
            if bits == 4:  # two output tiles a threadgroup (the _c2 instances): 9-16 rows where N / 32 fills the cores
                two_tiles(dtype, k, group)


def two_tiles(dtype, k, group):
    """qgemv_mma's _c2 instances, which the plan takes for the 16-row tile (9-16 rows) of 4-bit tiled weights with
    scales of x's type where N / 32 threadgroups give every core one: N / 16 odd, so the last threadgroup's second
    tile lies past N; 9 rows fill the tile in part."""
    n = 32 * mtlinv.device_info()["threads"] + 16
    q = quant.quantize(rand((n, k), np.float32).astype(dtype), group, 4)
    w = quant.dequantize_float32(*q, group, 4).astype(np.float64)
    tiles = quant.tile(*q, group, 4)
    for m in (9, 16):
        plan = mtlinv._native.plan_qgemv(rows=m, k=k, n=n, group_size=group, bits=4, dtype=np.dtype(dtype).name,
                                         scale_dtype=np.dtype(dtype).name, limit=16, tiled=True)
        assert "_c2_" in plan["launches"][0]["kernel"], plan
        x = rand((m, k), dtype)
        with mtlinv.batch_invariant(16):
            y = ops.qgemv(x, *tiles, group_size=group, bits=4)
        close(y, np.asarray(x, np.float64) @ w.T, f"qgemv tiled two output tiles n={n} m={m}")


def qgemv_super(dtype):
    """The super-block form (int8 codes, float32 factors per 256 values: GGUF's K-quants), each width it is built for,
    in both layouts; its weights from quant.expand_supers."""
    k, n = 512, 48
    for bits, group in ((4, 32), (5, 32), (6, 16)):
        q = RNG.integers(0, 1 << bits, (n, k))
        codes = [RNG.integers(-128, 128, (n, k // group)).astype(np.int8) for _ in range(2)]
        supers = (RNG.uniform(1, 2, (n, k // 256, 2)) * [2.0 ** -9, -2.0 ** -6]).astype(np.float32)
        args = dict(wq=quant.pack(q, bits), scales=codes[0], biases=codes[1], supers=supers, group_size=group,
                    bits=bits)
        w = quant.dequantize_float32(args["wq"], *quant.expand_supers(*codes, supers, group), group, bits)
        forms = [args]
        if np.dtype(dtype) != np.float32 and mtlinv.device_info()["matrix_units"]:
            tiles = quant.tile(args["wq"], *codes, group, bits, supers=supers)
            forms.append(dict(args, wq=tiles[0], scales=tiles[1], biases=tiles[2], supers=tiles[3]))
        for form in forms:
            for limit, m in ((16, 1), (16, 9), (0, 20), (0, 40)):  # canonical tiles; the throughput split; qgemm
                x = rand((m, k), dtype)
                with mtlinv.batch_invariant(limit):
                    y = ops.qgemv(x, **form)
                close(y, np.asarray(x, np.float64) @ w.astype(np.float64).T,
                      f"qgemv super-block bits={bits} tiled={form['wq'].ndim == 4} limit={limit} m={m}")


def sdpa(dtype):
    for d, kv_len in ((64, 70), (128, 1300)):
        k, v = rand((1, 2, kv_len, d), dtype), rand((1, 2, kv_len, d), dtype)
        for limit, q_len in ((8, 1), (8, 4), (0, 4), (0, 16)):  # canonical decode/verify, split, flash
            q = rand((1, 4, q_len, d), dtype)
            with mtlinv.batch_invariant(limit):
                o = ops.sdpa(q, k, v, causal=True)
                rows = ops.sdpa(q, k, v, causal=True, rows_out=True)  # the output's other layout: [B, Lq, Hq D]
            what = f"sdpa d={d} kv={kv_len} limit={limit} q_len={q_len}"
            close(o, reference_sdpa(q, k, v), what)
            close(rows, reference_sdpa(q, k, v).transpose(0, 2, 1, 3).reshape(1, q_len, 4 * d), what + " rows_out")


def reference_sdpa(q, k, v):
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    lq, lk = s.shape[-2:]
    s = np.where(np.arange(lk)[None, :] <= (lk - lq + np.arange(lq))[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def decoder_ops(dtype):
    a, b = rand((3, 70), dtype), rand((3, 70), dtype)
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    close(ops.add(a, b), a64 + b64, "add")
    close(ops.swiglu(a, b), a64 / (1 + np.exp(-a64)) * b64, "swiglu")
    x = rand((3, 2, 8), dtype)  # [L, H, D] at positions 5, 6, 7
    heads = ops.rope_heads(x, 5)
    x64 = np.asarray(x, np.float64)
    angle = (5 + np.arange(3))[:, None, None] * 10000.0 ** (-2 * np.arange(4) / 8)[None, None, :]
    rotated = np.empty_like(x64)
    rotated[..., 0::2] = x64[..., 0::2] * np.cos(angle) - x64[..., 1::2] * np.sin(angle)
    rotated[..., 1::2] = x64[..., 0::2] * np.sin(angle) + x64[..., 1::2] * np.cos(angle)
    close(heads, np.swapaxes(rotated, 0, 1), "rope_heads")
    close(ops.heads_to_rows(heads), rotated.reshape(3, 16), "heads_to_rows")
    cache = mtlinv.asarray(np.zeros((2, 6, 8), dtype))
    ops.write_heads(x, cache, 2)
    close(np.asarray(cache)[:, 2:5], np.swapaxes(np.asarray(x, np.float64), 0, 1), "write_heads")
    qkv = np.concatenate([x, x, x], axis=1)  # 2 query, 2 key, 2 value heads
    k_cache, v_cache = (mtlinv.asarray(np.zeros((2, 6, 8), dtype)) for _ in range(2))
    close(ops.qkv_to_heads(qkv, 2, k_cache, v_cache, 1, 5), np.swapaxes(rotated, 0, 1), "qkv_to_heads q")
    close(np.asarray(k_cache)[:, 1:4], np.swapaxes(rotated, 0, 1), "qkv_to_heads k")
    close(np.asarray(v_cache)[:, 1:4], np.swapaxes(np.asarray(x, np.float64), 0, 1), "qkv_to_heads v")
    close(ops.swiglu_halves(np.concatenate([a, b], axis=1)), a64 / (1 + np.exp(-a64)) * b64, "swiglu_halves")
    table = rand((11, 8), dtype)
    close(ops.embedding(table, [3, 0, 10]), np.asarray(table, np.float64)[[3, 0, 10]], "embedding")


def main():
    info = mtlinv.device_info()
    print(f"exercising every kernel family on {info['backend']} ({info['name']})", flush=True)
    for name, dtype in DTYPES.items():
        for family in (rms_norm, gemv, sdpa, decoder_ops):
            family(dtype)
        qgemv(dtype, all_bits=name == "f16")
        qgemv_super(dtype)
        print(f"  {name}: ok", flush=True)
    # Once more with every grid cut into pieces of one threadgroup along y and z (src/core/grid_pieces.h), as CUDA
    # runs grids past its 65535 threadgroups there: each piece's kernels must still reach only their own threadgroups.
    ops._set_piece_limit((1, 1))
    try:
        for family in (gemv, sdpa, decoder_ops):
            family(DTYPES["bf16"])
        qgemv(DTYPES["bf16"], all_bits=False)
    finally:
        ops._set_piece_limit(None)
    print("  bf16 in pieces: ok", flush=True)
    print("kernels built:", " ".join(mtlinv.kernel_names()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
