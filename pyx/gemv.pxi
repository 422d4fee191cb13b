# gemv / matmul: the dense matmul op.


def gemv(x, w, bias=None, *, transpose=True):
    """y = x @ w.T (+ bias) for w [N, K] (transpose=True, a linear layer's weight), or y = x @ w for w [K, N]
    (transpose=False). x is [K] or [..., M, K]; a batched w [B, N, K] takes x [B, M, K] or a shared [M, K].
    float32/float16/bfloat16 (one dtype), float32 accumulation, output in the input dtype. On devices with matrix
    units (device_info()["matrix_units"]: CUDA) w [N, K] may also come in the tile layout of mtlinv.tile_weights
    ([N/16, K/32, 16, 32], 16-bit, unbatched): at or below the limit the same bits, read in whole blocks.

    With M <= get_limit() rows (and always for M == 1) each output row is bit-identical to the call on that row
    alone; above the limit a throughput kernel runs."""
    return _gemv(x, w, bias, _bool_arg("gemv", "transpose", transpose), "gemv", "x", "w")


def matmul(a, b):
    """NumPy-style a @ b for a [..., M, K] and b [K, N] (or batched [B, K, N]); see gemv(transpose=False)."""
    return _gemv(a, b, None, False, "matmul", "a", "b")


cdef Tensor _gemv(x, w, bias, bint transpose, str op, str x_name, str w_name):
    """gemv under the names of the op called, so that matmul's errors speak of a and b."""
    cdef list pending = []
    cdef Tensor tx = _operand(x, x_name, op, pending)
    cdef Tensor tw = _operand(w, w_name, op, pending)
    cdef Tensor tb
    cdef const CTensor* pb = NULL
    if bias is not None:
        tb = _operand(bias, "bias", op, pending)
        pb = &tb.c
    cdef bytes op_b = _c_name(op), x_b = _c_name(x_name), w_b = _c_name(w_name)
    cdef CGemvNames names
    names.op = op_b
    names.x = x_b
    names.w = w_b
    cdef CTensor out
    cdef CContextLimit limit_scope
    limit_scope.open(_context_limit())
    if pending:
        with _checks_first(pending), nogil:
            c_gemv(tx.c, tw.c, pb, transpose, names)
    with nogil:
        out = c_gemv(tx.c, tw.c, pb, transpose, names)
    return _wrap(out)


def plan_gemv(*, rows, k, n, dtype="float32", limit=None, transpose=True, batch=1, bias=False, tiled=False):
    """The plan gemv would use for this shape: {'canonical': bool, 'launches': [...]}."""
    cdef CGemvShape s
    s.batch, s.rows, s.k, s.n = batch, rows, k, n
    s.dtype = dtype_from_name(np.dtype(dtype).name.encode())
    s.w_kn = not transpose
    s.has_bias = bias
    s.w_batched = batch > 1
    s.aligned = True
    s.tiled = tiled
    c_check_gemv_operands(s, c_active_backend().caps())  # as the op does: a plan expects validated operands
    cdef CPlan p = c_plan_gemv(s, get_limit() if limit is None else limit, c_active_backend().caps())
    return {"canonical": p.canonical, "launches": _launches(p)}
