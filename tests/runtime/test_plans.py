"""Every plan launches whole simdgroups: threadgroup sizes that are multiples of the simdgroup width (32 on every
target). The CUDA shim's simd_* functions take all 32 lanes of a warp and its backend refuses other sizes
(src/cuda/shim/simd.cuh); the emulator would run a partial simdgroup. So this checks the planners themselves, on
CI, over the shapes that pick each kernel family, with the emulator's plans and with the GPU plans."""
import itertools

import pytest

import mtlinv
from mtlinv import _native

DTYPES = ["float32", "float16", "bfloat16"]


def sizes(plan):
    return [(l["kernel"], l["threads"]) for l in plan["launches"]]


def assert_whole_simdgroups(plan, what):
    bad = [(kernel, threads) for kernel, threads in sizes(plan) if (threads[0] * threads[1] * threads[2]) % 32]
    assert not bad, f"{what}: {bad}"


@pytest.fixture(params=["emulator", "gpu"])
def plans(request):
    """On the emulator, each test with its own plans and then with the GPU plans (conftest's gpu_plans); on a GPU,
    once, with the device's own."""
    if request.param == "gpu":
        if mtlinv.device_info()["backend"] != "emu":
            pytest.skip("the device's own plans are the GPU plans")
        request.getfixturevalue("gpu_plans")


def test_gemv_plans(plans):
    for rows, k, n, dtype, limit, transpose in itertools.product(
            [1, 2, 5, 8, 9, 16, 17, 40], [64, 1100, 4096, 14336], [13, 4096], DTYPES, [0, 8, 16], [True, False]):
        plan = _native.plan_gemv(rows=rows, k=k, n=n, dtype=dtype, limit=limit, transpose=transpose)
        assert_whole_simdgroups(plan, f"gemv rows={rows} k={k} n={n} {dtype} limit={limit} transpose={transpose}")


def test_qgemv_plans(plans):
    for rows, k, n, bits, group, dtype, limit in itertools.product(
            [1, 3, 8, 11, 16, 40], [256, 4096], [20, 4096], [2, 3, 4, 8], [32, 64, 128], DTYPES, [0, 8, 16]):
        plan = _native.plan_qgemv(rows=rows, k=k, n=n, bits=bits, group_size=group, dtype=dtype, limit=limit)
        assert_whole_simdgroups(plan, f"qgemv rows={rows} k={k} n={n} bits={bits} group={group} {dtype} "
                                      f"limit={limit}")


def test_sdpa_plans(plans):
    for q_len, kv_len, head_dim, heads, dtype, limit in itertools.product(
            [1, 2, 5, 8, 33], [1, 100, 4096, 70000], [64, 96, 128, 256], [(32, 8), (4, 4)], DTYPES, [0, 8]):
        if q_len > kv_len:
            continue
        plan = _native.plan_sdpa(q_len=q_len, kv_len=kv_len, head_dim=head_dim, q_heads=heads[0], kv_heads=heads[1],
                                 dtype=dtype, limit=limit)
        assert_whole_simdgroups(plan, f"sdpa q_len={q_len} kv_len={kv_len} D={head_dim} heads={heads} {dtype} "
                                      f"limit={limit}")
