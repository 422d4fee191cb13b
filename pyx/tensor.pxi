# mtlinv.Tensor: a tensor on the active device. Host-visible memory (emulator, Metal's shared storage) is exposed
# without copies through the buffer protocol and __array__; other memory (CUDA) is copied on .numpy(). Either way
# the device first finishes the work queued before (src/core/backend.h, host access): a view taken earlier shows
# later ops' results only after a wait (mtlinv.synchronize(), or taking a view again).

cimport cython
import ml_dtypes

_NUMPY_TO_DTYPE = {
    np.dtype(np.float32): CDType.f32,
    np.dtype(np.float16): CDType.f16,
    np.dtype(ml_dtypes.bfloat16): CDType.bf16,
    np.dtype(np.uint32): CDType.u32,
    np.dtype(np.int32): CDType.i32,
    np.dtype(np.uint8): CDType.u8,
}
_DTYPE_TO_NUMPY = {int(v): k for k, v in _NUMPY_TO_DTYPE.items()}

_MAX_DIM = c_max_dim


cdef char* _buffer_format(CDType t):
    """The PEP 3118 format of a dtype; bfloat16 has none (NULL), so np.asarray falls back to __array__ for it."""
    if t == CDType.f32:
        return "f"
    if t == CDType.f16:
        return "e"
    if t == CDType.u32:
        return "I"
    if t == CDType.i32:
        return "i"
    if t == CDType.u8:
        return "B"
    return NULL


cdef void* _host_data(Tensor t) except? NULL:
    """t's host memory once the device has finished the work queued before (Tensor::host_data; it raises the
    KernelError of a kernel that failed): the buffer protocol, numpy() and DLPack reach host memory through here."""
    cdef void* p
    with nogil:
        p = t.c.host_data()
    return p


cdef class _RawBytes:
    """The bytes of a host-visible Tensor as a 1-D buffer: the base of the ndarray views that Tensor hands out."""
    cdef Tensor tensor

    def __getbuffer__(self, Py_buffer* buf, int flags):
        cdef CTensor* c = &self.tensor.c
        if (flags & PyBUF_WRITABLE) and self.tensor.readonly:
            raise BufferError("this Tensor wraps a read-only array")
        buf.buf = _host_data(self.tensor)
        buf.len = c.nbytes()
        buf.readonly = self.tensor.readonly
        buf.itemsize = 1
        buf.format = NULL
        if flags & PyBUF_FORMAT:
            buf.format = "B"
        buf.ndim = 1
        buf.shape = NULL
        buf.strides = NULL
        buf.suboffsets = NULL
        buf.internal = NULL
        buf.obj = self

    def __releasebuffer__(self, Py_buffer* buf):
        pass


# no_gc_clear: the garbage collector must not drop `keepalive` before `c` (see __dealloc__); the ndarray it holds
# refers to no Tensor, so it closes no cycle.
@cython.no_gc_clear
cdef class Tensor:
    """A tensor on the active mtlinv device. Make one with mtlinv.asarray(ndarray); ops return them."""
    cdef CTensor c
    cdef object keepalive      # the ndarray whose memory a zero-copy Tensor views
    cdef readonly bint readonly
    cdef Py_ssize_t[8] _shape_bytes, _stride_bytes
    # (class, args) of the error a wait raised in __getbuffer__, for __array__ to raise again: NumPy asks for the
    # buffer first, drops whatever error that raises, and calls __array__, which would wait with nothing to report.
    cdef object _buffer_error

    def __init__(self):
        raise TypeError("use mtlinv.asarray(array) to make a Tensor")

    def __dealloc__(self):
        # The storage goes first: releasing one that wraps the ndarray's memory waits until the device no longer
        # uses it (Backend::wrap_host), and only then may `keepalive` free the memory.
        self.c = CTensor()

    cdef _require_storage(self, str where, str name=None):
        """Tensor.__new__ (or a subclass's __init__) makes a Tensor with no memory; refuse it before a use.
        `where` is the op or method, `name` the argument (formatted only when raising: ops call this every time)."""
        if self.c.storage.get() == NULL:
            what = f"{where}: {name}" if name else where
            raise InvalidArgumentError(f"{what}: this Tensor has no memory (made without mtlinv.asarray or an op)")

    @property
    def shape(self):
        return tuple(self.c.shape)

    @property
    def ndim(self):
        return self.c.shape.size()

    @property
    def size(self):
        return self.c.numel()

    @property
    def nbytes(self):
        return self.c.nbytes()

    @property
    def dtype(self):
        return _DTYPE_TO_NUMPY[int(self.c.dtype)]

    def reshape(self, *shape):
        """A view with a new shape of the same size (one dimension may be -1)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        # Only -1 is resolved here; the core checks the size (and that the tensor is contiguous). A decoder step
        # reshapes hundreds of times: this once built strides with np.prod per dimension, which took longer than the
        # op calls around it (benchmarks/profile_decode.py).
        new = [_int_arg("reshape", "a dimension", value, -1, 2**62) for value in shape]
        if new.count(-1) > 1:
            raise InvalidArgumentError(f"reshape: invalid shape {tuple(shape)}")
        if -1 in new:
            known = 1
            for d in new:
                if d != -1:
                    known *= d  # Python ints: exact however large
            new[new.index(-1)] = self.c.numel() // known if known else 0
        cdef Tensor t = Tensor.__new__(Tensor)
        t.c = self.c.reshape(new)
        t.keepalive = self.keepalive
        t.readonly = self.readonly
        return t

    def numpy(self):
        """The contents as an ndarray: a zero-copy view on host-visible memory, else a copy."""
        self._require_storage("Tensor.numpy")
        if self.c.host_address() != NULL:
            raw = _RawBytes.__new__(_RawBytes)
            (<_RawBytes>raw).tensor = self
            view = np.frombuffer(raw, dtype=self.dtype).reshape(self.shape)
            return view
        out = np.empty(self.shape, dtype=self.dtype)
        self.c.download(cnp.PyArray_DATA(out), self.c.nbytes(), b"Tensor.numpy")
        return out

    def __array__(self, dtype=None, copy=None):
        error, self._buffer_error = self._buffer_error, None
        if error is not None:
            raise error[0](*error[1])
        needs_copy = (dtype is not None and np.dtype(dtype) != self.dtype) or self.c.host_address() == NULL
        if copy is False and needs_copy:
            raise ValueError("Tensor.__array__: copy=False, but a copy is needed (dtype change or device memory)")
        a = self.numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def __getbuffer__(self, Py_buffer* buf, int flags):
        self._require_storage("Tensor buffer")
        if self.c.host_address() == NULL:
            raise BufferError("Tensor memory is not host-visible on this device; use .numpy() to copy it")
        cdef char* fmt = _buffer_format(self.c.dtype)
        if fmt == NULL:
            raise BufferError(f"{self.dtype} has no buffer-protocol format; use np.asarray(t) or t.numpy()")
        if (flags & PyBUF_WRITABLE) and self.readonly:
            raise BufferError("this Tensor wraps a read-only array")
        cdef int nd = self.c.shape.size()
        if nd > 8:
            raise BufferError("more than 8 dimensions")
        cdef Py_ssize_t item = dtype_size(self.c.dtype)
        for i in range(nd):
            self._shape_bytes[i] = self.c.shape[i]
            self._stride_bytes[i] = self.c.strides[i] * item
        self._buffer_error = None
        try:
            buf.buf = _host_data(self)
        except MtlinvError as e:
            self._buffer_error = (type(e), e.args)
            raise
        buf.len = self.c.nbytes()
        buf.readonly = self.readonly
        buf.format = fmt if (flags & PyBUF_FORMAT) else NULL
        # What the request asks for (PEP 3118): without PyBUF_ND, plain bytes (ndim 1, no shape, as
        # PyBuffer_FillInfo gives); without PyBUF_STRIDES, no strides (the memory is C-contiguous).
        if flags & PyBUF_ND:
            buf.itemsize = item
            buf.ndim = nd
            buf.shape = self._shape_bytes
        else:
            buf.itemsize = 1
            buf.ndim = 1
            buf.shape = NULL
        buf.strides = NULL
        if (flags & PyBUF_STRIDES) == PyBUF_STRIDES:
            buf.strides = self._stride_bytes
        buf.suboffsets = NULL
        buf.internal = NULL
        buf.obj = self

    def __releasebuffer__(self, Py_buffer* buf):
        pass

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule sharing this Tensor's memory, host or CUDA (torch.from_dlpack(t), ...). `stream` needs
        no handshake (CUDA memory is exported once the device has finished the work queued before); the capsule is
        DLPack's unversioned kind, which every consumer accepts whatever its max_version."""
        self._require_storage("__dlpack__")
        return _to_dlpack(self, dl_device, copy)

    def __dlpack_device__(self):
        self._require_storage("__dlpack_device__")
        return _dlpack_device(self)

    @property
    def __cuda_array_interface__(self):
        """For CUDA memory (CuPy, Numba, torch.as_tensor); AttributeError on other devices."""
        self._require_storage("__cuda_array_interface__")
        return _cuda_array_interface(self)

    def __repr__(self):
        return f"mtlinv.Tensor(shape={self.shape}, dtype={self.dtype})"


cdef Tensor _wrap(CTensor& c):
    """A new Tensor holding c, moved (c is left empty): every op's result passes through here, and a copy would
    allocate its shape and strides again."""
    cdef Tensor t = Tensor.__new__(Tensor)
    t.c = move(c)
    return t


cdef object _host_array(obj, dtype, str op, str name, bint for_kernels):
    """obj as an ndarray in the machine's byte order: the one conversion route of every array argument (asarray,
    the ops' operands, tile_weights, the mtlinv.quant helpers). A producer that only speaks DLPack (np.asarray
    would make it a 0-d object array) is read through np.from_dlpack, which takes host memory only. Without
    `dtype`, what NumPy reads as float64 from anything but an ndarray (Python lists, tuples and floats) becomes
    float32, the widest dtype the kernels take; a float64 ndarray stays float64, for the caller to refuse. With
    `for_kernels`, an array that must be copied (a broadcast or strided view, a byte-swapped array) has its
    dimensions checked against the kernels' limit first: a copy of 2^32 rows would fail for memory before the
    core could refuse the shape. A contiguous array goes to the core uncopied, whose checks name the op's
    dimension (B, N, K ...). Errors name `op: name`."""
    a = np.asarray(obj)
    where = f"{op}: {name}" if name else op
    if a.dtype == object and a.ndim == 0:
        if hasattr(obj, "__dlpack__"):
            try:
                a = np.from_dlpack(obj)
            except Exception as e:
                raise InvalidArgumentError(f"{where} ({type(obj).__name__}) cannot be read through DLPack: {e}; "
                                           "mtlinv takes arrays in host memory: copy it to the host first") from None
        elif hasattr(obj, "__cuda_array_interface__"):
            raise InvalidArgumentError(f"{where} ({type(obj).__name__}) is CUDA memory; mtlinv takes arrays in host "
                                       "memory (or DLPack from the host): copy it to the host first")
    if for_kernels and not (a.flags.c_contiguous and a.dtype.isnative):
        for i, d in enumerate(a.shape):
            if d > _MAX_DIM:
                raise InvalidArgumentError(f"{where} has shape {a.shape}: dimension {i} = {d} is out of range for "
                                           f"the kernels (at most 2^32 - 1)")
    if dtype is not None:
        a = np.asarray(a, dtype=dtype)
    elif a.dtype == np.float64 and not isinstance(obj, np.ndarray):
        a = a.astype(np.float32)
    if not a.dtype.isnative:  # '>f2' on a little-endian machine: the kernels read native values
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def _to_host_array(obj, str what, str name):
    """_host_array for the pure-Python helpers (mtlinv.quant): obj as a native-order ndarray, lists and scalars as
    float32."""
    return _host_array(obj, None, what, name, False)


def asarray(obj, dtype=None):
    """A Tensor with the contents of `obj` (an ndarray, anything np.asarray or np.from_dlpack accepts, or a Tensor).
    Shares the memory of a contiguous ndarray in native byte order on host-visible devices (like np.asarray);
    otherwise copies. Python lists and scalars become float32 (as in the ops), unless `dtype` says otherwise."""
    if isinstance(obj, Tensor):
        if dtype is None or np.dtype(dtype) == obj.dtype:
            return obj
        obj = obj.numpy()
    a = _host_array(obj, dtype, "asarray", None, False)
    if a.dtype not in _NUMPY_TO_DTYPE:
        names = ", ".join(str(d) for d in _NUMPY_TO_DTYPE)
        raise DTypeError(f"asarray: dtype {a.dtype} is not supported (supported: {names})")
    return _from_host_array(a)


cdef Tensor _from_host_array(a):
    """A Tensor of ndarray `a` (native byte order, a supported dtype): its memory where the device can wrap it."""
    if not a.flags.c_contiguous:
        a = np.array(a, order="C")  # (np.ascontiguousarray would turn a 0-d array into shape (1,))
    cdef vector[int64_t] shape = a.shape
    cdef vector[int64_t] strides = [s // a.itemsize for s in a.strides]
    cdef CDType dt = _NUMPY_TO_DTYPE[a.dtype]
    cdef void* data = cnp.PyArray_DATA(a)
    cdef Tensor t = Tensor.__new__(Tensor)
    t.c = CTensor.from_host(data, shape, strides, dt)
    if t.c.storage.get().host == data:
        t.keepalive = a
        t.readonly = not a.flags.writeable
    return t


cdef Tensor _operand(obj, str name, str op):
    """An op's argument as a Tensor, with the op and argument named in any error."""
    if isinstance(obj, Tensor):
        (<Tensor>obj)._require_storage(op, name)
        return obj
    try:
        a = _host_array(obj, None, op, name, True)
    except MtlinvError:
        raise
    except Exception as e:
        raise InvalidArgumentError(f"{op}: {name} cannot be converted to an array: {e}") from None
    if a.dtype not in _NUMPY_TO_DTYPE:
        raise DTypeError(f"{op}: {name} has dtype {a.dtype}; expected float32, float16 or bfloat16")
    return _from_host_array(a)
