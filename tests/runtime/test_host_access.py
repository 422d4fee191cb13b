"""Host access on a device that runs kernels after the op returns (src/core/backend.h: host access), checked on the
emulator with MTLINV_EMU_DEFER=1, where kernels run only when the host waits, as on Metal and CUDA: every way of
reading a result waits for the kernels that write it; an array the caller handed to an op may be changed or freed
once no Tensor wraps it, whatever is still queued; a kernel's error surfaces at the next wait, naming the kernel.
Each case runs in a process of its own (the backend is chosen once a process)."""
import os
import subprocess
import sys
import textwrap

import pytest

import mtlinv

pytestmark = pytest.mark.skipif(mtlinv.device_info()["backend"] != "emu", reason="the emulator's deferred mode")

PRELUDE = """
import ml_dtypes
import numpy as np
import mtlinv
from mtlinv import _native

rng = np.random.default_rng(7)
w = rng.standard_normal(64).astype(np.float32)


def reference(x):
    y = mtlinv.rms_norm(x.copy(), w)
    mtlinv.synchronize()  # the kernels run here, whatever the reads below do
    return np.array(np.asarray(y))
"""


def run_deferred(body):
    code = PRELUDE + textwrap.dedent(body) + "\nprint('done')\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, MTLINV_DEVICE="emu", MTLINV_EMU_DEFER="1"))
    assert r.returncode == 0 and r.stdout.strip().endswith("done"), r.stdout + r.stderr


def test_every_read_of_a_result_waits_for_its_kernels():
    run_deferred("""
        x = rng.standard_normal((4, 64)).astype(np.float32)
        ref = reference(x)
        readers = {
            "np.asarray": np.asarray,
            "Tensor.numpy": lambda t: t.numpy(),
            "memoryview": lambda t: np.asarray(memoryview(t)),
            "np.from_dlpack": np.from_dlpack,
            "np.array(copy)": np.array,
        }
        for name, read in readers.items():
            got = read(mtlinv.rms_norm(x, w))  # queued, not run, when the read begins
            assert np.array_equal(got, ref), name
        xb, wb = x.astype(ml_dtypes.bfloat16), w.astype(ml_dtypes.bfloat16)
        refb = mtlinv.rms_norm(xb, wb)
        mtlinv.synchronize()
        refb = np.array(np.asarray(refb))
        assert np.array_equal(np.asarray(mtlinv.rms_norm(xb, wb)), refb), "bfloat16 through __array__"
    """)


def test_an_operand_array_is_the_callers_again_once_no_tensor_wraps_it():
    """The emulator wraps every contiguous array (Backend::wrap_host): the op's operand Tensor is released as the
    op returns, and its release waits for the queued kernel that reads the array."""
    run_deferred("""
        x = rng.standard_normal((4, 64)).astype(np.float32)
        ref = reference(x)
        y = mtlinv.rms_norm(x, w)
        x[:] = 0
        assert np.array_equal(np.asarray(y), ref), "an operand converted for the call"
        x = rng.standard_normal((4, 64)).astype(np.float32)
        ref = reference(x)
        t = mtlinv.asarray(x)
        y = mtlinv.rms_norm(t, w)
        del t
        x[:] = 0
        assert np.array_equal(np.asarray(y), ref), "a Tensor made with mtlinv.asarray, then dropped"
    """)


def test_a_failed_kernel_is_reported_at_the_next_wait():
    """Through every read: NumPy drops an error raised by the buffer protocol and asks __array__ instead, which must
    report it all the same."""
    run_deferred("""
        readers = {
            "np.asarray": np.asarray,
            "np.asarray(bfloat16)": np.asarray,
            "Tensor.numpy": lambda t: t.numpy(),
            "memoryview": memoryview,
            "np.from_dlpack": np.from_dlpack,
            "mtlinv.synchronize": lambda t: mtlinv.synchronize(),
        }
        for name, read in readers.items():
            x = mtlinv.asarray(np.arange(32, dtype=np.float32))
            y = mtlinv.asarray(np.zeros(32, dtype=np.float32))
            _native._launch("emutest_divergent_simd", (1,), (32,), np.array([32, 0], np.uint32).tobytes(), [x, y])
            # A bfloat16 Tensor has no buffer format: NumPy reads it through __array__ alone.
            target = mtlinv.asarray(np.zeros(4, ml_dtypes.bfloat16)) if "bfloat16" in name else y
            try:
                read(target)
            except mtlinv.KernelError as e:
                assert "emutest_divergent_simd:" in str(e), (name, e)
            else:
                raise AssertionError(f"{name}: no KernelError")
            mtlinv.synchronize()  # reported once
            np.asarray(target)
    """)


def test_ops_chained_on_queued_results():
    """Each op reads the one before's result on the device, and an intermediate dropped meanwhile lives until the
    kernels that read it have run."""
    run_deferred("""
        x = rng.standard_normal((3, 64)).astype(np.float32)
        r = rng.standard_normal((3, 64)).astype(np.float32)
        s, h = mtlinv.add_rms_norm(x, r, w)
        h2 = mtlinv.rms_norm(h, w)
        mtlinv.synchronize()
        ref_s, ref_h2 = np.array(np.asarray(s)), np.array(np.asarray(h2))
        s, h = mtlinv.add_rms_norm(x, r, w)
        h2 = mtlinv.rms_norm(h, w)
        del h
        assert np.array_equal(np.asarray(h2), ref_h2) and np.array_equal(np.asarray(s), ref_s)
    """)
