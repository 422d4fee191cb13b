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


def qk_rms_norm(x, q_heads, kv_heads, q_weight, k_weight, eps=1e-6):
    """The per-head RMS norms of a q|k|v projection's output before RoPE (Qwen 3's q_norm and k_norm): x
    [L, q_heads + 2 kv_heads, D] or [L, (q_heads + 2 kv_heads) * D]; each query head's D values normed with
    q_weight [D], each key head's with k_weight [D] (rms_norm's bits for those rows), value heads copied. Same shape
    as x."""
    cdef str op = "qk_rms_norm"
    cdef list pending = []
    cdef Tensor tx = _operand(x, "x", op, pending)
    cdef Tensor tq = _operand(q_weight, "q_weight", op, pending)
    cdef Tensor tk = _operand(k_weight, "k_weight", op, pending)
    cdef int64_t n_q = _int_arg(op, "q_heads", q_heads, 1, 2**31)
    cdef int64_t n_kv = _int_arg(op, "kv_heads", kv_heads, 1, 2**31)
    cdef double eps_d = _real_arg(op, "eps", eps)
    cdef CTensor out
    if pending:
        with _checks_first(pending), nogil:
            c_qk_rms_norm(tx.c, n_q, n_kv, tq.c, tk.c, eps_d)
    with nogil:
        out = c_qk_rms_norm(tx.c, n_q, n_kv, tq.c, tk.c, eps_d)
    return _wrap(out)
