# Plan introspection for tests and tools: which kernels a call would run, without running them.


cdef dict _slots(CPlanLaunch& launch):
    # {slot: ("operand" | "scratch", index)} for every slot the launch binds ([[buffer(slot)]]).
    slots = {}
    for slot in range(launch.buffers.size()):
        if launch.buffers[slot].kind != c_plan_buffer_none:
            kind = "operand" if launch.buffers[slot].kind == c_plan_buffer_operand else "scratch"
            slots[slot] = (kind, launch.buffers[slot].index)
    return slots


cdef list _launches(CPlan& plan):
    # args: the kernel's argument struct ([[buffer(0)]], metal/args.h), as bytes; slots: _slots.
    return [{"kernel": c_kernel_name(l.kernel).decode(),
             "threadgroups": (l.threadgroups.x, l.threadgroups.y, l.threadgroups.z),
             "threads": (l.threads_per_threadgroup.x, l.threads_per_threadgroup.y, l.threads_per_threadgroup.z),
             "args": bytes(bytearray(l.args())), "slots": _slots(l)} for l in plan.launches]


def plan_buffers(launch, operands, scratch=()):
    """The buffers of `launch` (one of a plan's 'launches') as _launch takes them, slot 1 first: operands[i] and
    scratch[i] where the plan binds them, None in the slots it leaves empty. `operands` are the op's, in its order."""
    slots = launch["slots"]
    return [None if s not in slots else (operands if slots[s][0] == "operand" else scratch)[slots[s][1]]
            for s in range(1, max(slots, default=0) + 1)]


def kernel_table():
    """The library's kernels in the order of their ids: the table generated from metal/*.metal at build time."""
    return [c_kernel_name(c_kernel_at(i)).decode() for i in range(c_kernel_table_size())]


def plan_rms_norm(*, rows, cols, dtype="float32", residual=False):
    """The plan rms_norm (add_rms_norm with residual) would use: {'canonical': True, 'launches': [...]}."""
    cdef CPlan p = c_plan_rms_norm(rows, cols, dtype_from_name(np.dtype(dtype).name.encode()), 1e-6,
                                   c_active_backend().caps(), residual)
    return {"canonical": p.canonical, "launches": _launches(p)}


def plan_decoder_ops(*, dtype="float32"):
    """The plans of the per-element decoder ops (metal/decoder_ops.metal) and qk_rms_norm at a small shape, by op name:
    {op: {'canonical': True, 'launches': [...]}}. Their kernels depend on the dtype alone."""
    cdef CDType t = dtype_from_name(np.dtype(dtype).name.encode())
    cdef CPlan p
    plans = {}
    for op in ("add", "swiglu", "swiglu_halves", "rope_to_heads", "rows_to_heads", "qkv_to_heads",
               "qkv_to_heads_freqs", "heads_to_rows", "gather_rows", "qk_rms_norm"):
        if op == "add":
            p = c_plan_add(t, 64)
        elif op == "swiglu":
            p = c_plan_swiglu(t, 64)
        elif op == "swiglu_halves":
            p = c_plan_swiglu_halves(t, 2, 32)
        elif op in ("rope_to_heads", "rows_to_heads"):
            p = c_plan_to_heads(op == "rope_to_heads", t, 2, 4, 64, 8, 0, 0, 10000.0)
        elif op in ("qkv_to_heads", "qkv_to_heads_freqs"):
            p = c_plan_qkv_to_heads(t, 2, 4, 2, 64, 8, 0, 0, 10000.0, op == "qkv_to_heads_freqs")
        elif op == "qk_rms_norm":
            p = c_plan_qk_rms_norm(2, 4, 2, 64, t, 1e-6, c_active_backend().caps())
        elif op == "heads_to_rows":
            p = c_plan_heads_to_rows(t, 2, 4, 64)
        else:
            p = c_plan_gather_rows(t, 2, 10, 64)
        plans[op] = {"canonical": p.canonical, "launches": _launches(p)}
    return plans
