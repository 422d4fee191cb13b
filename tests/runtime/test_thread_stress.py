"""Stress across threads and asyncio tasks: ops on views (whose checks run first in the core's checks-only mode,
a per-thread state) racing ops on plain arrays and refused calls, each thread and task in its own limit scope,
sharing weights and a KV cache. Every result has the bits of the same call made alone, and no thread sees another's
checks-only mode, scope or error."""
import asyncio
import threading

import numpy as np
import pytest

import mtlinv
from helpers import run_threads, same_bits

THREADS = 4
ROUNDS = 100
HIDDEN, HEADS, DIM = 128, 2, 64


@pytest.fixture
def shared(rng):
    w = mtlinv.asarray((rng.standard_normal((24, HIDDEN)) / 8).astype(np.float32))
    k = mtlinv.asarray(rng.standard_normal((HEADS, 32, DIM)).astype(np.float32))
    v = mtlinv.asarray(rng.standard_normal((HEADS, 32, DIM)).astype(np.float32))
    xs = [rng.standard_normal((6, HIDDEN)).astype(np.float32) for _ in range(THREADS)]
    qs = [rng.standard_normal((HEADS, 6, DIM)).astype(np.float32) for _ in range(THREADS)]
    return w, k, v, xs, qs


def calls(shared, t):
    """Thread t's calls: odd threads pass views (byte-swapped, strided), even ones plain arrays; and one refused
    call whose error must name this thread's own shape."""
    w, k, v, xs, qs = shared
    x, q = xs[t], qs[t]
    if t % 2:
        x, q = x.astype(">f4"), np.repeat(q, 2, axis=-1)[..., ::2]
    out = [np.asarray(mtlinv.gemv(x, w)), np.asarray(mtlinv.sdpa(q, k, v)),
           np.asarray(mtlinv.rms_norm(x, np.ones(HIDDEN, np.float32)))]
    try:
        mtlinv.gemv(np.ones((1, HIDDEN + 1 + t), np.float32), w)
        out.append("accepted")
    except mtlinv.InvalidArgumentError as e:
        out.append(str(e))
    return out


def same(got, want):
    return all(g == w if isinstance(w, str) else same_bits(g, w) for g, w in zip(got, want))


def limit_of(t):
    return 8 if t % 2 == 0 else 0


def test_threads_views_and_scopes(shared):
    want = []
    for t in range(THREADS):
        with mtlinv.batch_invariant(limit_of(t)):
            want.append(calls(shared, t))
    assert all(f"K={HIDDEN + 1 + t}" in want[t][-1] for t in range(THREADS))
    barrier = threading.Barrier(THREADS)
    failures = []

    def run(t):
        try:
            barrier.wait()
            for r in range(ROUNDS):
                with mtlinv.batch_invariant(limit_of(t)):
                    if not same(calls(shared, t), want[t]):
                        failures.append(f"thread {t} round {r}")
                    if mtlinv.get_limit() != limit_of(t):
                        failures.append(f"thread {t} round {r}: limit {mtlinv.get_limit()}")
        except Exception as e:  # noqa: BLE001 (reported below)
            failures.append(f"thread {t}: {e!r}")
            barrier.abort()

    run_threads(run, THREADS)
    assert failures == []
    assert mtlinv.get_limit() == 0


def test_asyncio_tasks_run_ops_in_worker_threads_under_their_scopes(shared):
    """asyncio.to_thread carries the task's context, and with it the task's batch_invariant scope, into the worker
    thread that calls the op."""
    want = []
    for t in range(THREADS):
        with mtlinv.batch_invariant(limit_of(t)):
            want.append(calls(shared, t))

    async def task(t):
        with mtlinv.batch_invariant(limit_of(t)):
            for _ in range(ROUNDS // 4):
                got = await asyncio.to_thread(calls, shared, t)
                assert same(got, want[t]), f"task {t}"
                assert await asyncio.to_thread(mtlinv.get_limit) == limit_of(t)
                await asyncio.sleep(0)

    async def main():
        await asyncio.gather(*(task(t) for t in range(THREADS)))

    asyncio.run(main())
    assert mtlinv.get_limit() == 0
