import asyncio
import os
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

import mtlinv
from helpers import same_bits


def test_set_limit_returns_previous():
    assert mtlinv.get_limit() == 0
    assert mtlinv.set_limit(8) == 0
    assert mtlinv.get_limit() == 8
    assert mtlinv.set_limit(3) == 8


@pytest.mark.parametrize("bad", [-1, -100])
def test_negative_limit_is_value_error(bad):
    with pytest.raises(ValueError, match=f"got {bad}"):
        mtlinv.set_limit(bad)
    with pytest.raises(mtlinv.InvalidArgumentError):
        mtlinv.set_limit(bad)
    assert mtlinv.get_limit() == 0


@pytest.mark.parametrize("bad", [1.5, "4", None, True])
def test_non_int_limit_is_rejected(bad):
    with pytest.raises(ValueError, match="limit must be an int"):
        mtlinv.set_limit(bad)


def test_context_manager_restores():
    mtlinv.set_limit(2)
    with mtlinv.batch_invariant(16) as n:
        assert n == 16 and mtlinv.get_limit() == 16
    assert mtlinv.get_limit() == 2
    with pytest.raises(RuntimeError):
        with mtlinv.batch_invariant(5):
            raise RuntimeError("boom")
    assert mtlinv.get_limit() == 2


def _import_with_env(value):
    env = dict(os.environ, MTLINV_BATCH_INVARIANT_LIMIT=value)
    return subprocess.run([sys.executable, "-c", "import mtlinv; print(mtlinv.get_limit())"], env=env,
                          capture_output=True, text=True)


def test_env_initialises_limit():
    r = _import_with_env("12")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "12"


@pytest.mark.parametrize("value", ["abc", "-3", "4x", "1e3", " 5", "+5", "5 ", "1073741825"])
def test_bad_env_fails_import_loudly(value):
    r = _import_with_env(value)
    assert r.returncode != 0
    assert "MTLINV_BATCH_INVARIANT_LIMIT" in r.stderr and value in r.stderr


def test_env_beyond_the_largest_limit_says_so():
    r = _import_with_env("1073741825")
    assert "is beyond the largest limit, 2^30" in r.stderr


def test_empty_env_is_unset():
    """An empty MTLINV_BATCH_INVARIANT_LIMIT means unset (the common convention): limit 0, no error."""
    r = _import_with_env("")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


# --- scopes: batch_invariant overrides the process value in the calling thread or asyncio task alone --------------

ROWS = 8


def _quantized_output(rng, n, k):
    wq, scales, biases = mtlinv.quantize((rng.standard_normal((n, k)) * k ** -0.5).astype(np.float32), group_size=64,
                                         bits=4)
    return types.SimpleNamespace(wq=mtlinv.asarray(wq), scales=mtlinv.asarray(scales), biases=mtlinv.asarray(biases),
                                 group_size=64, bits=4)


def _op_calls():
    """One call of each op that reads the limit, at ROWS rows (or queries), where the route shows in the bits."""
    rng = np.random.default_rng(7)
    x = mtlinv.asarray(rng.standard_normal((ROWS, 256)).astype(np.float32))
    w = mtlinv.asarray((rng.standard_normal((32, 256)) / 16).astype(np.float32))
    lin = _quantized_output(rng, 32, 256)
    q = mtlinv.asarray(rng.standard_normal((2, ROWS, 64)).astype(np.float32))
    kv = mtlinv.asarray(rng.standard_normal((1, 1028, 64)).astype(np.float32))
    decoder = mtlinv.Decoder(n_heads=1, rope_theta=10000.0, rms_eps=1e-5, layers=[], output=lin,
                             embedding=mtlinv.asarray(rng.standard_normal((ROWS, 256)).astype(np.float32)),
                             output_norm=mtlinv.asarray(np.ones(256, np.float32)))
    return {
        "gemv": lambda: mtlinv.gemv(x, w),
        "qgemv": lambda: mtlinv.qgemv(x, lin.wq, lin.scales, lin.biases, group_size=64, bits=4),
        "sdpa": lambda: mtlinv.sdpa(q, kv, kv),
        "Decoder.forward": lambda: decoder.forward(list(range(ROWS)), 0),
    }


@pytest.fixture(scope="module")
def routes():
    """{op: (call, {route: bits})} with the bits of both routes, taken under the process value; they differ, so
    each result tells the route its call took."""
    out = {}
    previous = mtlinv.get_limit()
    for name, call in _op_calls().items():
        mtlinv.set_limit(0)
        throughput = np.asarray(call()).copy()
        mtlinv.set_limit(ROWS)
        canonical = np.asarray(call()).copy()
        assert not same_bits(throughput, canonical), f"{name}: both routes give one result; the route cannot show"
        out[name] = call, {"throughput": throughput, "canonical": canonical}
    mtlinv.set_limit(previous)
    return out


def route(routes, name="gemv"):
    call, results = routes[name]
    got = np.asarray(call())
    return next((r for r, want in results.items() if same_bits(got, want)), "neither")


@pytest.mark.parametrize("name", ["gemv", "qgemv", "sdpa", "Decoder.forward"])
def test_scope_reaches_every_op_that_reads_the_limit(routes, name):
    with mtlinv.batch_invariant(ROWS):
        assert route(routes, name) == "canonical"
        assert mtlinv._native.plan_gemv(rows=ROWS, k=256, n=32)["canonical"]
    assert route(routes, name) == "throughput"
    mtlinv.set_limit(ROWS)
    with mtlinv.batch_invariant(0):
        assert route(routes, name) == "throughput"
        assert not mtlinv._native.plan_gemv(rows=ROWS, k=256, n=32)["canonical"]
    assert route(routes, name) == "canonical"


def test_scopes_nest_and_restore_what_the_thread_saw():
    mtlinv.set_limit(2)
    with mtlinv.batch_invariant(4):
        with mtlinv.batch_invariant(8):
            assert mtlinv.get_limit() == 8
            with pytest.raises(RuntimeError):
                with mtlinv.batch_invariant(0):
                    assert mtlinv.get_limit() == 0
                    raise RuntimeError("boom")
            assert mtlinv.get_limit() == 8
        assert mtlinv.get_limit() == 4
    assert mtlinv.get_limit() == 2


def _in_thread(fn):
    result = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join()
    return result[0]


def test_scope_leaves_the_process_value_alone():
    """set_limit inside a scope sets the process value, which other threads see at once and this context once the
    scope ends; a new thread starts outside every scope."""
    mtlinv.set_limit(3)
    with mtlinv.batch_invariant(8):
        assert _in_thread(mtlinv.get_limit) == 3
        assert mtlinv.set_limit(5) == 3
        assert mtlinv.get_limit() == 8
        assert _in_thread(mtlinv.get_limit) == 5
    assert mtlinv.get_limit() == 5


@pytest.mark.parametrize("bad, message", [(-1, r"limit must be in \[0, 1073741824\], got -1"),
                                          (2**30 + 1, r"limit must be in \[0, 1073741824\], got 1073741825"),
                                          (True, "limit must be an int, got bool True"),
                                          (4.0, "limit must be an int, got float 4.0")])
def test_scope_limit_is_checked(bad, message):
    with pytest.raises(mtlinv.InvalidArgumentError, match=f"batch_invariant: {message}"):
        with mtlinv.batch_invariant(bad):
            pass
    assert mtlinv.get_limit() == 0


def test_interleaved_scopes_of_two_threads(routes):
    """The issue's interleaving, made deterministic: thread A opens batch_invariant(0), thread B opens
    batch_invariant(8), A calls, A leaves, B calls, B leaves. Each call takes its own thread's route, and the
    process value is what it was (two restores of one process-wide value used to leave B's saved 0)."""
    mtlinv.set_limit(3)
    a_open, b_open, a_done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with mtlinv.batch_invariant(0):
            a_open.set()
            b_open.wait()
            seen["a"] = mtlinv.get_limit(), route(routes)
        a_done.set()

    def b():
        a_open.wait()
        with mtlinv.batch_invariant(ROWS):
            b_open.set()
            a_done.wait()
            seen["b"] = mtlinv.get_limit(), route(routes)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": (0, "throughput"), "b": (ROWS, "canonical")}
    assert mtlinv.get_limit() == 3


def test_two_threads_racing_never_take_each_others_route(routes):
    """The issue's race: two threads entering and leaving batch_invariant(0) and batch_invariant(8) around each of
    thousands of calls (44 of 8,000 took the other's route when the scope set the process value)."""
    calls = 1000
    barrier = threading.Barrier(2)
    wrong = {0: [], ROWS: []}

    def run(limit, want):
        barrier.wait()
        for i in range(calls):
            with mtlinv.batch_invariant(limit):
                got = route(routes)
            if got != want:
                wrong[limit].append((i, got))

    threads = [threading.Thread(target=run, args=(0, "throughput")),
               threading.Thread(target=run, args=(ROWS, "canonical"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == {0: [], ROWS: []}
    assert mtlinv.get_limit() == 0


def test_asyncio_tasks_are_isolated(routes):
    """Tasks on one thread switch inside their scopes; each op takes the route of the task that calls it. A task
    made inside a scope starts with it, and its own scopes stay its own."""
    async def task(limit, want):
        with mtlinv.batch_invariant(limit):
            for _ in range(20):
                await asyncio.sleep(0)
                assert mtlinv.get_limit() == limit and route(routes) == want

    async def child():
        assert mtlinv.get_limit() == 5
        with mtlinv.batch_invariant(7):
            await asyncio.sleep(0)
            return mtlinv.get_limit()

    async def main():
        await asyncio.gather(task(0, "throughput"), task(ROWS, "canonical"), task(0, "throughput"))
        with mtlinv.batch_invariant(5):
            made = asyncio.create_task(child())
            await asyncio.sleep(0)
            assert mtlinv.get_limit() == 5
            assert await made == 7
            assert mtlinv.get_limit() == 5

    mtlinv.set_limit(ROWS)
    asyncio.run(main())
    assert mtlinv.get_limit() == ROWS
