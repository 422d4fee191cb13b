# The limit from Python: the process value (set_limit) and the scopes of batch_invariant (mtlinv/limits.py). A
# scope is a context variable, so each thread and each asyncio task has its own; every op that reads the limit
# carries its calling context's scope into its C++ call (pyx/context_limit.h).
from contextvars import ContextVar

from cpython.contextvars cimport get_value


cdef object _limit_scope = ContextVar("mtlinv.batch_invariant", default=None)


cdef inline int _context_limit() except? -2:
    """The calling context's innermost batch_invariant limit, or -1 outside every scope."""
    cdef object limit = get_value(_limit_scope)
    return -1 if limit is None else limit


def get_limit():
    """The batch-invariance limit of the calling context: its innermost batch_invariant scope, else the process
    value. Calls with M <= limit rows take the canonical kernels."""
    cdef int scoped = _context_limit()
    return c_get_limit() if scoped < 0 else scoped


def set_limit(n):
    """Sets the process value of the limit (n in [0, 2^30]) and returns the previous one. A batch_invariant scope
    of the calling context still overrides it until the scope ends."""
    return c_set_limit(_int_arg("set_limit", "limit", n, 0, 2**30))


def _init_limit_from_env():
    c_init_limit_from_env()


def _enter_limit_scope(limit):
    """Opens a batch_invariant scope in the calling context; returns the token that _exit_limit_scope takes."""
    return _limit_scope.set(_int_arg("batch_invariant", "limit", limit, 0, 2**30))


def _exit_limit_scope(token):
    _limit_scope.reset(token)
