# How arrays get into mtlinv: the one conversion route of every array argument (asarray, the ops' operands,
# tile_weights, the mtlinv.quant helpers). Each producer is read through the protocol that describes its memory
# best, and every route ends in one dtype policy (_check_dtype):
#   ndarray (ml_dtypes' bfloat16 included)      as it is
#   __dlpack__ (PyTorch, MLX, JAX, CuPy, ...)    read here, bfloat16 included (np.from_dlpack refuses it), zero-copy,
#                                               read-only where the producer says so (versioned DLPack)
#   CUDA memory (DLPack kDLCUDA, __cuda_array_interface__): on the CUDA backend a Tensor over it, zero-copy
#                                               (cuda_import.pxi); elsewhere refused by name
#   Python lists, tuples and scalars            float64 becomes float32, the widest dtype the kernels take
#   anything else                               the buffer protocol (MLX's 'bfloat16' format too), then NumPy's
#                                               __array_interface__ / __array_struct__ / __array__
# Only Python's own numbers are narrowed: a float64 *array* from any library is refused with the same DTypeError.

from cpython.buffer cimport PyObject_CheckBuffer

# The kernels' floating dtypes, named in the errors.
_KERNEL_FLOATS = "float32, float16 or bfloat16"
_DTYPE_FIX = ("convert it first (NumPy: a.astype(np.float32); PyTorch: t.float(); MLX: a.astype(mx.float32); JAX: "
              "a.astype(jnp.float32)): mtlinv converts no array's dtype by itself")
# Buffer-protocol formats that PEP 3118 lacks, as producers write them: MLX exports bfloat16 arrays as 'bfloat16'.
_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)  # kind 'V' in NumPy's eyes, not 'f'
_BUFFER_FORMATS = {"bfloat16": _BFLOAT16}


cdef str _source(obj):
    """The name of obj's type, for errors ('Tensor', 'array', 'ArrayImpl'; its dtype names the library)."""
    return type(obj).__name__


def _dtype_error(str where, dtype, obj, str expected):
    """The DTypeError of every route: the dtype, where it came from, what is taken and how to convert it."""
    if isinstance(obj, (list, tuple, int, float, complex)):  # Python's own values, read as NumPy reads them
        convert = ", or asarray(obj, dtype) to convert them" if where == "asarray" else ""
        return DTypeError(f"{where}: a Python {type(obj).__name__} that NumPy reads as {dtype}; expected {expected}; "
                          f"give float values (Python floats become float32){convert}")
    native = getattr(obj, "dtype", None)
    came = f" ({_source(obj)} of dtype {native})" if native is not None and not isinstance(obj, np.ndarray) else ""
    return DTypeError(f"{where} has dtype {dtype}{came}; expected {expected}; {_DTYPE_FIX}")


cdef class _DLPackMemory:
    """A consumed DLPack capsule: its tensor's dtype, shape and strides (in bytes), and its host memory as a 1-D byte
    buffer, the base of the ndarray that views it (device memory: the keepalive of the Tensor over it). Runs the
    producer's deleter when the last user goes, which lets the producer free (or stop pinning) the memory."""
    cdef void* managed
    cdef bint versioned
    cdef DLTensor* tensor
    cdef object dtype, shape, strides
    cdef char* start
    cdef Py_ssize_t length
    cdef bint readonly

    def __getbuffer__(self, Py_buffer* buf, int flags):
        if (flags & PyBUF_WRITABLE) and self.readonly:
            raise BufferError("the DLPack producer marked this array read-only")
        _byte_buffer(buf, flags, self, self.start, self.length, self.readonly)

    def __releasebuffer__(self, Py_buffer* buf):
        pass

    def __dealloc__(self):
        if self.managed == NULL:
            return
        cdef DLManagedTensorVersioned* mv = <DLManagedTensorVersioned*>self.managed
        cdef DLManagedTensor* m = <DLManagedTensor*>self.managed
        if self.versioned and mv.deleter != NULL:
            mv.deleter(mv)
        elif not self.versioned and m.deleter != NULL:
            m.deleter(m)


cdef object _dlpack_capsule(obj, str where, stream):
    """obj.__dlpack__(), asking for the versioned ABI and no copy (and, for CUDA memory, for the producer's work to
    be ordered before `stream`'s); producers that predate the keywords (DLPack < 1.0) are asked again without the
    new ones, as the array API standard says."""
    kwargs = {} if stream is None else {"stream": stream}
    try:
        return obj.__dlpack__(max_version=DLPACK_VERSION, copy=False, **kwargs)
    except TypeError:
        pass
    except BufferError as e:
        raise InvalidArgumentError(f"{where} ({_source(obj)}) cannot be shared through DLPack without a copy: {e}; "
                                   "mtlinv reads arrays without copying them") from None
    return obj.__dlpack__(**kwargs)


cdef _DLPackMemory _consume_dlpack(obj, str where, stream):
    """Takes obj's DLPack capsule: the memory it describes, owned (the producer's deleter runs when it goes)."""
    capsule = _dlpack_capsule(obj, where, stream)
    cdef _DLPackMemory memory = _DLPackMemory.__new__(_DLPackMemory)
    cdef DLManagedTensorVersioned* mv
    cdef DLManagedTensor* m
    cdef DLTensor* t
    cdef uint64_t flags = 0
    cdef int i
    if PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        mv = <DLManagedTensorVersioned*>PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        if mv.version.major > DLPACK_VERSION[0]:
            raise InvalidArgumentError(f"{where} ({_source(obj)}): DLPack {mv.version.major}.{mv.version.minor} is "
                                       f"newer than mtlinv reads ({DLPACK_VERSION[0]}.x)")
        PyCapsule_SetName(capsule, b"used_dltensor_versioned")
        memory.managed = mv
        memory.versioned = True
        t = &mv.dl_tensor
        flags = mv.flags
    elif PyCapsule_IsValid(capsule, b"dltensor"):
        m = <DLManagedTensor*>PyCapsule_GetPointer(capsule, b"dltensor")
        PyCapsule_SetName(capsule, b"used_dltensor")
        memory.managed = m
        t = &m.dl_tensor
    else:
        raise InvalidArgumentError(f"{where} ({_source(obj)}): __dlpack__ returned {capsule!r}, not a DLPack "
                                   "capsule (or one already consumed)")
    # From here on `memory` owns the tensor: its deleter runs whatever fails below.
    memory.tensor = t
    memory.readonly = (flags & DLPACK_FLAG_READ_ONLY) != 0
    key = (t.dtype.code, t.dtype.bits)
    if t.dtype.lanes != 1 or key not in _DLPACK_DTYPES:
        raise DTypeError(f"{where} ({_source(obj)}) has DLPack dtype code {t.dtype.code}, {t.dtype.bits} bits, "
                         f"{t.dtype.lanes} lanes; expected {_KERNEL_FLOATS}; {_DTYPE_FIX}")
    memory.dtype = _DLPACK_DTYPES[key]
    item = memory.dtype.itemsize
    memory.shape = [t.shape[i] for i in range(t.ndim)]
    if t.strides == NULL:  # C-contiguous
        memory.strides = _contiguous_strides(memory.shape, item)
    else:
        memory.strides = [t.strides[i] * item for i in range(t.ndim)]
    return memory


cdef list _contiguous_strides(shape, Py_ssize_t item):
    """C-order strides in bytes."""
    strides = [item] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides


cdef object _from_dlpack(obj, str where):
    """An ndarray viewing the host memory that obj exports through DLPack, bfloat16 included; read-only where the
    producer marked it so. Device memory is refused (the CUDA backend takes it first: _device_tensor)."""
    device = tuple(obj.__dlpack_device__())
    if int(device[0]) not in (kDLCPU, kDLCUDAHost):
        kind = "CUDA memory" if int(device[0]) in (kDLCUDA, kDLCUDAManaged) else f"on DLPack device {device}"
        raise InvalidArgumentError(f"{where} ({_source(obj)}) is {kind}; mtlinv takes arrays in host memory on "
                                   f"this backend ({c_active_backend().caps().backend.decode()}): copy it to the host "
                                   "first")
    cdef _DLPackMemory memory = _consume_dlpack(obj, where, None)
    shape, strides, item = memory.shape, memory.strides, memory.dtype.itemsize
    # The bytes the array spans, from its lowest to its highest element (strides may be negative or zero).
    low = sum(s * (d - 1) for s, d in zip(strides, shape) if s < 0 and d > 0)
    high = sum(s * (d - 1) for s, d in zip(strides, shape) if s > 0 and d > 0)
    empty = any(d == 0 for d in shape)
    cdef Py_ssize_t first = 0 if empty else low
    memory.start = <char*>memory.tensor.data + memory.tensor.byte_offset + first
    memory.length = 0 if empty else high - low + item
    return np.ndarray(shape, memory.dtype, buffer=memory, offset=0 if empty else -low, strides=strides)


cdef object _from_buffer(obj, str where):
    """obj's buffer as an ndarray, zero-copy; formats PEP 3118 lacks (MLX's 'bfloat16') mapped to their dtype."""
    view = memoryview(obj)
    dtype = _BUFFER_FORMATS.get(view.format)
    if dtype is None:
        return np.asarray(view)
    if not view.c_contiguous:
        raise InvalidArgumentError(f"{where} ({_source(obj)}) is a strided '{view.format}' buffer; mtlinv reads "
                                   "that format from contiguous buffers only")
    raw = view.cast("B")
    return np.frombuffer(raw, dtype).reshape(view.shape)


cdef object _host_view(obj, str where, bint lists_as_float32=True):
    """obj as an ndarray over the producer's memory, uncopied (see the table at the top of this file): possibly
    strided, broadcast or byte-swapped. Only Python's lists, tuples and scalars are read into a new array, as float32
    where NumPy reads float64 (with `lists_as_float32`). Errors name `where`."""
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(type(obj), "__dlpack__"):
        return _from_dlpack(obj, where)
    if hasattr(obj, "__cuda_array_interface__"):
        raise InvalidArgumentError(f"{where} ({_source(obj)}) is CUDA memory; mtlinv takes arrays in host "
                                   "memory (or DLPack from the host): copy it to the host first")
    if isinstance(obj, (list, tuple, int, float, complex, np.generic)):
        a = np.asarray(obj)
        if lists_as_float32 and a.dtype == np.float64:
            a = _converted(a, np.dtype(np.float32), where)  # Python's numbers: the widest dtype the kernels take
        return a
    if PyObject_CheckBuffer(obj) and not isinstance(obj, (bytes, bytearray, str)):
        return _from_buffer(obj, where)
    a = np.asarray(obj)
    if a.dtype == object:
        raise InvalidArgumentError(f"{where} ({_source(obj)}) is not an array: it has neither DLPack, the "
                                   "buffer protocol nor NumPy's array interface")
    return a


cdef object _converted(a, dtype, str where):
    """ndarray `a` converted to `dtype`, refusing a finite value that would become infinite (1e300 as float32, 7e4 as
    float16), named with the first one: a conversion rounds, as asked, but an infinity is not a rounding."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.asarray(a, dtype=dtype)
    if out.dtype.kind == "f" or out.dtype == _BFLOAT16:
        if a.dtype.kind in "fiu" or a.dtype == _BFLOAT16:
            overflow = np.isinf(out) & np.isfinite(a)
            if overflow.any():
                raise InvalidArgumentError(f"{where}: {float(a[overflow].flat[0])!r} is beyond {out.dtype}'s range")
    return out


cdef bint _needs_copy(a):
    """Whether ndarray `a` must be copied before a Tensor can hold it: a broadcast or strided view, or a byte-swapped
    array (the kernels read native values)."""
    return not (a.flags.c_contiguous and a.dtype.isnative)


cdef object _native(a):
    """ndarray `a` contiguous and in the machine's byte order: a copy where it is not already."""
    if not a.dtype.isnative:  # '>f2' on a little-endian machine
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.c_contiguous:
        a = np.array(a, order="C")  # (np.ascontiguousarray would turn a 0-d array into shape (1,))
    return a


cdef _check_dims(a, str where):
    """Every dimension of `a` within the kernels' 32 bits, before a copy that would otherwise be asked of memory
    first (the routes that copy without an op's checks: asarray, tile_weights, mtlinv.quant)."""
    for i, d in enumerate(a.shape):
        if d > _MAX_DIM:
            raise InvalidArgumentError(f"{where} has shape {a.shape}: dimension {i} = {d} is out of range for "
                                       f"the kernels (at most 2^32 - 1)")


cdef object _host_array(obj, dtype, str op, str name):
    """obj as a contiguous ndarray in the machine's byte order (_host_view, then _native): the conversion route of
    the arguments that are not an op's operands (asarray, tile_weights, the mtlinv.quant helpers; the ops take
    _operand). With `dtype`, an explicit conversion to it. An array that must be copied has its dimensions checked
    first (_check_dims). Errors name `op: name`."""
    where = f"{op}: {name}" if name else op
    a = _host_view(obj, where, dtype is None)  # with a dtype, a list is read once, into it
    if _needs_copy(a) or (dtype is not None and np.dtype(dtype) != a.dtype):
        _check_dims(a, where)
    if dtype is not None:
        a = _converted(a, dtype, where)
    return _native(a)


def _to_host_array(obj, str what, str name):
    """_host_array for the pure-Python helpers (mtlinv.quant): obj as a native-order ndarray, lists and scalars as
    float32."""
    return _host_array(obj, None, what, name)


def asarray(obj, dtype=None):
    """A Tensor with the contents of `obj`: an ndarray, a DLPack producer (PyTorch, MLX, JAX: bfloat16 included),
    a buffer (MLX's 'bfloat16' format included), anything NumPy reads, or a Tensor. Shares the memory of a
    contiguous array in host memory, in native byte order, on host-visible devices (read-only where the producer's
    is); otherwise copies. Python lists and scalars become float32 (as in the ops), unless `dtype` says otherwise;
    an array's dtype is kept, and refused when no kernel takes it (DTypeError), as in the ops."""
    expected = "one of " + ", ".join(str(d) for d in _NUMPY_TO_DTYPE)
    if dtype is not None:
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise DTypeError(f"asarray: dtype={dtype!r} is not a dtype; expected {expected}") from None
        if dtype.newbyteorder("=") not in _NUMPY_TO_DTYPE:  # '>f4' is float32, read in native order after
            raise DTypeError(f"asarray: dtype={dtype} is not a dtype of mtlinv; expected {expected}")
    if isinstance(obj, Tensor):
        if dtype is None or dtype == obj.dtype:
            return obj
        obj = obj.numpy()
    on_device = _device_tensor(obj, dtype, "asarray", expected)
    if on_device is not None:
        return on_device
    a = _host_array(obj, dtype, "asarray", None)
    if a.dtype not in _NUMPY_TO_DTYPE:
        raise _dtype_error("asarray", a.dtype, obj, expected)
    return _from_host_array(a)


cdef Tensor _operand(obj, str name, str op, list pending=None):
    """An op's argument as a Tensor, with the op and argument named in any error. An array that must be copied
    (_needs_copy) becomes, where the op passes `pending`, a Tensor with its shape and no memory, listed there with
    the array: the op runs its checks on it first (_checks_first), and only then is it copied."""
    if isinstance(obj, Tensor):
        (<Tensor>obj)._require_storage(op, name)
        return obj
    on_device = _device_tensor(obj, None, f"{op}: {name}", _KERNEL_FLOATS)
    if on_device is not None:
        return on_device
    try:
        a = _host_view(obj, f"{op}: {name}")
    except MtlinvError:
        raise
    except Exception as e:
        raise InvalidArgumentError(f"{op}: {name} cannot be converted to an array: {e}") from None
    native_dtype = a.dtype.newbyteorder("=") if a.dtype.byteorder in "<>" else a.dtype
    if native_dtype not in _NUMPY_TO_DTYPE:
        raise _dtype_error(f"{op}: {name}", a.dtype, obj, _KERNEL_FLOATS)
    if _needs_copy(a):
        if pending is not None:
            return _pending_copy(pending, a, _NUMPY_TO_DTYPE[native_dtype], _native)
        _check_dims(a, f"{op}: {name}")
    return _from_host_array(a)


cdef Tensor _pending_copy(list pending, a, CDType dtype, convert):
    """A Tensor of a's shape and `dtype` with no memory, listed in `pending` with what makes its contents:
    convert(a), a contiguous native ndarray of that dtype."""
    cdef vector[int64_t] shape = a.shape
    cdef Tensor t = Tensor.__new__(Tensor)
    t.c = CTensor.shape_only(shape, dtype)
    pending.append((t, a, convert))
    return t


cdef class _checks_first:
    """`with _checks_first(pending): <the op's native call>` runs the op in checks-only mode on the Tensors of
    `pending` (_operand), which have no memory: an error in the arguments is raised as for contiguous arrays, and
    before any copy. Once the checks pass, each array is copied into its Tensor, for the op's real call after."""
    cdef list pending
    cdef CChecksOnlyScope* scope

    def __cinit__(self, list pending):
        self.pending = pending

    def __enter__(self):
        self.scope = new CChecksOnlyScope()

    def __exit__(self, kind, value, traceback):
        del self.scope
        self.scope = NULL
        if kind is not None and kind is not _ChecksPassed:
            return False
        cdef Tensor t, made
        for t, a, convert in self.pending:
            made = _from_host_array(convert(a))
            t.c = made.c
            t.keepalive = made.keepalive
            t.readonly = made.readonly
        return True

    def __dealloc__(self):
        del self.scope
