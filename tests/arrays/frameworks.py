"""The array libraries the interchange tests exchange arrays with, each reduced to the same few operations, so that
one test covers every (library, dtype, direction). A library that is not installed is skipped by name."""
import ml_dtypes
import numpy as np
import pytest

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}


class Framework:
    """make(ndarray) -> the library's array (a copy); read(array) -> ndarray of the same dtype; write(array, v) sets
    element 0 in place through the library, or None where its arrays are immutable; export(Tensor) -> the
    library's array of a Tensor, by the route that library's users take; export_shares: whether that route can
    share memory (False: the library copies, documented in docs/arrays.md)."""
    name = ""
    export_shares = True
    write = None


class NumPy(Framework):
    name = "numpy"

    def make(self, a):
        return a.copy()

    def read(self, x):
        return np.asarray(x)

    def write(self, x, value):
        x.reshape(-1)[0] = value

    def export(self, t):
        return np.asarray(t)  # the buffer protocol, or __array__ for bfloat16 (no PEP 3118 format)


class Torch(Framework):
    name = "torch"

    def __init__(self):
        self.torch = pytest.importorskip("torch")
        self.dtypes = {"float32": self.torch.float32, "float16": self.torch.float16, "bfloat16": self.torch.bfloat16}

    def make(self, a):
        return self.torch.tensor(a.astype(np.float32)).to(self.dtypes[a.dtype.name])

    def read(self, x):
        return x.float().numpy().astype(DTYPES_BY_NAME[str(x.dtype).split(".")[-1]])

    def write(self, x, value):
        x.view(-1)[0] = float(value)

    def export(self, t):
        return self.torch.from_dlpack(t)


class MLX(Framework):
    name = "mlx"
    export_shares = False  # mx.from_dlpack: "Cannot import a CPU array without a copy" (MLX 0.32, CPU build)

    def __init__(self):
        self.mx = pytest.importorskip("mlx.core")

    def make(self, a):
        x = self.mx.array(a)
        self.mx.eval(x)
        return x

    def read(self, x):
        return np.array(x.astype(self.mx.float32)).astype(DTYPES_BY_NAME[str(x.dtype).split(".")[-1]])

    def write(self, x, value):
        # MLX arrays have no in-place writes; their buffer (format 'bfloat16' for bfloat16) is MLX's own memory.
        view = memoryview(x)
        dtype = DTYPES_BY_NAME[str(x.dtype).split(".")[-1]]
        np.frombuffer(view.cast("B"), dtype)[0] = value

    def export(self, t):
        return self.mx.from_dlpack(t)


class JAX(Framework):
    name = "jax"

    def __init__(self):
        self.jnp = pytest.importorskip("jax.numpy")

    def make(self, a):
        return self.jnp.asarray(a)

    def read(self, x):
        return np.asarray(x)

    def export(self, t):
        return self.jnp.from_dlpack(t)


DTYPES_BY_NAME = {d.name: d for d in DTYPES.values()}
FRAMEWORKS = {f.name: f for f in (NumPy, Torch, MLX, JAX)}
