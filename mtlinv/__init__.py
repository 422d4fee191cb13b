"""mtlinv: batch-invariant inference kernels.

With ``set_limit(L)``, every call with ``M <= L`` rows (or queries) runs a canonical kernel whose per-row
reduction order does not depend on M: row r of an M-row call has the same bits as the call on row r alone.
"""
from ._native import (
    DeviceError,
    DTypeError,
    InvalidArgumentError,
    KernelError,
    MtlinvError,
    OutOfMemoryError,
    Tensor,
    asarray,
    device_info,
    gemv,
    get_limit,
    kernel_names,
    matmul,
    qgemv,
    rms_norm,
    sdpa,
    set_limit,
    synchronize,
    tile_weights,
)
from ._native import (  # the decoder's building blocks, and a llama decoder's forward pass made of them
    Decoder, add, add_rms_norm, embedding, heads_to_rows, qk_rms_norm, qkv_to_heads, rope_heads, swiglu, swiglu_halves,
    write_heads)
from ._native import _init_limit_from_env
from ._paths import get_cmake_dir, get_include
from .limits import batch_invariant
from .quant import dequantize, quantize

_init_limit_from_env()

__all__ = [
    "DTypeError", "Decoder", "DeviceError", "InvalidArgumentError", "KernelError", "MtlinvError",
    "OutOfMemoryError", "Tensor", "add", "add_rms_norm", "asarray", "batch_invariant", "dequantize", "device_info",
    "embedding", "gemv", "get_cmake_dir", "get_include", "get_limit", "heads_to_rows", "kernel_names", "matmul",
    "qgemv", "qk_rms_norm", "qkv_to_heads", "quantize", "rms_norm", "rope_heads", "sdpa", "set_limit", "swiglu", "swiglu_halves",
    "synchronize", "write_heads",
]


def __getattr__(name):
    """`mtlinv.generate` is mtlinv.model.generate, imported on first use: the library itself never imports the model
    layer (which needs the model extra), so `import mtlinv` stays as light as the ops."""
    if name == "generate":
        from .model import generate
        return generate
    raise AttributeError(f"module 'mtlinv' has no attribute {name!r}")
