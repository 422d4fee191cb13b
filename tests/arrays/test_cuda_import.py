"""CUDA-resident arrays into the CUDA backend without copies: PyTorch CUDA tensors through DLPack (bfloat16
included) and through __cuda_array_interface__, with the producer's stream ordered before mtlinv's. Runs only on
the CUDA backend with a CUDA build of PyTorch (MTLINV_CUDA=1 build, MTLINV_DEVICE=cuda)."""
import ml_dtypes
import numpy as np
import pytest

import mtlinv

pytestmark = pytest.mark.skipif(mtlinv.device_info()["backend"] != "cuda", reason="CUDA backend not active "
                                "(build with MTLINV_CUDA=1, run with MTLINV_DEVICE=cuda)")

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _cuda(torch, a):
    return torch.from_numpy(a.astype(np.float32)).to(device="cuda", dtype=getattr(torch, np.dtype(a.dtype).name))


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_dlpack_import_shares_device_memory(torch, dtype, rng):
    a = rng.standard_normal((4, 8)).astype(dtype)
    x = _cuda(torch, a)
    t = mtlinv.asarray(x)
    assert t.dtype == np.dtype(dtype) and t.__dlpack_device__() == (2, 0)
    assert torch.from_dlpack(t).data_ptr() == x.data_ptr()  # the same device memory, both ways
    x[0, 0] = 3.25  # queued on torch's stream; mtlinv's read waits for it
    assert np.asarray(t)[0, 0] == 3.25


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_ops_take_torch_cuda_tensors(torch, dtype, rng):
    """A torch CUDA tensor in, an mtlinv result on the GPU out: the bits of the same op on host arrays."""
    x, w = rng.standard_normal((4, 64)).astype(dtype), rng.standard_normal((16, 64)).astype(dtype)
    y = mtlinv.gemv(_cuda(torch, x), _cuda(torch, w))
    out = torch.from_dlpack(y)
    assert out.is_cuda and out.shape == (4, 16)
    assert np.asarray(y).tobytes() == np.asarray(mtlinv.gemv(x, w)).tobytes()


def test_the_producers_stream_is_honoured(torch, rng):
    """Work queued on a side stream of torch's (a long matmul chain, then the values) is complete when mtlinv's
    kernel reads them: DLPack's stream argument makes torch order its stream before mtlinv's."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        m = torch.randn(2048, 2048, device="cuda")
        for _ in range(20):
            m = m @ m / 2048
        x = torch.full((8, 64), 2.0, device="cuda") + 0 * m[:8, :64]
        y = mtlinv.add(x, x)
    side.synchronize()
    assert np.all(np.asarray(y) == 4.0)


def test_cuda_array_interface_import(torch):
    x = torch.arange(8, dtype=torch.float32, device="cuda")

    class InterfaceOnly:  # as CuPy or Numba hand out their arrays
        __cuda_array_interface__ = x.__cuda_array_interface__

    t = mtlinv.asarray(InterfaceOnly())
    assert torch.from_dlpack(t).data_ptr() == x.data_ptr()
    assert np.asarray(t).tolist() == list(range(8))


def test_bad_cuda_input_is_named(torch):
    x = torch.zeros(4, 8, device="cuda")
    with pytest.raises(mtlinv.InvalidArgumentError, match="strided CUDA array .* make it contiguous first"):
        mtlinv.gemv(x[:, ::2], np.ones((2, 4), np.float32))
    with pytest.raises(mtlinv.DTypeError, match="gemv: x has dtype float64 .*convert it first"):
        mtlinv.gemv(x.double(), x)
    with pytest.raises(mtlinv.DTypeError, match="mtlinv converts none on the device"):
        mtlinv.asarray(x, np.float16)
