# sdpa: the attention op, its extern declarations and its plan introspection.

def sdpa(q, k, v, *, scale=None, causal=True, kv_len=None, rows_out=False):
    """Scaled dot-product attention: softmax(scale * q @ k.T) @ v, float32 softmax and accumulation.

    q [B, Hq, Lq, D]; k, v [B, Hkv, C, D] with Hq a multiple of Hkv (GQA, MQA); or, for one sequence, q [Hq, Lq, D]
    with k, v [Hkv, C, D] (the same as B = 1). Only the first kv_len keys are
    used (default: all C), so a preallocated KV cache needs no copy. causal: query i sits at absolute position
    kv_len - Lq + i and sees keys 0 .. that position. scale=None means 1/sqrt(D); any other finite value, 0 and
    negatives included, is used as given (the C API instead reads scale <= 0 as the default), as long as
    scale * log2(e) is a finite float32 (the kernels' softmax is exp2 of scaled scores; scores whose product with
    it passes float32's range overflow, as any float32 arithmetic does).
    D in {64, 80, 96, 128, 256}; float32, float16 or bfloat16 (one dtype); the output has q's shape and dtype, or
    with rows_out=True [B, Lq, Hq * D] ([Lq, Hq * D] for a 3-d q): each query's heads side by side, the rows an
    output projection takes, with the bits of heads_to_rows of the default output and no copy.

    With Lq <= get_limit() (and always for Lq == 1) query i's output is bit-identical to a single-query call over
    the first kv_len - Lq + i + 1 keys (causal) or the same keys (not causal); above the limit a throughput
    kernel runs."""
    cdef list pending = []
    cdef Tensor tq = _operand(q, "q", "sdpa", pending)
    cdef Tensor tk = _operand(k, "k", "sdpa", pending)
    cdef Tensor tv = _operand(v, "v", "sdpa", pending)
    cdef CSdpaOptions o
    o.causal = _bool_arg("sdpa", "causal", causal)
    o.has_scale = scale is not None
    o.scale = _real_arg("sdpa", "scale", scale) if scale is not None else 1.0  # the core checks its range
    o.has_kv_len = kv_len is not None
    # The core checks kv_len against the cache (1 <= kv_len <= C); this range only keeps it an int64.
    o.kv_len = _int_arg("sdpa", "kv_len", kv_len, -2**62, 2**62) if kv_len is not None else 0
    o.rows_out = _bool_arg("sdpa", "rows_out", rows_out)
    cdef CTensor out
    cdef CContextLimit limit_scope
    limit_scope.open(_context_limit())
    if pending:
        with _checks_first(pending), nogil:
            c_sdpa(tq.c, tk.c, tv.c, o)
    with nogil:
        out = c_sdpa(tq.c, tk.c, tv.c, o)
    return _wrap(out)


def sdpa_chunking(head_dim, dtype="float32"):
    """(block_keys, tier_keys): the chunks of the canonical sdpa path on the active device, at absolute key positions.
    tier_keys 0: chunk c holds keys [c*S, (c+1)*S), S = block_keys; else chunks grow past tier_keys (sdpa_chunks)."""
    cdef CSdpaChunking c = c_sdpa_chunking(head_dim, dtype_from_name(np.dtype(dtype).name.encode()),
                                           c_active_backend().caps())
    return c.block_keys, c.tier_keys


def sdpa_chunks(block_keys, tier_keys, kv_len):
    """[(first key, keys)] of the chunks covering keys 0 .. kv_len - 1 under (block_keys, tier_keys), as the kernels
    place them (metal/sdpa_args.h)."""
    if (not (0 < block_keys < 2**32 and 0 <= tier_keys < 2**32 and 0 < kv_len < 2**32)
            or (tier_keys and tier_keys % (4 * block_keys))):
        raise InvalidArgumentError(f"sdpa_chunks: need 0 < block_keys < 2**32, 0 < kv_len < 2**32 (as plan_sdpa) and "
                                   f"tier_keys 0 or a multiple of 4 block_keys below 2**32; got block_keys="
                                   f"{block_keys}, tier_keys={tier_keys}, kv_len={kv_len}")
    return [(first, keys) for first, keys in c_sdpa_chunks(block_keys, tier_keys, kv_len)]


def plan_sdpa(*, q_len, kv_len, head_dim=128, q_heads=1, kv_heads=1, batch=1, capacity=None, dtype="float32",
              causal=True, aligned=True, limit=None):
    """The plan sdpa would use for this shape: {'canonical': bool, 'launches': [...], 'scratch_bytes': [...]}."""
    cdef CSdpaShape s
    s.batch, s.q_heads, s.kv_heads, s.q_len, s.kv_len = batch, q_heads, kv_heads, q_len, kv_len
    s.capacity = kv_len if capacity is None else capacity
    s.head_dim = head_dim
    s.dtype = dtype_from_name(np.dtype(dtype).name.encode())
    s.causal = causal
    s.scale = head_dim ** -0.5
    s.aligned = aligned
    c_check_sdpa_shape(s)  # the op's own checks name its tensors; a plan expects a valid shape
    cdef CPlan p = c_plan_sdpa(s, get_limit() if limit is None else limit, c_active_backend().caps())
    return {"canonical": p.canonical, "launches": _launches(p), "scratch_bytes": list(p.scratch_bytes)}
