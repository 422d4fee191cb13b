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
    np.dtype(np.int8): CDType.i8,
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
    if t == CDType.i8:
        return "b"
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
        if (flags & PyBUF_WRITABLE) and self.tensor.readonly:
            raise BufferError("this Tensor wraps a read-only array")
        _byte_buffer(buf, flags, self, _host_data(self.tensor), self.tensor.c.nbytes(), self.tensor.readonly)

    def __releasebuffer__(self, Py_buffer* buf):
        pass


cdef void _byte_buffer(Py_buffer* buf, int flags, object owner, void* start, Py_ssize_t length, bint readonly):
    """Fills `buf` as a 1-D byte buffer of `owner`'s memory [start, start + length): what np.frombuffer and
    np.ndarray(buffer=...) view (a Tensor's bytes, a DLPack capsule's)."""
    buf.buf = start
    buf.len = length
    buf.readonly = readonly
    buf.itemsize = 1
    buf.format = NULL
    if flags & PyBUF_FORMAT:
        buf.format = "B"
    buf.ndim = 1
    buf.shape = NULL
    buf.strides = NULL
    buf.suboffsets = NULL
    buf.internal = NULL
    buf.obj = owner


# no_gc_clear: the garbage collector must not drop `keepalive` before `c` (see __dealloc__); the ndarray it holds
# refers to no Tensor, so it closes no cycle.
@cython.no_gc_clear
cdef class Tensor:
    """A tensor on the active mtlinv device. Make one with mtlinv.asarray(ndarray); ops return them."""
    cdef CTensor c
    cdef object keepalive      # the ndarray whose memory a zero-copy Tensor views
    cdef readonly bint readonly
    cdef Py_ssize_t[8] _shape_bytes, _stride_bytes
    # (class, args) of the error a wait raised in __getbuffer__, for __array_interface__ and __array__ to raise again:
    # NumPy asks for the buffer first, drops whatever error that raises, and asks them, whose waits would have
    # nothing to report.
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

    cdef _raise_buffer_error(self):
        """Raises (once) the error a wait in __getbuffer__ raised, which NumPy dropped before asking the
        interfaces below."""
        error, self._buffer_error = self._buffer_error, None
        if error is not None:
            raise error[0](*error[1])

    def __array__(self, dtype=None, copy=None):
        self._raise_buffer_error()
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
        """A DLPack capsule sharing this Tensor's memory, host or CUDA (torch.from_dlpack(t), mx.from_dlpack(t),
        jax.numpy.from_dlpack(t) ...): versioned (read-only flag, copy=True) for a consumer whose max_version is
        (1, 0) or newer, else the legacy kind. `stream` needs no handshake: memory is exported once the device
        has finished the work queued before, so it is complete on any stream of the consumer's."""
        self._require_storage("__dlpack__")
        return _to_dlpack(self, max_version, dl_device, copy)

    def __dlpack_device__(self):
        self._require_storage("__dlpack_device__")
        return _dlpack_device(self)

    @property
    def __array_interface__(self):
        """NumPy's array interface, for host-visible float32/float16 and integer Tensors (AttributeError else)."""
        self._require_storage("__array_interface__")
        self._raise_buffer_error()
        return _array_interface(self)

    @property
    def __cuda_array_interface__(self):
        """For CUDA memory (CuPy, Numba, torch.as_tensor); AttributeError on other devices."""
        self._require_storage("__cuda_array_interface__")
        return _cuda_array_interface(self)

    @property
    def device(self):
        """The backend whose memory holds this Tensor: 'emu', 'metal' or 'cuda'."""
        return c_active_backend().caps().backend.decode()

    def __repr__(self):
        flags = ", read-only" if self.readonly else ""
        return (f"mtlinv.Tensor(shape={self.shape}, dtype={np.dtype(self.dtype).name}, device={self.device!r}"
                f"{flags})")

    # What a Tensor is not: an array library. It holds an op's operands and results; indexing, arithmetic and
    # iteration belong to NumPy (t.numpy(), zero-copy on host-visible memory) or to mtlinv's ops (mtlinv.add ...).
    def _not_supported(self, what):
        raise TypeError(f"mtlinv.Tensor has no {what}: use t.numpy() (zero-copy on host-visible memory) for "
                        "NumPy's, or mtlinv's ops (add, gemv, ...)")

    def __getitem__(self, key):
        self._not_supported("indexing")

    def __setitem__(self, key, value):
        self._not_supported("indexing")

    def __iter__(self):
        self._not_supported("iteration")

    def __add__(self, other):
        self._not_supported("arithmetic")

    def __radd__(self, other):
        self._not_supported("arithmetic")

    def __sub__(self, other):
        self._not_supported("arithmetic")

    def __rsub__(self, other):
        self._not_supported("arithmetic")

    def __mul__(self, other):
        self._not_supported("arithmetic")

    def __rmul__(self, other):
        self._not_supported("arithmetic")

    def __truediv__(self, other):
        self._not_supported("arithmetic")

    def __rtruediv__(self, other):
        self._not_supported("arithmetic")

    def __matmul__(self, other):
        self._not_supported("arithmetic")

    def __rmatmul__(self, other):
        self._not_supported("arithmetic")


cdef Tensor _wrap(CTensor& c):
    """A new Tensor holding c, moved (c is left empty): every op's result passes through here, and a copy would
    allocate its shape and strides again."""
    cdef Tensor t = Tensor.__new__(Tensor)
    t.c = move(c)
    return t


cdef Tensor _from_host_array(a):
    """A Tensor of ndarray `a` (a supported dtype; made contiguous and native first): its memory where the device
    can wrap it."""
    a = _native(a)
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


