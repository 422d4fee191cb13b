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
    rms_norm,
    set_limit,
)
from ._native import add, embedding, heads_to_rows, rope_heads, swiglu, write_heads  # decoder building blocks
from ._native import _init_limit_from_env
from .limits import batch_invariant

_init_limit_from_env()

__all__ = [
    "DTypeError", "DeviceError", "InvalidArgumentError", "KernelError", "MtlinvError", "OutOfMemoryError",
    "Tensor", "asarray", "batch_invariant", "device_info", "gemv", "get_limit", "kernel_names", "matmul", "rms_norm", "set_limit",
]
