# CUDA-resident arrays into the CUDA backend, without copies: DLPack (device kDLCUDA: PyTorch, CuPy, JAX on a GPU)
# and __cuda_array_interface__ (CuPy, Numba). mtlinv's kernels run on the legacy default stream, so the producer's
# work must be ordered before it: a DLPack producer is asked for that stream (stream=1, which the producer orders
# after its own with an event), and an interface's 'stream' is waited on the same way (Backend::wait_for_stream).
# Device memory is never copied: a strided array, a dtype to convert, or device memory on another backend is refused.

cdef int _cuda_backend = -1  # whether the active backend is CUDA (chosen once a process): -1 until asked


cdef object _device_tensor(obj, dtype, str where, str expected):
    """A Tensor over obj's CUDA memory on the CUDA backend; None when obj is not CUDA memory (or the backend is not
    CUDA: the host route then refuses device memory by name). Every operand of every op passes here."""
    global _cuda_backend
    if isinstance(obj, (Tensor, np.ndarray)):
        return None
    if _cuda_backend < 0:
        _cuda_backend = c_active_backend().caps().backend == b"cuda"
    if not _cuda_backend:
        return None
    cdef _DLPackMemory memory
    if hasattr(type(obj), "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        if int(tuple(obj.__dlpack_device__())[0]) not in (kDLCUDA, kDLCUDAManaged):
            return None
        memory = _consume_dlpack(obj, where, 1)  # 1: the legacy default stream, mtlinv's
        data = <uintptr_t>(<char*>memory.tensor.data + memory.tensor.byte_offset)
        return _wrap_device(obj, memory, data, memory.dtype, memory.shape, memory.strides, memory.readonly, dtype,
                            where, expected)
    if not hasattr(obj, "__cuda_array_interface__"):
        return None
    face = obj.__cuda_array_interface__
    stream = face.get("stream")
    if stream is not None:
        if stream is True or stream is False or not isinstance(stream, int) or stream == 0:
            raise InvalidArgumentError(f"{where} ({_source(obj)}): __cuda_array_interface__ stream {stream!r} is "
                                       "not a stream handle (0 is not allowed)")
        c_active_backend().wait_for_stream(stream)
    item_dtype = np.dtype(face["typestr"])
    shape = list(face["shape"])
    strides = list(face["strides"]) if face.get("strides") is not None else _contiguous_strides(shape,
                                                                                                  item_dtype.itemsize)
    address, readonly = face["data"]
    return _wrap_device(obj, obj, address, item_dtype, shape, strides, readonly, dtype, where, expected)


cdef Tensor _wrap_device(obj, keepalive, uintptr_t address, item_dtype, shape, strides, bint readonly, dtype,
                         str where, str expected):
    """The Tensor over CUDA memory at `address`, after the checks every route makes (dtype policy, contiguity)."""
    if item_dtype not in _NUMPY_TO_DTYPE:
        raise _dtype_error(where, item_dtype, obj, expected)
    if dtype is not None and np.dtype(dtype) != item_dtype:
        raise DTypeError(f"{where} is CUDA memory of dtype {item_dtype}; mtlinv converts none on the device "
                         f"(asked for {np.dtype(dtype)}): convert it with its library first")
    item = item_dtype.itemsize
    contiguous = _contiguous_strides(shape, item)
    if any(s != c and d != 1 for s, c, d in zip(strides, contiguous, shape)):
        raise InvalidArgumentError(f"{where} ({_source(obj)}) is a strided CUDA array (shape {tuple(shape)}, strides "
                                   f"{tuple(strides)} bytes); mtlinv copies nothing on the device: make it "
                                   "contiguous first (.contiguous(), cupy.ascontiguousarray)")
    cdef vector[int64_t] c_shape = shape
    cdef vector[int64_t] c_strides = [c // item for c in contiguous]
    cdef Tensor t = Tensor.__new__(Tensor)
    if address == 0 and all(shape):  # a 0-d array holds one element too
        raise InvalidArgumentError(f"{where} ({_source(obj)}) is CUDA memory at address 0 (shape {tuple(shape)}): "
                                   "not an allocation")
    t.c = CTensor.from_device(<void*>address, c_shape, c_strides, _NUMPY_TO_DTYPE[item_dtype])
    t.keepalive = keepalive
    t.readonly = readonly
    return t
