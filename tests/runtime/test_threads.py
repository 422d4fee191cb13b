"""Ops called from several threads at once, sharing weights and a KV cache, each thread in a limit scope of its own:
every result has the bits of the same call made alone on one thread, and the cache the bits of the writes made one
after another."""
import threading

import numpy as np

import mtlinv
from helpers import run_threads, same_bits

THREADS = 4
ROUNDS = 25
ROWS = 8         # rows and queries a call
POSITIONS = 16   # KV-cache positions each thread writes
HEADS, KV_HEADS, HEAD_DIM, HIDDEN = 2, 1, 64, 256


def _limit(t):
    return ROWS if t % 2 else 0  # half the threads on the canonical route, half on the throughput one


def test_threads_share_weights_and_a_kv_cache(rng):
    capacity = THREADS * POSITIONS
    w = mtlinv.asarray((rng.standard_normal((32, HIDDEN)) / 16).astype(np.float32))
    wq, scales, biases = (mtlinv.asarray(a) for a in mtlinv.quantize(
        (rng.standard_normal((32, HIDDEN)) / 16).astype(np.float32), group_size=64, bits=4))
    xs = [rng.standard_normal((ROWS, HIDDEN)).astype(np.float32) for _ in range(THREADS)]
    qs = [rng.standard_normal((HEADS, ROWS, HEAD_DIM)).astype(np.float32) for _ in range(THREADS)]
    keys = [rng.standard_normal((POSITIONS, KV_HEADS, HEAD_DIM)).astype(np.float32) for _ in range(THREADS)]
    values = [rng.standard_normal((POSITIONS, KV_HEADS, HEAD_DIM)).astype(np.float32) for _ in range(THREADS)]

    def empty_cache():
        return [mtlinv.asarray(np.zeros((KV_HEADS, capacity, HEAD_DIM), np.float32)) for _ in range(2)]

    def write(cache, t):
        k_cache, v_cache = cache
        mtlinv.write_heads(keys[t], k_cache, t * POSITIONS, t * POSITIONS, rotate=True, base=10000.0)
        mtlinv.write_heads(values[t], v_cache, t * POSITIONS)

    def calls(cache, t):
        return [np.asarray(mtlinv.gemv(xs[t], w)),
                np.asarray(mtlinv.qgemv(xs[t], wq, scales, biases, group_size=64, bits=4)),
                np.asarray(mtlinv.sdpa(qs[t], *cache))]

    # One thread, one call after another: the bits every concurrent call must reproduce.
    alone = empty_cache()
    for t in range(THREADS):
        write(alone, t)
    want = []
    for t in range(THREADS):
        with mtlinv.batch_invariant(_limit(t)):
            want.append(calls(alone, t))

    shared = empty_cache()
    barrier = threading.Barrier(THREADS)
    failures = []

    def run(t):
        try:
            barrier.wait()
            write(shared, t)  # every thread into its own positions of the same caches, at once
            barrier.wait()    # then every thread reads all of them
            for r in range(ROUNDS):
                with mtlinv.batch_invariant(_limit(t)):
                    got = calls(shared, t)
                for name, g, expected in zip(("gemv", "qgemv", "sdpa"), got, want[t]):
                    if not same_bits(g, expected):
                        failures.append(f"thread {t} round {r}: {name} differs")
        except Exception as e:  # noqa: BLE001 (reported below, with the thread)
            failures.append(f"thread {t}: {e!r}")
            barrier.abort()

    run_threads(run, THREADS)
    assert failures == []
    for a, b in zip(shared, alone):
        assert same_bits(a, b)
    assert mtlinv.get_limit() == 0
