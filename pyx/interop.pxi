# Zero-copy export of Tensors to other array libraries: DLPack (torch.from_dlpack, cupy.from_dlpack,
# numpy.from_dlpack) for memory on any device, and __cuda_array_interface__ (CuPy, Numba, torch.as_tensor) for
# CUDA memory. On CUDA and Metal an op returns once its kernels are queued (Backend::op_dispatched), so an export
# first waits for the device: the data handed over is complete and the consumer needs no stream handshake.
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_New
from cpython.ref cimport Py_DECREF, Py_INCREF
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc

# The legacy (unversioned) DLPack ABI, dlpack.h v0.8: what every consumer accepts.
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

cdef enum:
    kDLCPU = 1
    kDLCUDA = 2
    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLBfloat = 4

# (DLPack type code, bits) per dtype.
_DLPACK_TYPES = {
    int(CDType.f32): (kDLFloat, 32), int(CDType.f16): (kDLFloat, 16), int(CDType.bf16): (kDLBfloat, 16),
    int(CDType.u32): (kDLUInt, 32), int(CDType.i32): (kDLInt, 32), int(CDType.u8): (kDLUInt, 8),
}


cdef void* _device_address(Tensor t):
    """The tensor's first byte in the memory its device addresses: host memory, or a CUDA device pointer. An
    address only: wait for the device (_wait_for_device) before handing it out."""
    cdef CStorage* s = t.c.storage.get()
    if s.host != NULL:
        return <char*>s.host + t.c.offset
    return <char*>s.device + t.c.offset


cdef tuple _dlpack_device(Tensor t):
    if t.c.host_address() != NULL:
        return (kDLCPU, 0)
    if c_active_backend().caps().backend == b"cuda":
        return (kDLCUDA, 0)  # the CUDA backend runs on the first visible device
    raise BufferError("this Tensor's memory can be exported neither as host nor as CUDA memory")


cdef void _dlpack_deleter(DLManagedTensor* m) noexcept with gil:
    Py_DECREF(<object>m.manager_ctx)
    free(m)


cdef void _dlpack_capsule_destructor(object capsule) noexcept:
    # A capsule that a consumer took is renamed "used_dltensor" and is the consumer's to free.
    if PyCapsule_IsValid(capsule, b"used_dltensor"):
        return
    cdef DLManagedTensor* m = <DLManagedTensor*>PyCapsule_GetPointer(capsule, b"dltensor")
    if m != NULL:
        m.deleter(m)


cdef void _wait_for_device() except *:
    cdef CBackend* backend = &c_active_backend()
    with nogil:
        backend.synchronize()


cdef object _to_dlpack(Tensor t, dl_device, copy):
    """The "dltensor" capsule of `t`, sharing its memory; the capsule holds a reference to `t`."""
    if copy:
        raise BufferError("__dlpack__: mtlinv exports without copying (copy=True is not supported)")
    device = _dlpack_device(t)
    if dl_device is not None and tuple(dl_device) != device:
        raise BufferError(f"__dlpack__: the Tensor is on DLPack device {device}, not {tuple(dl_device)}")
    if t.readonly:
        raise BufferError("__dlpack__: this Tensor wraps a read-only array, which DLPack cannot mark read-only")
    _wait_for_device()  # host memory too: on Metal the GPU may still be writing it
    cdef int32_t ndim = t.c.shape.size()
    # One allocation: the struct, then shape[ndim] and strides[ndim].
    cdef DLManagedTensor* m = <DLManagedTensor*>malloc(sizeof(DLManagedTensor) + 2 * max(ndim, 1) * sizeof(int64_t))
    if m == NULL:
        raise MemoryError("__dlpack__: cannot allocate the DLPack descriptor")
    cdef int64_t* dims = <int64_t*>(<char*>m + sizeof(DLManagedTensor))
    code, bits = _DLPACK_TYPES[int(t.c.dtype)]
    m.dl_tensor.data = _device_address(t)
    m.dl_tensor.device.device_type = device[0]
    m.dl_tensor.device.device_id = device[1]
    m.dl_tensor.ndim = ndim
    m.dl_tensor.dtype.code = code
    m.dl_tensor.dtype.bits = bits
    m.dl_tensor.dtype.lanes = 1
    m.dl_tensor.shape = dims
    m.dl_tensor.strides = dims + ndim
    m.dl_tensor.byte_offset = 0
    for i in range(ndim):
        dims[i] = t.c.shape[i]
        dims[ndim + i] = t.c.strides[i]  # in elements, as DLPack counts them
    Py_INCREF(t)
    m.manager_ctx = <void*>t
    m.deleter = _dlpack_deleter
    try:
        return PyCapsule_New(m, b"dltensor", _dlpack_capsule_destructor)
    except BaseException:
        _dlpack_deleter(m)
        raise


cdef dict _cuda_array_interface(Tensor t):
    if t.c.host_address() != NULL or c_active_backend().caps().backend != b"cuda":
        raise AttributeError("__cuda_array_interface__: this Tensor is not in CUDA memory "
                             f"(backend {c_active_backend().caps().backend.decode()})")
    if t.c.dtype == CDType.bf16:
        raise TypeError("__cuda_array_interface__ has no bfloat16 type; use DLPack (torch.from_dlpack(t))")
    _wait_for_device()
    return {
        "shape": t.shape,
        "typestr": np.dtype(t.dtype).str,
        "data": (<uintptr_t>_device_address(t), t.readonly),
        "strides": None,  # C-contiguous
        "stream": None,   # complete: the device has finished the work queued before
        "version": 3,
    }
