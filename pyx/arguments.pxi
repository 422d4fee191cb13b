# The ops' scalar arguments, checked before they reach C++. A Cython `int64_t` or `float` parameter would take
# 2.9 as 2, True as 1 and None with a message that names no argument; a `bint` would take None or 'no' by
# truthiness. These name the op and the argument and refuse what is not exactly the kind asked for.

_PY_BOOL = type(True)  # `bool` here is C++'s (libcpp.bool)
_C_NAMES = {}


cdef bytes _c_name(str name):
    """An op's or argument's name as the bytes the core's errors take, encoded once (ops pass them every call)."""
    cdef bytes b = _C_NAMES.get(name)
    if b is None:
        b = _C_NAMES[name] = name.encode()
    return b


cdef _int_arg(str op, str name, value, lo, hi):
    """value as a Python int in [lo, hi]: an int or NumPy integer, not a bool or a float."""
    if isinstance(value, (_PY_BOOL, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(f"{op}: {name} must be an int, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise InvalidArgumentError(f"{op}: {name} must be in [{lo}, {hi}], got {value}")
    return int(value)


cdef bint _bool_arg(str op, str name, value) except -1:
    """value as a bool: True, False or a NumPy bool, nothing that is merely truthy."""
    if not isinstance(value, (_PY_BOOL, np.bool_)):
        raise InvalidArgumentError(f"{op}: {name} must be True or False, got {type(value).__name__} {value!r}")
    return value


cdef double _real_arg(str op, str name, value) except? -1:
    """value as a float: an int, float or NumPy real, not a string or a bool."""
    if isinstance(value, (_PY_BOOL, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(f"{op}: {name} must be a real number, got {type(value).__name__} {value!r}")
    try:
        return float(value)
    except OverflowError:  # an int past a double's range
        raise InvalidArgumentError(f"{op}: {name}={value} is beyond a double's range") from None
