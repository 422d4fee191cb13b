# The exception hierarchy: each class derives from MtlinvError and from the fitting builtin, so callers may catch
# either. C++ exceptions are mapped onto these by error_bridge.h.


class MtlinvError(Exception):
    """Base class of every mtlinv error."""


class InvalidArgumentError(MtlinvError, ValueError):
    """A bad shape, value or limit."""


class DTypeError(MtlinvError, TypeError):
    """An unsupported dtype or operands of different dtypes."""


class DeviceError(MtlinvError, RuntimeError):
    """No device, a backend that is not built, or a failed device command."""


class KernelError(MtlinvError, RuntimeError):
    """A kernel faulted (emulator checks: out-of-range access, divergence, data race; CUDA/Metal errors)."""


class OutOfMemoryError(MtlinvError, MemoryError):
    """A device allocation failed."""


class _ChecksPassed(Exception):
    """An op's checks passed in checks-only mode (src/core/checks_only.h); never seen outside _checks_first."""


cdef CErrorClasses* _classes = &error_classes()
_classes.invalid_argument = <PyObject*>InvalidArgumentError
_classes.dtype = <PyObject*>DTypeError
_classes.device = <PyObject*>DeviceError
_classes.kernel = <PyObject*>KernelError
_classes.memory = <PyObject*>OutOfMemoryError
_classes.base = <PyObject*>MtlinvError
_classes.checks_passed = <PyObject*>_ChecksPassed
