# Extern declarations of the core's hooks for tests and `mtlinv check` (src/core/testing.h and the counters): the
# emulator is reached through them alone.
from libc.stdint cimport uint32_t, uint64_t
from libcpp cimport bool
from libcpp.string cimport string
from libcpp.utility cimport pair
from libcpp.vector cimport vector

from native cimport *

cdef extern from "../src/core/testing.h" namespace "mtlinv":
    void c_launch_raw "mtlinv::launch_raw"(const string&, CDim3, CDim3, const string&,
                                           const vector[CTensor]&) except +raise_py_error nogil
    pair[string, string] c_choose_auto_backend_refused_by "mtlinv::choose_auto_backend_refused_by"(
        const vector[string]&) except +raise_py_error
    cdef cppclass CEmulatorSwitches "mtlinv::EmulatorSwitches":
        void (*set_gpu_plans)(bool, bool) except +raise_py_error
        void (*set_check_mode)(bool, uint64_t)
        bool (*check_mode)()
        void (*set_flush_subnormals)(bool)
        bool (*flush_subnormals)()
    const CEmulatorSwitches& c_emulator_switches "mtlinv::emulator_switches"() except +raise_py_error

cdef extern from "../src/core/run_plan.h" namespace "mtlinv":
    cdef cppclass CRunCounts "mtlinv::RunCounts":
        uint64_t plans, launches
    CRunCounts c_run_counts "mtlinv::run_counts"()

cdef extern from "../src/core/launch_batch.h" namespace "mtlinv":
    cdef cppclass CBatchCounts "mtlinv::Backend::BatchCounts":
        uint64_t batches, builds, updates, kernels
    bint c_set_launch_batches "mtlinv::set_launch_batches"(bint)
    CBatchCounts c_launch_batch_counts "mtlinv::launch_batch_counts"() except +raise_py_error

cdef extern from "../src/core/grid_pieces.h" namespace "mtlinv":
    cdef cppclass CPieceLimit "mtlinv::PieceLimit":
        uint32_t y, z
    CPieceLimit c_set_piece_limit "mtlinv::set_piece_limit"(CPieceLimit) except +raise_py_error
