"""The C API (include/mtlinv/mtlinv.h) through ctypes: one table of the functions' signatures, so a function added
to the header is one line here, and helpers that turn a status into an exception carrying mtlinv_last_error()."""
import ctypes

import numpy as np

OK, INVALID_ARGUMENT, DTYPE, DEVICE, KERNEL, OUT_OF_MEMORY, INTERNAL = range(7)
FLOAT32, FLOAT16, BFLOAT16, UINT32, INT32, INT8 = range(6)
DTYPES = {np.dtype(np.float32): FLOAT32, np.dtype(np.float16): FLOAT16, np.dtype(np.uint32): UINT32,
          np.dtype(np.int32): INT32, np.dtype(np.int8): INT8}

T = ctypes.c_void_p           # const mtlinv_tensor*
TP = ctypes.POINTER(T)        # mtlinv_tensor**
I64, I64P = ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
c_int, c_float, c_size, c_void_p = ctypes.c_int, ctypes.c_float, ctypes.c_size_t, ctypes.c_void_p
status = ctypes.c_int

# name: (return type, argument types), in the header's order.
SIGNATURES = {
    "mtlinv_last_error": (ctypes.c_char_p, []),
    "mtlinv_set_limit": (status, [c_int, ctypes.POINTER(c_int)]),
    "mtlinv_get_limit": (c_int, []),
    "mtlinv_push_limit": (status, [c_int]),
    "mtlinv_pop_limit": (status, []),
    "mtlinv_device_name": (status, [ctypes.c_char_p, c_size]),
    "mtlinv_synchronize": (status, []),
    "mtlinv_tensor_from_host": (status, [c_void_p, I64P, c_int, c_int, TP]),
    "mtlinv_tensor_to_host": (status, [T, c_void_p, c_size]),
    "mtlinv_tensor_ndim": (c_int, [T]),
    "mtlinv_tensor_dim": (I64, [T, c_int]),
    "mtlinv_tensor_nbytes": (c_size, [T]),
    "mtlinv_tensor_free": (None, [T]),
    "mtlinv_gemv": (status, [T, T, T, c_int, TP]),
    "mtlinv_qgemv": (status, [T, T, T, T, T, c_int, c_int, TP]),
    "mtlinv_qgemv_super": (status, [T, T, T, T, T, T, c_int, c_int, TP]),
    "mtlinv_tiled_weight_elements": (status, [I64, I64, I64P]),
    "mtlinv_tile_weights": (status, [c_void_p, c_int, I64, I64, c_void_p]),
    "mtlinv_quant_tiled_words": (status, [I64, I64, c_int, c_int, I64P]),
    "mtlinv_quant_tile": (status, [c_void_p, c_void_p, c_void_p, c_int, I64, I64, c_int, c_int, c_void_p, c_void_p,
                                   c_void_p]),
    "mtlinv_sdpa": (status, [T, T, T, c_int, I64, c_float, TP]),
    "mtlinv_rms_norm": (status, [T, T, c_float, TP]),
    "mtlinv_tensor_dtype": (status, [T, ctypes.POINTER(c_int)]),
}


class CError(Exception):
    def __init__(self, code, message):
        super().__init__(f"status {code}: {message}")
        self.code, self.message = code, message


class Library:
    def __init__(self, path):
        self.lib = ctypes.CDLL(str(path))
        for name, (restype, argtypes) in SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = restype, argtypes
            if name != "mtlinv_last_error":  # last_error() below decodes it
                setattr(self, name[len("mtlinv_"):], fn)

    def last_error(self):
        return self.lib.mtlinv_last_error().decode()

    def check(self, code):
        """code, unless an error: then CError with the message (which must be there)."""
        if code != OK:
            raise CError(code, self.last_error())
        return code

    def call(self, fn, *args):
        """A function that returns a tensor through its last argument: the tensor, or CError. On an error the
        output must be left as it was (the header's promise), which is checked here."""
        sentinel = 0x5EED
        out = T(sentinel)
        code = fn(*args, ctypes.byref(out))
        if code != OK:
            assert out.value == sentinel, f"{fn.__name__}: *out changed on error ({code})"
            raise CError(code, self.last_error())
        return Tensor(self, out)

    def tensor(self, a, dtype=None):
        a = np.ascontiguousarray(a)
        shape = (I64 * max(a.ndim, 1))(*a.shape)
        return self.call(self.tensor_from_host, a.ctypes.data, shape, a.ndim, DTYPES[a.dtype] if dtype is None
                         else dtype)


class Tensor:
    """A tensor the library made, freed with the Python object (never used after: undefined behaviour)."""

    def __init__(self, library, handle):
        self.library, self.handle = library, handle
        self._as_parameter_ = handle  # ctypes passes the handle where a function takes the tensor

    def numpy(self, dtype):
        lib = self.library
        shape = [lib.tensor_dim(self.handle, i) for i in range(lib.tensor_ndim(self.handle))]
        out = np.empty(shape, dtype)
        lib.check(lib.tensor_to_host(self.handle, out.ctypes.data, out.nbytes))
        return out

    def __del__(self):
        self.library.tensor_free(self.handle)
