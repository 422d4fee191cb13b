# The per-element ops of a decoder layer (metal/decoder_ops.metal): used by mtlinv.model to keep a whole forward
# pass on the device.


def add(a, b):
    """a + b elementwise (same shape and dtype)."""
    cdef list pending = []
    cdef Tensor ta = _operand(a, "a", "add", pending), tb = _operand(b, "b", "add", pending)
    cdef CTensor out
    if pending:
        with _checks_first(pending), nogil:
            c_add(ta.c, tb.c)
    with nogil:
        out = c_add(ta.c, tb.c)
    return _wrap(out)


def swiglu(gate, up):
    """silu(gate) * up elementwise, computed in float32."""
    cdef list pending = []
    cdef Tensor tg = _operand(gate, "gate", "swiglu", pending), tu = _operand(up, "up", "swiglu", pending)
    cdef CTensor out
    if pending:
        with _checks_first(pending), nogil:
            c_swiglu(tg.c, tu.c)
    with nogil:
        out = c_swiglu(tg.c, tu.c)
    return _wrap(out)


def swiglu_halves(x):
    """swiglu of the two halves of each row: x [L, 2 F] (a stacked gate|up projection's output) -> [L, F], the
    bits of swiglu(x[:, :F], x[:, F:])."""
    cdef list pending = []
    cdef Tensor tx = _operand(x, "x", "swiglu_halves", pending)
    cdef CTensor out
    if pending:
        with _checks_first(pending), nogil:
            c_swiglu_halves(tx.c)
    with nogil:
        out = c_swiglu_halves(tx.c)
    return _wrap(out)


def write_heads(x, Tensor dst not None, seq_offset, start_pos=0, rotate=False, base=10000.0):
    """Writes x [L, H, D] into dst [H, C, D] (in place) at sequence indices seq_offset.., rotating interleaved
    pairs for positions start_pos.. when `rotate` (RoPE as stored in llama GGUF files)."""
    _write_heads("write_heads", x, dst, seq_offset, start_pos, rotate, base)


def rope_heads(x, start_pos, base=10000.0):
    """RoPE on x [L, H, D] for positions start_pos.., returned as [H, L, D] (the layout sdpa takes)."""
    cdef list pending = []
    cdef Tensor tx = _operand(x, "x", "rope_heads", pending)
    if tx.ndim != 3 or tx.shape[2] % 2:
        raise InvalidArgumentError(f"rope_heads: x must be [L, H, D] with an even D, got {list(tx.shape)}")
    cdef vector[int64_t] out_shape = [tx.shape[1], tx.shape[0], tx.shape[2]]
    if pending:  # the checks with an output of no memory either, before x's copy and the output's allocation
        with _checks_first(pending):
            _write_heads("rope_heads", tx, _wrap(CTensor.shape_only(out_shape, tx.c.dtype)), 0, start_pos, True, base)
    cdef Tensor out = _wrap(CTensor.empty(out_shape, tx.c.dtype))
    _write_heads("rope_heads", tx, out, 0, start_pos, True, base)
    return out


cdef _write_heads(str op, x, Tensor dst, seq_offset, start_pos, rotate, base):
    """write_heads under the name of the op the caller called (rope_heads writes through it)."""
    cdef list pending = []
    cdef Tensor tx = _operand(x, "x", op, pending)
    cdef int64_t offset = _int_arg(op, "seq_offset", seq_offset, 0, 2**62)
    cdef int64_t start = _int_arg(op, "start_pos", start_pos, 0, 2**62)
    cdef bool rot = _bool_arg(op, "rotate", rotate)
    cdef double base_d = _real_arg(op, "base", base)
    cdef bytes op_bytes = _c_name(op)
    cdef const char* op_name = op_bytes
    dst._require_storage(op, "dst")
    if dst.readonly:
        raise InvalidArgumentError(f"{op}: dst wraps a read-only array; it is written in place")
    if pending:
        with _checks_first(pending), nogil:
            c_write_heads(tx.c, dst.c, offset, start, rot, base_d, op_name)
    with nogil:
        c_write_heads(tx.c, dst.c, offset, start, rot, base_d, op_name)


def qkv_to_heads(qkv, q_heads, Tensor k_dst not None, Tensor v_dst not None, seq_offset, start_pos=0, base=10000.0,
                 freqs=None):
    """A fused q|k|v projection's output qkv [L, q_heads + 2 Hkv, D] (or as the projection returns it,
    [L, (q_heads + 2 Hkv) * D]) to where attention reads it: returns the
    queries rotated for positions start_pos.. as [q_heads, L, D], and writes the rotated keys into k_dst and the
    values into v_dst (KV caches [Hkv, C, D], in place) at sequence indices seq_offset... The same bits as
    rope_heads and two write_heads calls, in one launch. freqs: None, or pair j's RoPE frequency for each of the
    D / 2 pairs (real numbers in (0, 1], taken as float32: a scaled RoPE's table, Llama 3's), used instead of
    base^(-2j/D) (base is then unused)."""
    cdef str op = "qkv_to_heads"
    cdef list pending = []
    cdef Tensor tx = _operand(qkv, "qkv", op, pending)
    cdef int64_t n_q = _int_arg(op, "q_heads", q_heads, 1, 2**31)
    cdef int64_t offset = _int_arg(op, "seq_offset", seq_offset, 0, 2**62)
    cdef int64_t start = _int_arg(op, "start_pos", start_pos, 0, 2**62)
    cdef double base_d = _real_arg(op, "base", base)
    for name, dst in (("k_dst", k_dst), ("v_dst", v_dst)):
        dst._require_storage(op, name)
        if dst.readonly:
            raise InvalidArgumentError(f"{op}: {name} wraps a read-only array; it is written in place")
    cdef CTensor c_freqs
    cdef const CTensor* freqs_p = NULL
    if freqs is not None:
        c_freqs = c_rope_freqs(b"qkv_to_heads", b"freqs", _float_vector(op, "freqs", freqs))
        freqs_p = &c_freqs
    cdef CTensor out
    if pending:
        with _checks_first(pending), nogil:
            c_qkv_to_heads(tx.c, n_q, k_dst.c, v_dst.c, offset, start, base_d, freqs_p)
    with nogil:
        out = c_qkv_to_heads(tx.c, n_q, k_dst.c, v_dst.c, offset, start, base_d, freqs_p)
    return _wrap(out)


cdef vector[float] _float_vector(str op, str name, values) except *:
    """A 1-D sequence of real numbers as float32 values (each rounded to the nearest float32), for a table the core
    checks. A finite value float32 cannot hold (it would become inf or 0) is refused here, by the value the caller
    gave; NaN and infinities go on to the core's checks, which name them."""
    a = _host_view(values, f"{op}: {name}", lists_as_float32=False)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iuf"):
        raise InvalidArgumentError(f"{op}: {name} must be a 1-D sequence of real numbers, got {a.dtype} of shape "
                                   f"{a.shape}")
    wide = a.astype(np.float64)
    with np.errstate(over="ignore", under="ignore"):
        narrow = wide.astype(np.float32)
    lost = np.isfinite(wide) & (~np.isfinite(narrow) | ((narrow == 0) & (wide != 0)))
    if lost.any():
        i = int(np.flatnonzero(lost)[0])
        raise InvalidArgumentError(f"{op}: {name}[{i}]={float(wide[i])!r} is outside float32's range")
    cdef vector[float] out
    for v in narrow:
        out.push_back(v)
    return out


def heads_to_rows(x):
    """x [H, L, D] -> [L, H * D]."""
    cdef list pending = []
    cdef Tensor tx = _operand(x, "x", "heads_to_rows", pending)
    cdef CTensor out
    if pending:
        with _checks_first(pending), nogil:
            c_heads_to_rows(tx.c)
    with nogil:
        out = c_heads_to_rows(tx.c)
    return _wrap(out)


def embedding(table, ids):
    """table [V, D], ids [L] (int32) -> table[ids] [L, D]."""
    cdef list pending = []
    cdef Tensor tt = _operand(table, "table", "embedding", pending)
    cdef Tensor ti
    if isinstance(ids, Tensor):
        ti = _operand(ids, "ids", "embedding")
    else:
        a = _host_view(ids, "embedding: ids")
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise DTypeError(f"embedding: ids must be integers, got dtype {a.dtype}")
        # Taken as int32 (the core then checks ids against [0, V)), after the checks of its shape.
        vocab = tt.shape[0]
        ti = _pending_copy(pending, a, CDType.i32, lambda ids: _ids_as_int32(ids, vocab))
    cdef CTensor out
    if pending:
        with _checks_first(pending), nogil:
            c_embedding(tt.c, ti.c)
    with nogil:
        out = c_embedding(tt.c, ti.c)
    return _wrap(out)


def _ids_as_int32(a, vocab):
    """embedding's ids (an integer ndarray) as int32, after the range check the core makes of int32 ids, made here
    on the ids as given: one that int32 cannot hold must not wrap into range. The first id outside [0, V) is named,
    as the core names it."""
    flat = a.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= vocab)) if a.size else flat
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(f"embedding: ids[{i}]={int(flat[i])} is outside [0, {vocab})")
    return np.ascontiguousarray(a.astype(np.int32).reshape(a.shape))
