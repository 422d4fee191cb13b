# Zero-copy export of Tensors to other array libraries: DLPack (torch.from_dlpack, cupy.from_dlpack,
# numpy.from_dlpack, mx.from_dlpack) for memory on any device, __array_interface__ for host memory, and
# __cuda_array_interface__ (CuPy, Numba, torch.as_tensor) for
# CUDA memory. On CUDA and Metal an op returns once its kernels are queued (Backend::op_dispatched), so an export
# first waits for the device: the data handed over is complete and the consumer needs no stream handshake.
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


cdef void _dlpack_versioned_deleter(DLManagedTensorVersioned* m) noexcept with gil:
    Py_DECREF(<object>m.manager_ctx)
    free(m)


cdef void _dlpack_capsule_destructor(object capsule) noexcept:
    # A capsule that a consumer took is renamed "used_dltensor" and is the consumer's to free.
    if PyCapsule_IsValid(capsule, b"used_dltensor"):
        return
    cdef DLManagedTensor* m = <DLManagedTensor*>PyCapsule_GetPointer(capsule, b"dltensor")
    if m != NULL:
        m.deleter(m)


cdef void _dlpack_versioned_capsule_destructor(object capsule) noexcept:
    if PyCapsule_IsValid(capsule, b"used_dltensor_versioned"):
        return
    cdef DLManagedTensorVersioned* m = <DLManagedTensorVersioned*>PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    if m != NULL:
        m.deleter(m)


cdef void _wait_for_device() except *:
    cdef CBackend* backend = &c_active_backend()
    with nogil:
        backend.synchronize()


cdef void _fill_dltensor(DLTensor* d, Tensor t, tuple device, int64_t* dims):
    """d describes t (its memory, shape and strides written into dims[2 * ndim])."""
    cdef int32_t ndim = t.c.shape.size()
    code, bits = _DLPACK_CODES[np.dtype(t.dtype)]
    d.data = _device_address(t)
    d.device.device_type = device[0]
    d.device.device_id = device[1]
    d.ndim = ndim
    d.dtype.code = code
    d.dtype.bits = bits
    d.dtype.lanes = 1
    d.shape = dims
    d.strides = dims + ndim
    d.byte_offset = 0
    for i in range(ndim):
        dims[i] = t.c.shape[i]
        dims[ndim + i] = t.c.strides[i]  # in elements, as DLPack counts them


cdef object _to_dlpack(Tensor t, max_version, dl_device, copy):
    """A capsule sharing t's memory (or, with copy=True, a copy's), holding a reference to the Tensor it shares.
    The versioned kind ("dltensor_versioned", flags READ_ONLY and IS_COPIED) to a consumer whose max_version is
    1.0 or newer; else the legacy kind, which cannot say read-only and so is refused for a read-only Tensor."""
    device = _dlpack_device(t)
    if dl_device is not None and tuple(int(v) for v in dl_device) != device:
        raise BufferError(f"__dlpack__: the Tensor is on DLPack device {device}, not {tuple(dl_device)}; mtlinv "
                          "does not move memory between devices")
    if copy is not None and copy is not True and copy is not False:
        raise BufferError(f"__dlpack__: copy must be True, False or None, got {copy!r}")
    versioned = max_version is not None and tuple(max_version)[0] >= 1
    if copy:
        if device[0] != kDLCPU:
            raise BufferError("__dlpack__: copy=True is supported for host memory only; this Tensor is device memory")
        t = _from_host_array(np.array(t.numpy()))  # a writable copy, which the capsule alone holds
    elif t.readonly and not versioned:
        raise BufferError("__dlpack__: this Tensor wraps a read-only array, which legacy DLPack cannot mark "
                          "read-only; ask with max_version=(1, 0) or newer")
    _wait_for_device()  # host memory too: on Metal the GPU may still be writing it
    cdef int32_t ndim = t.c.shape.size()
    cdef size_t dims_bytes = 2 * max(ndim, 1) * sizeof(int64_t)
    cdef DLManagedTensorVersioned* mv
    cdef DLManagedTensor* m
    # One allocation each: the struct, then shape[ndim] and strides[ndim].
    if versioned:
        mv = <DLManagedTensorVersioned*>malloc(sizeof(DLManagedTensorVersioned) + dims_bytes)
        if mv == NULL:
            raise MemoryError("__dlpack__: cannot allocate the DLPack descriptor")
        _fill_dltensor(&mv.dl_tensor, t, device, <int64_t*>(<char*>mv + sizeof(DLManagedTensorVersioned)))
        mv.version.major = DLPACK_VERSION[0]
        mv.version.minor = DLPACK_VERSION[1]
        mv.flags = (DLPACK_FLAG_READ_ONLY if t.readonly else 0) | (DLPACK_FLAG_IS_COPIED if copy else 0)
        Py_INCREF(t)
        mv.manager_ctx = <void*>t
        mv.deleter = _dlpack_versioned_deleter
        try:
            return PyCapsule_New(mv, b"dltensor_versioned", _dlpack_versioned_capsule_destructor)
        except BaseException:
            _dlpack_versioned_deleter(mv)
            raise
    m = <DLManagedTensor*>malloc(sizeof(DLManagedTensor) + dims_bytes)
    if m == NULL:
        raise MemoryError("__dlpack__: cannot allocate the DLPack descriptor")
    _fill_dltensor(&m.dl_tensor, t, device, <int64_t*>(<char*>m + sizeof(DLManagedTensor)))
    Py_INCREF(t)
    m.manager_ctx = <void*>t
    m.deleter = _dlpack_deleter
    try:
        return PyCapsule_New(m, b"dltensor", _dlpack_capsule_destructor)
    except BaseException:
        _dlpack_deleter(m)
        raise


cdef dict _array_interface(Tensor t):
    """NumPy's __array_interface__ (version 3) for host-visible memory. bfloat16 has no typestr of its own (ml_dtypes
    writes '<V2', which reads back as raw bytes), so it raises AttributeError, and NumPy falls back to __array__."""
    if t.c.host_address() == NULL:
        raise AttributeError("__array_interface__: this Tensor is device memory; use .numpy() to copy it")
    if t.c.dtype == CDType.bf16:
        raise AttributeError("__array_interface__ has no bfloat16 type; use DLPack or np.asarray(t)")
    return {
        "shape": t.shape,
        "typestr": np.dtype(t.dtype).str,
        "data": (<uintptr_t>_host_data(t), t.readonly),
        "strides": None,  # C-contiguous
        "version": 3,
    }


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
