# The ops. Each converts its arguments (naming them in errors), releases the GIL for the native call, and returns
# a Tensor.


def rms_norm(x, weight, eps=1e-6):
    """y = x * rsqrt(mean(x**2, axis=-1) + eps) * weight. x [..., C], weight [C]; float32/float16/bfloat16; eps >= 0
    and finite in float32."""
    cdef Tensor tx = _operand(x, "x", "rms_norm")
    cdef Tensor tw = _operand(weight, "weight", "rms_norm")
    cdef double eps_d = _real_arg("rms_norm", "eps", eps)
    cdef CTensor out
    with nogil:
        out = c_rms_norm(tx.c, tw.c, eps_d)
    return _wrap(out)
