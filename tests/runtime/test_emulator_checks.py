"""The emulator's checking mode catches planted bugs (tests/kernels/planted.metal) through the real pipeline:
pre-pass, registry, backend, runtime. Each planted kernel has a correct twin that must pass."""
import struct

import ml_dtypes
import numpy as np
import pytest

import mtlinv
from mtlinv import _native

pytestmark = pytest.mark.skipif(mtlinv.device_info()["backend"] != "emu", reason="emulator-only checks")


def args(n, offset=0):
    return struct.pack("<II", n, offset)


@pytest.fixture
def checking():
    _native._set_emu_check(True, 7)
    yield
    _native._set_emu_check(False, 0)


def run(kernel, n=64, offset=0, threads=64):
    x = mtlinv.asarray(np.arange(n, dtype=np.float32))
    y = mtlinv.asarray(np.zeros(n, dtype=np.float32))
    _native._launch(kernel, (1,), (threads,), args(n, offset), [x, y])
    return np.asarray(y)


def test_correct_kernel_passes_checking_mode(checking):
    y = run("emutest_neighbour")
    assert np.array_equal(y, np.roll(np.arange(64, dtype=np.float32), -1))


def test_planted_race_is_caught(checking):
    with pytest.raises(mtlinv.KernelError, match=r"emutest_race.*(race|order)"):
        run("emutest_race")


def test_planted_race_runs_without_checking_mode():
    run("emutest_race")  # no check: the race goes unnoticed, as on a GPU


@pytest.mark.parametrize("check", [False, True])
def test_divergent_barrier_is_caught(check):
    _native._set_emu_check(check, 3)
    try:
        with pytest.raises(mtlinv.KernelError, match=r"emutest_divergent_barrier.*barrier.*32 of 64"):
            run("emutest_divergent_barrier")
    finally:
        _native._set_emu_check(False, 0)


def test_divergent_simd_is_caught():
    with pytest.raises(mtlinv.KernelError, match=r"emutest_divergent_simd.*16 of 32"):
        run("emutest_divergent_simd", n=32, threads=32)


def test_out_of_range_load_is_caught(checking):
    with pytest.raises(mtlinv.KernelError, match=r"emutest_out_of_range.*buffer 1.*outside"):
        run("emutest_out_of_range", offset=1)
    assert np.array_equal(run("emutest_out_of_range", offset=0), np.arange(64, dtype=np.float32))


def test_out_of_range_prefetch_is_caught(checking):
    """prefetch_l2 is a hint on every target, but a range past its buffer is a bug: the checked build faults on it as
    on a load. run() passes n = 64 elements, the whole buffer from offset 0."""
    with pytest.raises(mtlinv.KernelError, match=r"emutest_prefetch_overrun.*buffer 1.*outside"):
        run("emutest_prefetch_overrun", offset=1)
    assert np.array_equal(run("emutest_prefetch_overrun", offset=0), np.arange(64, dtype=np.float32))


def test_emulator_recovers_after_a_fault():
    with pytest.raises(mtlinv.KernelError):
        run("emutest_divergent_barrier")
    x = np.ones((4, 32), np.float32)
    assert np.array_equal(np.asarray(mtlinv.rms_norm(x, np.ones(32, np.float32), 0.0)), x)


@pytest.mark.parametrize("plans", ["emulator", "gpu"])
def test_real_kernels_pass_checking_mode(plans, checking, rng):
    """Every shipped kernel family is race-free and in bounds (each launch runs twice, in opposite thread orders,
    with bounds-checked loads) on shapes with tails, with the emulator's plans and with the GPU plans."""
    from mtlinv import quant
    _native._set_emu_gpu_plans(plans == "gpu")
    try:
        for limit in (4, 0):
            mtlinv.set_limit(limit)
            x = rng.standard_normal((3, 1100)).astype(np.float16)
            w = rng.standard_normal((13, 1100)).astype(np.float16)
            mtlinv.gemv(x, w)
            mtlinv.gemv(x, w.T.copy(), transpose=False)
            # 16-byte aligned rows (vector loads), 11 rows (a 16-row tile under the GPU plans), a K tail.
            mtlinv.gemv(rng.standard_normal((11, 1096)).astype(np.float16), w[:, :1096].copy())
            mtlinv.rms_norm(x, np.ones(1100, np.float16))
            wq, s, b = quant.quantize(rng.standard_normal((9, 256)).astype(np.float16), group_size=64, bits=3)
            mtlinv.qgemv(x[:, :256], wq, s, b, group_size=64, bits=3)
            wq, s, b = quant.quantize(rng.standard_normal((9, 256)).astype(np.float32), group_size=64, bits=3)
            mtlinv.qgemv(x[:, :256].astype(np.float32), wq, s, b, group_size=64, bits=3)
            # 4 bits: 16-byte weight loads; 11 rows (a 16-row tile of qgemv_mma under the GPU plans); 11 runs of 32,
            # so qgemv_mma's last step is partial.
            wq, s, b = quant.quantize(rng.standard_normal((20, 352)).astype(np.float16), group_size=32, bits=4)
            mtlinv.qgemv(rng.standard_normal((11, 352)).astype(np.float16), wq, s, b, group_size=32, bits=4)
            wq, s, b = quant.quantize(rng.standard_normal((20, 384)).astype(np.float16), group_size=128, bits=8)
            mtlinv.qgemv(rng.standard_normal((3, 384)).astype(np.float16), wq, s, b, group_size=128, bits=8)
            q = rng.standard_normal((1, 4, 3, 64)).astype(np.float16)
            kv = rng.standard_normal((1, 2, 300, 64)).astype(np.float16)
            mtlinv.sdpa(q, kv, kv, kv_len=290)
            mtlinv.sdpa(rng.standard_normal((1, 2, 12, 64)).astype(np.float16), kv, kv, kv_len=40)
            # D = 128, 16 queries per kv head (one full tile of sdpa_mma under the GPU plans at limit 4), a partial step.
            kv = rng.standard_normal((1, 2, 120, 128)).astype(ml_dtypes.bfloat16)
            mtlinv.sdpa(rng.standard_normal((1, 8, 4, 128)).astype(ml_dtypes.bfloat16), kv, kv, kv_len=100)
        h = rng.standard_normal((3, 2, 64)).astype(np.float16)
        mtlinv.add(h, h)
        mtlinv.swiglu(h, h)
        heads = mtlinv.rope_heads(h, 5, 100.0)
        mtlinv.heads_to_rows(heads)
        mtlinv.embedding(rng.standard_normal((10, 8)).astype(np.float16), [1, 9, 0])
    finally:
        _native._set_emu_gpu_plans(False)


def test_every_registered_kernel_is_in_the_metal_table():
    """One table: the emulator's registry is exactly the MTLINV_KERNEL lines of metal/*.metal, plus the
    emulator-only planted kernels."""
    import pathlib
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tools"))
    import embed_metal
    table = embed_metal.kernel_names() + embed_metal.kernel_names(root / "tests" / "kernels")
    assert set(mtlinv.kernel_names()) == set(table)
