# The DLPack ABI (dlpack.h 1.x), shared by the export (interop.pxi) and the import (array_import.pxi): the legacy
# DLManagedTensor ("dltensor" capsules), which every consumer accepts, and DLManagedTensorVersioned
# ("dltensor_versioned"), which carries the read-only and copied flags and is what a consumer asking with
# max_version >= (1, 0) gets.
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_New, PyCapsule_SetName
from cpython.ref cimport Py_DECREF, Py_INCREF
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc

cdef struct DLDevice:
    int32_t device_type
    int32_t device_id

cdef struct DLDataType:
    uint8_t code
    uint8_t bits
    uint16_t lanes

cdef struct DLTensor:
    void* data
    DLDevice device
    int32_t ndim
    DLDataType dtype
    int64_t* shape
    int64_t* strides
    uint64_t byte_offset

cdef struct DLManagedTensor:
    DLTensor dl_tensor
    void* manager_ctx
    void (*deleter)(DLManagedTensor*) noexcept

cdef struct DLPackVersion:
    uint32_t major
    uint32_t minor

cdef struct DLManagedTensorVersioned:
    DLPackVersion version
    void* manager_ctx
    void (*deleter)(DLManagedTensorVersioned*) noexcept
    uint64_t flags
    DLTensor dl_tensor

cdef enum:
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3     # pinned host memory: host-addressable like kDLCPU
    kDLCUDAManaged = 13
    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLBfloat = 4
    kDLComplex = 5
    kDLBool = 6

cdef uint64_t DLPACK_FLAG_READ_ONLY = 1
cdef uint64_t DLPACK_FLAG_IS_COPIED = 2
# The version this module writes, and the newest major version it reads.
DLPACK_VERSION = (1, 1)

# NumPy dtype <-> DLPack (type code, bits): the dtypes mtlinv keeps, and those it reads only to refuse them with the
# dtype policy's error (tensor.pxi, _check_dtype) instead of a DLPack-specific one.
_DLPACK_CODES = {
    np.dtype(np.float32): (kDLFloat, 32), np.dtype(np.float16): (kDLFloat, 16),
    np.dtype(ml_dtypes.bfloat16): (kDLBfloat, 16), np.dtype(np.float64): (kDLFloat, 64),
    np.dtype(np.uint32): (kDLUInt, 32), np.dtype(np.int32): (kDLInt, 32), np.dtype(np.uint8): (kDLUInt, 8),
    np.dtype(np.int8): (kDLInt, 8), np.dtype(np.int16): (kDLInt, 16), np.dtype(np.int64): (kDLInt, 64),
    np.dtype(np.uint16): (kDLUInt, 16), np.dtype(np.uint64): (kDLUInt, 64), np.dtype(np.bool_): (kDLBool, 8),
    np.dtype(np.complex64): (kDLComplex, 64), np.dtype(np.complex128): (kDLComplex, 128),
}
_DLPACK_DTYPES = {code: dtype for dtype, code in _DLPACK_CODES.items()}
