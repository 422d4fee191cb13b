# The ops. Each converts its arguments (naming them in errors), releases the GIL for the native call, and returns
# a Tensor.


def rms_norm(x, weight, eps=1e-6):
    """y = x * rsqrt(mean(x**2, axis=-1) + eps) * weight. x [..., C], weight [C]; float32/float16/bfloat16; eps >= 0
    and finite in float32."""
    cdef list pending = []
    cdef Tensor tx = _operand(x, "x", "rms_norm", pending)
    cdef Tensor tw = _operand(weight, "weight", "rms_norm", pending)
    cdef double eps_d = _real_arg("rms_norm", "eps", eps)
    cdef CTensor out
    if pending:
        with _checks_first(pending), nogil:
            c_rms_norm(tx.c, tw.c, eps_d)
    with nogil:
        out = c_rms_norm(tx.c, tw.c, eps_d)
    return _wrap(out)


def add_rms_norm(x, residual, weight, eps=1e-6):
    """(s, y): s = x + residual and y = rms_norm(s, weight, eps), with the bits of add and rms_norm, in one launch
    (a decoder's residual add and the norm after it). x and residual [..., C] of one shape, weight [C]."""
    cdef list pending = []
    cdef Tensor tx = _operand(x, "x", "add_rms_norm", pending)
    cdef Tensor tr = _operand(residual, "residual", "add_rms_norm", pending)
    cdef Tensor tw = _operand(weight, "weight", "add_rms_norm", pending)
    cdef double eps_d = _real_arg("add_rms_norm", "eps", eps)
    cdef pair[CTensor, CTensor] out
    if pending:
        with _checks_first(pending), nogil:
            c_add_rms_norm(tx.c, tr.c, tw.c, eps_d)
    with nogil:
        out = c_add_rms_norm(tx.c, tr.c, tw.c, eps_d)
    return _wrap(out.first), _wrap(out.second)
