# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""mtlinv's native layer: Tensor, the limit, device info and the ops, over the C++ core (src/core)."""
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES, PyBUF_WRITABLE
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t
from libcpp.memory cimport unique_ptr
from libcpp.string cimport string
from libcpp.utility cimport move
from libcpp.vector cimport vector

cimport numpy as cnp
import numpy as np

from native cimport *
from native_ops cimport *
from native_testing cimport *

cnp.import_array()

# The version this extension was built as (include/mtlinv/version.h, which the package's metadata also reads).
VERSION = f"{MTLINV_VERSION_MAJOR}.{MTLINV_VERSION_MINOR}.{MTLINV_VERSION_PATCH}"

include "errors.pxi"
include "arguments.pxi"
include "limit.pxi"
include "tensor.pxi"
include "dlpack.pxi"
include "array_import.pxi"
include "cuda_import.pxi"
include "interop.pxi"
include "plans.pxi"
include "rms_norm.pxi"
include "gemv.pxi"
include "qgemv.pxi"
include "tile_layout.pxi"
include "quant.pxi"
include "sdpa.pxi"
include "decoder_ops.pxi"
include "decoder.pxi"
include "testing.pxi"


def synchronize():
    """Waits until the active device has run every kernel queued so far, and raises the KernelError of one that
    failed. On CUDA and Metal an op returns once its kernels are queued (reading a result, e.g. np.asarray(t),
    waits for it); time GPU work with this after the calls. On the emulator every op has already run."""
    cdef CBackend* backend = &c_active_backend()
    with nogil:
        backend.synchronize()


def device_info():
    """The active backend: {'backend', 'name', 'threads' (emulator workers / GPU cores), 'simd_width', ...,
    'matrix_units', 'overlapped_launches', 'built_backends', 'gpu_family', 'kernels', 'kernels_load_s',
    'kernels_fallback', 'fallback'}."""
    cdef CBackend* b = &c_active_backend()
    cdef const CDeviceCaps* c = &b.caps()
    cdef CKernelSource kernels = b.kernel_source()
    return {
        "backend": c.backend.decode(),
        "name": c.name.decode(),
        "threads": c.compute_units,
        "simd_width": c.simd_width,
        "max_threads_per_threadgroup": c.max_threads_per_threadgroup,
        "threadgroup_memory_bytes": c.threadgroup_memory_bytes,
        # Whether the plans pick the matrix-unit kernels (gemv_nk_mma, qgemv_mma, sdpa_mma): CUDA sm_80+.
        "matrix_units": c.matrix_units,
        # Whether each kernel may launch before the one ahead of it finishes and wait on the device (CUDA sm_90+,
        # off with MTLINV_CUDA_PDL=0): the gaps between launches shrink, results are the same.
        "overlapped_launches": c.overlapped_launches,
        "built_backends": [s.decode() for s in c_built_backends()],
        # Metal: the highest Apple GPU family the device supports ('apple7', 'apple8', 'apple9'); else None.
        "gpu_family": c.gpu_family.decode() or None,
        # Where the kernels came from: 'built-in' (emulator, CUDA), 'metallib' (compiled when mtlinv was built) or
        # 'source' (Metal: the embedded MSL, each kernel file compiled at its first use).
        "kernels": kernels.origin.decode(),
        # Seconds spent loading the metallib, or compiling kernel files so far; None before, and off Metal.
        "kernels_load_s": kernels.load_seconds.value() if kernels.load_seconds.has_value() else None,
        # Why the metallib the build made is not used (missing, does not load, lacks kernels); else None.
        "kernels_fallback": kernels.fallback.decode() or None,
        # Why MTLINV_DEVICE=auto runs here and not on the backend it prefers (e.g. Metal on an Intel Mac;
        # also warned about on stderr); None when it runs there, or when MTLINV_DEVICE named the backend.
        "fallback": c_backend_fallback().decode() or None,
    }


def kernel_names():
    """Names of every kernel the active backend has (the MTLINV_KERNEL table of metal/*.metal)."""
    return sorted(s.decode() for s in c_active_backend().kernel_names())
