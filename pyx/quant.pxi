# MLX's affine quantisation on the host, by the C++ core (src/core/quant.h): the work behind mtlinv.quant, which
# checks the Python arguments and shapes and calls these with C-contiguous numpy arrays. (The module compiles with
# wraparound=False: shape[ndim - 1], never shape[-1].)

cdef extern from "../src/core/quant.h" namespace "mtlinv" nogil:
    void c_quantize "mtlinv::quantize"(const void*, CDType, int64_t, int64_t, int, int, uint32_t*, void*,
                                       void*) except +raise_py_error
    void c_dequantize "mtlinv::dequantize"(const uint32_t*, const void*, const void*, CDType, int64_t, int64_t, int,
                                           int, void*) except +raise_py_error
    void c_dequantize_float32 "mtlinv::dequantize_float32"(const uint32_t*, const void*, const void*, CDType,
                                                           int64_t, int64_t, int, int, float*) except +raise_py_error
    void c_pack_bits "mtlinv::pack_bits"(const uint8_t*, int64_t, int64_t, int, uint32_t*) except +raise_py_error
    void c_unpack_bits "mtlinv::unpack_bits"(const uint32_t*, int64_t, int64_t, int, uint8_t*) except +raise_py_error


cdef CDType _float_dtype(a):
    return dtype_from_name(a.dtype.name.encode())


def _quantize(w, int group_size, int bits):
    """w (numpy, float32/float16/bfloat16, [..., K], C-contiguous) -> (wq [..., K*bits/32], scales, biases
    [..., K/group_size] in w's dtype)."""
    cdef int64_t k = w.shape[w.ndim - 1], rows = w.size // k if k else 0
    cdef CDType dtype = _float_dtype(w)
    lead = w.shape[:-1]
    wq = np.empty(lead + (k * bits // 32,), np.uint32)
    scales = np.empty(lead + (k // group_size,), w.dtype)
    biases = np.empty_like(scales)
    cdef const void* src = _host_address(w)
    cdef uint32_t* dst = <uint32_t*><uintptr_t>wq.ctypes.data
    cdef void* s = <void*>_host_address(scales)
    cdef void* b = <void*>_host_address(biases)
    with nogil:
        c_quantize(src, dtype, rows, k, group_size, bits, dst, s, b)
    return wq, scales, biases


def _dequantize(wq, scales, biases, int group_size, int bits, bint float32):
    """wq [..., K*bits/32] uint32, scales and biases [..., K/group_size] (C-contiguous) -> [..., K] in the scales'
    dtype, or float32 when `float32`."""
    cdef int64_t words = wq.shape[wq.ndim - 1], rows = wq.size // words if words else 0
    cdef int64_t k = words * 32 // bits
    cdef CDType dtype = _float_dtype(scales)
    out = np.empty(wq.shape[:-1] + (k,), np.float32 if float32 else scales.dtype)
    cdef const uint32_t* q = <const uint32_t*><uintptr_t>wq.ctypes.data
    cdef const void* s = _host_address(scales)
    cdef const void* b = _host_address(biases)
    cdef void* o = <void*>_host_address(out)
    with nogil:
        if float32:
            c_dequantize_float32(q, s, b, dtype, rows, k, group_size, bits, <float*>o)
        else:
            c_dequantize(q, s, b, dtype, rows, k, group_size, bits, o)
    return out


def _pack(q, int bits):
    """q uint8 [..., K] (C-contiguous) -> uint32 [..., K*bits/32]."""
    cdef int64_t k = q.shape[q.ndim - 1], rows = q.size // k if k else 0
    wq = np.empty(q.shape[:-1] + (k * bits // 32,), np.uint32)
    c_pack_bits(<const uint8_t*><uintptr_t>q.ctypes.data, rows, k, bits, <uint32_t*><uintptr_t>wq.ctypes.data)
    return wq


def _unpack(wq, int bits, int64_t k):
    """uint32 [..., k*bits/32] (C-contiguous) -> uint8 [..., k]."""
    cdef int64_t words = wq.shape[wq.ndim - 1], rows = wq.size // words if words else 0
    q = np.empty(wq.shape[:-1] + (k,), np.uint8)
    c_unpack_bits(<const uint32_t*><uintptr_t>wq.ctypes.data, rows, k, bits, <uint8_t*><uintptr_t>q.ctypes.data)
    return q
