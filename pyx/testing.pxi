# Low-level hooks for tests and `mtlinv check`: run a registered kernel by name with raw arguments, switch the
# emulator's checking and flush-to-zero modes, cut grids into pieces, run MTLINV_DEVICE=auto's choice. Not
# part of the public API.
from libc.stdint cimport uint32_t, uint64_t


def _set_piece_limit(limit):
    """Caps every dispatch at `limit` = (y, z) threadgroups along y and z (each >= 1) on any backend, so that grids
    run in pieces as CUDA runs those past its 65535 threadgroups along y or z; None returns to the backends' own
    limits. Returns the previous cap (None when there was none)."""
    values = (0, 0) if limit is None else tuple(limit)
    if limit is not None and (len(values) != 2 or not all(isinstance(v, int) and 1 <= v < 2**32 for v in values)):
        raise InvalidArgumentError(f"_set_piece_limit: limit must be 2 integers (y, z) in 1..2**32-1 or None, "
                                   f"got {limit!r}")
    cdef CPieceLimit c
    c.y, c.z = values
    cdef CPieceLimit old = c_set_piece_limit(c)
    return None if old.y == 0 else (old.y, old.z)


def _choose_auto_backend(refusals):
    """MTLINV_DEVICE=auto's choice where each preferred backend refuses with one of `refusals` (messages):
    (the backend taken, its fallback reason or None). The warning goes to stderr; the active backend is kept."""
    cdef vector[string] c_refusals = [str(r).encode() for r in refusals]
    cdef pair[string, string] chosen = c_choose_auto_backend_refused_by(c_refusals)
    return chosen.first.decode(), chosen.second.decode() or None


def _run_counts():
    """(plans run, kernels launched) since the process started: a plan is one op call that launched something."""
    cdef CRunCounts c = c_run_counts()
    return c.plans, c.launches


def _set_launch_batches(bint on):
    """Whether the decoder runs each layer's kernels as one launch batch (on CUDA: one graph launch); default on.
    Returns the previous setting. Benchmarks turn it off to time the same forward with a driver call per kernel."""
    return c_set_launch_batches(on)


def _launch_batch_counts():
    """The active backend's launch batches since the process started: a dict of batches (run), builds (batches that
    needed a new graph), updates (kernels changed in a reused graph) and kernels (run in batches). All 0 on the
    emulator, which runs every kernel as it is dispatched."""
    cdef CBatchCounts c = c_launch_batch_counts()
    return {"batches": c.batches, "builds": c.builds, "updates": c.updates, "kernels": c.kernels}


def _set_emu_check(bint on, uint64_t seed=0):
    """Turns the emulator's checking mode on or off (random fiber order, double runs, bounds checks)."""
    c_emulator_switches().set_check_mode(on, seed)


def _set_emu_gpu_plans(bint on, bint matrix_units=True):
    """Emulator only: plan as for a GPU (several K splits, wide threadgroups), with matrix units as CUDA's or without
    as Metal's, so tests run those code paths."""
    c_emulator_switches().set_gpu_plans(on, matrix_units)


def _emu_check_mode():
    return c_emulator_switches().check_mode()


def _set_emu_ftz(bint on):
    """Turns the emulator's flush-to-zero mode on or off (what MTLINV_EMU_FTZ=1 sets at start): the GPU threads of the
    launches after the call flush float32 subnormals to zero, as operands and as results. Returns the previous
    setting."""
    previous = c_emulator_switches().flush_subnormals()
    c_emulator_switches().set_flush_subnormals(on)
    return previous


def _launch(str kernel, threadgroups, threads, bytes args, buffers):
    """Runs `kernel` once: [[buffer(0)]] = `args`, [[buffer(i+1)]] = buffers[i] (Tensors; None leaves the slot empty,
    for a slot of the kernel's family that it does not take)."""
    cdef CDim3 grid, block
    grid.x, grid.y, grid.z = (tuple(threadgroups) + (1, 1))[:3]
    block.x, block.y, block.z = (tuple(threads) + (1, 1))[:3]
    cdef vector[CTensor] tensors
    for b in buffers:
        if b is None:
            tensors.push_back(CTensor())
            continue
        if (<Tensor?>b).readonly:
            raise InvalidArgumentError("launch: a buffer wraps a read-only array")
        tensors.push_back((<Tensor?>b).c)
    cdef string name = kernel.encode()
    cdef string raw = args
    with nogil:
        c_launch_raw(name, grid, block, raw, tensors)
