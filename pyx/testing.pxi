# Low-level hooks for tests and `mtlinv check`: run a registered kernel by name with raw arguments, and switch the
# emulator's checking mode. Not part of the public API.
from libc.stdint cimport uint64_t


cdef extern from "../src/emu/runtime.h" namespace "emu":
    void c_emu_set_check_mode "emu::set_check_mode"(bool, uint64_t)
    bool c_emu_check_mode "emu::check_mode"()

cdef extern from "../src/emu/backend_emu.h" namespace "mtlinv":
    void c_set_emu_gpu_plans "mtlinv::set_emu_gpu_plans"(bool) except +raise_py_error

cdef extern from "../src/core/testing.h" namespace "mtlinv":
    void c_launch_raw "mtlinv::launch_raw"(const string&, CDim3, CDim3, const string&,
                                           const vector[CTensor]&) except +raise_py_error nogil


def _set_emu_check(bint on, uint64_t seed=0):
    """Turns the emulator's checking mode on or off (random fiber order, double runs, bounds checks)."""
    c_emu_set_check_mode(on, seed)


def _set_emu_gpu_plans(bint on):
    """Emulator only: plan as for a GPU (several K splits, wide threadgroups), so tests run those code paths."""
    c_set_emu_gpu_plans(on)


def _emu_check_mode():
    return c_emu_check_mode()


def _launch(str kernel, threadgroups, threads, bytes args, buffers):
    """Runs `kernel` once: [[buffer(0)]] = `args`, [[buffer(i+1)]] = buffers[i] (Tensors)."""
    cdef CDim3 grid, block
    grid.x, grid.y, grid.z = (tuple(threadgroups) + (1, 1))[:3]
    block.x, block.y, block.z = (tuple(threads) + (1, 1))[:3]
    cdef vector[CTensor] tensors
    for b in buffers:
        if (<Tensor?>b).readonly:
            raise InvalidArgumentError("launch: a buffer wraps a read-only array")
        tensors.push_back((<Tensor?>b).c)
    cdef string name = kernel.encode()
    cdef string raw = args
    with nogil:
        c_launch_raw(name, grid, block, raw, tensors)
