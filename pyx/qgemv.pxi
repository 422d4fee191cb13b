# qgemv: the quantized matmul op (MLX's affine format), its extern declarations and its plan introspection.

QGEMV_SUPER_K = kQgemvSuperK  # K positions a pair of supers covers (metal/qgemv_args.h's QGEMV_SUPER)


def qgemv(x, wq, scales, biases, *, group_size, bits, bias=None, supers=None, constant_weights=False):
    """y = x @ W.T (+ bias) for a weight W [N, K] quantized in MLX's affine format (mtlinv.quant.quantize):
    wq uint32 [N, K*bits/32], scales and biases [N, K/group_size] in x's dtype (or, for lossless GGUF imports,
    float32 with 16-bit x at bits 4 or 8, or float16 with bfloat16 x at bits 4, 5 or 8 and group_size 32 and up),
    W = scales * q + biases per group.
    x is [K] or [..., M, K], float32/float16/bfloat16; bits 2, 3, 4, 5, 6 or 8; group_size 32, 64 or 128, or 16
    with bits 8 (GGUF's Q6_K, imported exactly: mtlinv.gguf_kquants).
    The weights are dequantised in float32 exactly as mtlinv.quant.dequantize_float32 does (scale * q, rounded,
    plus bias), accumulation is float32, the output has x's dtype. On devices with matrix units
    (device_info()["matrix_units"]: CUDA), 16-bit x meets each weight in x's dtype T: T(scale * q + bias), rounded
    once, with scales of x's dtype; the float32 weight rounded to T with scales of another dtype.
    There the weights may also come in the tile layout of mtlinv.quant.tile (wq [N/16, ceil(K/128), 16, 4*bits],
    scales and biases [N/16, K/group_size, 16]; bits 4 or 8, or a super-block format below; 16-bit x): at or below
    the limit the same bits, read in whole blocks.
    The super-block form (GGUF's Q4_K, Q5_K and Q6_K at their own bytes: mtlinv.gguf_kquants.to_super): scales and
    biases int8 codes [N, K/group_size] and supers float32 [N, K/256, 2] (tile layout [N/16, K/256, 16, 2]); a
    group's scale is supers[n, k // 256, 0] * code and its bias supers[n, k // 256, 1] * code, each rounded to
    float32, then W as above (mtlinv.quant.dequantize_float32 of mtlinv.quant.expand_supers' scales and biases).
    Bits 4 or 5 at group_size 32, bits 6 at group_size 16; K a multiple of 256.

    With M <= get_limit() rows (and always for M == 1) each output row is bit-identical to the call on that row
    alone; above the limit a throughput kernel runs.

    constant_weights=True promises that no kernel that may still be running when this call's kernel starts (on CUDA
    the one queued right before it) writes wq, scales, biases or supers, as between a model's own ops: with tiled
    weights and up to 8 rows the kernel then loads its first weights while that kernel finishes (a decoder step
    2-4% faster on an H100). The bits are the same; a broken promise gives wrong results."""
    for name, value in (("group_size", group_size), ("bits", bits)):
        if isinstance(value, type(True)) or not isinstance(value, (int, np.integer)) or not 0 < value < 2**16:
            raise InvalidArgumentError(f"qgemv: {name}={value!r} is not supported; bits in 2, 3, 4, 5, 6, 8 and "
                                       f"group_size in 16 (bits 8), 32, 64, 128")
    cdef list pending = []
    cdef Tensor tx = _operand(x, "x", "qgemv", pending)
    if not isinstance(wq, Tensor):
        wq_array = _host_view(wq, "qgemv: wq")
        if not (wq_array.dtype.kind == "u" and wq_array.dtype.itemsize == 4):  # uint32, in either byte order
            raise DTypeError(f"qgemv: wq has dtype {wq_array.dtype}; expected uint32 (packed quantized weights, "
                             f"as mtlinv.quant.quantize returns them)")
        wq = wq_array
    cdef Tensor twq = _operand(wq, "wq", "qgemv", pending)
    cdef Tensor ts = _operand(scales, "scales", "qgemv", pending)
    cdef Tensor tbs = _operand(biases, "biases", "qgemv", pending)
    cdef Tensor tb, tf
    cdef const CTensor* pb = NULL
    cdef const CTensor* pf = NULL
    if bias is not None:
        tb = _operand(bias, "bias", "qgemv", pending)
        pb = &tb.c
    if supers is not None:
        tf = _operand(supers, "supers", "qgemv", pending)
        pf = &tf.c
    cdef CTensor out
    cdef int c_group_size = group_size, c_bits = bits
    cdef bint c_constant = _bool_arg("qgemv", "constant_weights", constant_weights)
    cdef CContextLimit limit_scope
    limit_scope.open(_context_limit())
    if pending:
        with _checks_first(pending), nogil:
            c_qgemv(tx.c, twq.c, ts.c, tbs.c, pb, c_group_size, c_bits, NULL, pf, c_constant)
    with nogil:
        out = c_qgemv(tx.c, twq.c, ts.c, tbs.c, pb, c_group_size, c_bits, NULL, pf, c_constant)
    return _wrap(out)


def plan_qgemv(*, rows, k, n, group_size=64, bits=4, dtype="float32", scale_dtype=None, limit=None, bias=False,
               tiled=False, constant_weights=False):
    """The plan qgemv would use for this shape: {'canonical': bool, 'launches': [...]}. constant_weights: as the
    decoder's projections promise (src/core/ops/qgemv.h)."""
    cdef CQGemvShape s
    s.rows, s.k, s.n = rows, k, n
    s.group_size, s.bits = group_size, bits
    s.dtype = dtype_from_name(np.dtype(dtype).name.encode())
    s.scale_dtype = s.dtype if scale_dtype is None else dtype_from_name(np.dtype(scale_dtype).name.encode())
    s.has_bias = bias
    s.aligned = True
    s.w_aligned = True
    s.tiled = tiled
    s.constant_weights = constant_weights
    c_check_qgemv_operands(s, c_active_backend().caps())  # as the op does: a plan expects validated operands
    cdef CPlan p = c_plan_qgemv(s, get_limit() if limit is None else limit, c_active_backend().caps())
    return {"canonical": p.canonical, "launches": _launches(p)}
