"""What only the CUDA backend has: device memory exchanged with PyTorch and CuPy without copies (DLPack,
__cuda_array_interface__), CUDA errors as exceptions that name the kernel, the device's description, the shim's
semantics on the GPU, and overlapped launches that change no bits. The kernels themselves are covered by the op
tests, which run unchanged with MTLINV_DEVICE=cuda."""
import os
import pathlib
import shutil
import struct
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import mtlinv
from mtlinv import _native

pytestmark = pytest.mark.skipif(mtlinv.device_info()["backend"] != "cuda",
                                reason="CUDA backend not active (build with MTLINV_CUDA=1, run with MTLINV_DEVICE=cuda)")

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]


def test_device_info_describes_the_gpu():
    info = mtlinv.device_info()
    assert isinstance(info["overlapped_launches"], bool)
    assert info["simd_width"] == 32 and info["threads"] >= 1  # threads: the SM count
    assert info["threadgroup_memory_bytes"] >= 32768
    assert "cuda" in info["built_backends"]


def test_memory_is_not_host_visible(rng):
    t = mtlinv.asarray(rng.standard_normal((3, 4)).astype(np.float32))
    with pytest.raises(BufferError, match="host-visible"):
        memoryview(t)
    assert not np.shares_memory(t.numpy(), t.numpy())  # each read is a copy


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f16", "bf16"])
def test_dlpack_to_torch_shares_memory(dtype, torch, rng):
    a = rng.standard_normal((5, 7)).astype(dtype)
    t = mtlinv.asarray(a)
    assert t.__dlpack_device__() == (2, 0)
    tt = torch.from_dlpack(t)
    assert tt.is_cuda and tuple(tt.shape) == (5, 7)
    assert tt.cpu().view(torch.int16 if a.itemsize == 2 else torch.int32).numpy().tobytes() == a.tobytes()
    tt.mul_(2)  # the same memory: mtlinv sees the write
    assert np.array_equal(np.asarray(t).astype(np.float32), (a.astype(np.float32) * 2).astype(dtype).astype(np.float32))


def test_dlpack_capsule_keeps_the_tensor_alive(torch, rng):
    a = rng.standard_normal(1000).astype(np.float32)
    tt = torch.from_dlpack(mtlinv.asarray(a))  # the Tensor itself is dropped at once
    mtlinv.asarray(np.zeros(1000, np.float32))  # would reuse the block if it had been freed
    assert np.array_equal(tt.cpu().numpy(), a)


def test_unconsumed_capsule_is_freed():
    t = mtlinv.asarray(np.ones(4, np.float32))
    capsule = t.__dlpack__()
    del capsule  # the destructor releases the reference it held; nothing to observe but no crash or leak


def test_cuda_array_interface(torch, rng):
    a = rng.standard_normal((4, 3)).astype(np.float16)
    t = mtlinv.asarray(a)
    cai = t.__cuda_array_interface__
    assert cai["shape"] == (4, 3) and cai["typestr"] == "<f2" and cai["version"] == 3
    tt = torch.as_tensor(t, device="cuda")
    assert tt.data_ptr() == cai["data"][0]
    assert np.array_equal(tt.cpu().numpy(), a)


def test_cuda_array_interface_refuses_bfloat16():
    t = mtlinv.asarray(np.ones(3, ml_dtypes.bfloat16))
    with pytest.raises(TypeError, match="DLPack"):
        t.__cuda_array_interface__


def test_cupy_reads_through_the_interface(rng):
    cupy = pytest.importorskip("cupy")
    a = rng.standard_normal((6, 2)).astype(np.float32)
    c = cupy.asarray(mtlinv.asarray(a))
    assert np.array_equal(cupy.asnumpy(c), a)


def test_gemv_output_matches_torch(torch, rng):
    x = rng.standard_normal((3, 256)).astype(np.float32)
    w = (rng.standard_normal((96, 256)) / 16).astype(np.float32)
    y = torch.from_dlpack(mtlinv.gemv(x, w))
    ref = torch.from_numpy(x.astype(np.float64)) @ torch.from_numpy(w.astype(np.float64)).T
    assert torch.allclose(y.cpu().double(), ref, rtol=1e-5, atol=1e-5)


def test_unknown_kernel_is_an_error():
    t = mtlinv.asarray(np.zeros(4, np.float32))
    with pytest.raises(mtlinv.MtlinvError, match="no kernel named 'no_such_kernel'"):
        _native._launch("no_such_kernel", (1,), (32,), b"", [t])


def test_too_many_threads_names_the_kernel():
    x = mtlinv.asarray(np.zeros(8, np.float32))
    with pytest.raises(mtlinv.KernelError, match=r"add_f32 asked for 2048 threads"):
        _native._launch("add_f32", (1,), (2048,), struct.pack("<I", 8) + bytes(60), [x, x, x])


def test_partial_warp_is_refused():
    """The CUDA shim's simd_* functions take all 32 lanes (src/cuda/shim/simd.cuh): a threadgroup of 40 threads
    would leave 24 lanes of its second warp out, so the backend refuses it and names the shape."""
    x = mtlinv.asarray(np.zeros(8, np.float32))
    with pytest.raises(mtlinv.KernelError, match=r"add_f32 asked for 40 threads per threadgroup \(40, 1, 1\).*"
                                                  r"multiple of 32"):
        _native._launch("add_f32", (1,), (40,), struct.pack("<I", 8) + bytes(60), [x, x, x])


ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_kernel_of_the_metal_table_is_built():
    sys.path.insert(0, str(ROOT / "tools"))
    import embed_metal
    assert set(mtlinv.kernel_names()) == set(embed_metal.kernel_names())


def test_shim_semantics_on_the_gpu(tmp_path):
    """src/cuda/tests/shim_test.cu: simd_* trees and shuffles, 16-bit rounding, fused fma."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH: cannot build src/cuda/tests/shim_test.cu")
    exe = tmp_path / "shim_test"
    subprocess.run([nvcc, "-std=c++17", "-arch=native", "--fmad=false", "-I", str(ROOT / "src" / "cuda"),
                    str(ROOT / "src" / "cuda" / "tests" / "shim_test.cu"), "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


# Work of many launches, in a fresh process with or without overlapped launches, queued without waiting between ops
# (MTLINV_CUDA_SYNC=0, the default): attention at 64K keys, whose pass 1 fills the GPU about four times over (a
# pass 2 that did not wait would read partials still being written), and a chain of gemvs, each reading the one
# before.
OVERLAP_CASE = """
import sys
import ml_dtypes, numpy as np, mtlinv
rng = np.random.default_rng(11)
bf = ml_dtypes.bfloat16
mtlinv.set_limit(8)
q = rng.standard_normal((1, 32, 8, 128)).astype(bf)
k = mtlinv.asarray(rng.standard_normal((1, 8, 65536, 128)).astype(bf))
v = mtlinv.asarray(rng.standard_normal((1, 8, 65536, 128)).astype(bf))
w = mtlinv.asarray((rng.standard_normal((8192, 8192)) * 0.01).astype(bf))
outs = [mtlinv.sdpa(mtlinv.asarray(q), k, v), mtlinv.sdpa(mtlinv.asarray(q[:, :, 7:].copy()), k, v)]
y = mtlinv.asarray(rng.standard_normal((8, 8192)).astype(bf))
for _ in range(6):
    y = mtlinv.gemv(y, w)
    outs.append(y)
print(mtlinv.device_info()["overlapped_launches"])
np.save(sys.argv[1], np.concatenate([np.asarray(o).view(np.uint16).ravel() for o in outs]))
"""


def run_overlap_case(path, **env):
    """OVERLAP_CASE in a fresh process on CUDA with `env` added: its stdout and its bits (saved to `path`)."""
    run = subprocess.run([sys.executable, "-c", OVERLAP_CASE, str(path)],
                         env=dict(os.environ, MTLINV_DEVICE="cuda", **env), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout, np.load(path)


def test_overlapped_launches_change_no_bits(tmp_path):
    if not mtlinv.device_info()["overlapped_launches"]:
        pytest.skip("launches do not overlap on this GPU (programmatic dependent launch needs sm_90)")
    results = {}
    for pdl in ("0", "1"):
        stdout, results[pdl] = run_overlap_case(tmp_path / f"pdl{pdl}.npy", MTLINV_CUDA_SYNC="0", MTLINV_CUDA_PDL=pdl)
        assert stdout.strip() == ("True" if pdl == "1" else "False")
    assert results["0"].size == 32 * 8 * 128 + 32 * 128 + 6 * 8 * 8192
    assert np.array_equal(results["0"], results["1"])


def queue_attention(calls=20):
    """About 2 ms of GPU work (64K-key attention, 20 calls), left queued: an op returns once its kernels are."""
    rng = np.random.default_rng(5)
    bf = ml_dtypes.bfloat16
    q = mtlinv.asarray(rng.standard_normal((1, 32, 1, 128)).astype(bf))
    k = mtlinv.asarray(rng.standard_normal((1, 8, 65536, 128)).astype(bf))
    v = mtlinv.asarray(rng.standard_normal((1, 8, 65536, 128)).astype(bf))
    mtlinv.synchronize()
    return [mtlinv.sdpa(q, k, v) for _ in range(calls)][-1]


@pytest.mark.parametrize("export", ["dlpack", "cuda_array_interface", "synchronize"])
def test_ops_return_queued_and_exports_wait(export, torch):
    """Ops leave their kernels queued (the device is still busy when the calls return: the control), and handing
    CUDA memory over, or mtlinv.synchronize(), waits for them, so a consumer on any stream reads finished data."""
    stream = torch.cuda.default_stream()  # the legacy default stream, on which mtlinv queues its work
    other = mtlinv.asarray(np.arange(4, dtype=np.float32))  # __cuda_array_interface__ has no bfloat16
    out = queue_attention()
    assert not stream.query(), "20 attention calls at 64K keys had finished before the host asked"
    out = queue_attention()
    if export == "dlpack":
        shared = torch.from_dlpack(out)
    elif export == "cuda_array_interface":
        shared = torch.as_tensor(other, device="cuda")
    else:
        mtlinv.synchronize()
    assert stream.query(), f"{export}: work still queued after the handover"
    if export == "dlpack":
        assert np.array_equal(shared.view(torch.int16).cpu().numpy(), np.asarray(out).view(np.int16))
    elif export == "cuda_array_interface":
        assert np.array_equal(shared.cpu().numpy(), np.arange(4, dtype=np.float32))


def test_every_op_waits_with_mtlinv_cuda_sync(tmp_path):
    """MTLINV_CUDA_SYNC=1 (each op waits, so a kernel's error is the op's) computes the same bits as queued ops."""
    results = {sync: run_overlap_case(tmp_path / f"sync{sync}.npy", MTLINV_CUDA_SYNC=sync)[1] for sync in ("0", "1")}
    assert np.array_equal(results["0"], results["1"])
