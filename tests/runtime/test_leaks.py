"""No leak: resident memory stays flat over 10^5 op calls (valid and refused, every conversion route) and 10^4
Tensor round trips (ndarray -> Tensor -> ndarray, DLPack, buffer protocol). A leak of 100 bytes a call would add
10 MB; the bound allows the allocator's own slack."""
import gc
import os

import numpy as np
import pytest

import mtlinv

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc")]
GROWTH = 6 << 20  # bytes


def rss():
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def grows(step, count):
    """RSS growth over `count` calls of step(i), after the same number's tenth as warm-up (caches, pools)."""
    for i in range(count // 10):
        step(i)
    before = rss()
    for i in range(count):
        step(i)
    return rss() - before


def test_op_calls_do_not_leak(rng):
    x = rng.standard_normal((2, 64)).astype(np.float32)
    w = mtlinv.asarray(rng.standard_normal((16, 64)).astype(np.float32))
    weight = rng.standard_normal(64).astype(np.float32)
    strided = np.repeat(x, 2, axis=1)[:, ::2]
    bad = np.ones((2, 63), np.float32)

    def step(i):
        kind = i % 5
        if kind == 0:
            mtlinv.gemv(x, w)
        elif kind == 1:
            mtlinv.rms_norm(strided, weight)  # the checks-first pass, then the copy
        elif kind == 2:
            mtlinv.embedding(x, [1, 0])
        elif kind == 3:
            with mtlinv.batch_invariant(8):
                mtlinv.gemv(x.tolist(), w)
        else:
            try:
                mtlinv.gemv(bad, w)  # refused: the error path must free what it made
            except mtlinv.InvalidArgumentError:
                pass

    growth = grows(step, 100_000)
    assert growth < GROWTH, f"RSS grew {growth / 2**20:.1f} MiB over 10^5 calls"


def test_tensor_round_trips_do_not_leak(rng):
    a = rng.standard_normal((64, 64)).astype(np.float32)

    def step(i):
        t = mtlinv.asarray(a if i % 2 else a.astype(">f4"))
        back = np.asarray(t)
        memoryview(t).release()
        np.from_dlpack(t)
        mtlinv.asarray(back).reshape(-1).numpy()

    growth = grows(step, 10_000)
    assert growth < GROWTH, f"RSS grew {growth / 2**20:.1f} MiB over 10^4 round trips"
