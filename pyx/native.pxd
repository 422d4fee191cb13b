# Extern declarations of the C++ core; C++ types are prefixed C so the Python names stay free.
from libc.stdint cimport int64_t, uint8_t, uint32_t, uintptr_t
from libcpp cimport bool
from libcpp.memory cimport shared_ptr
from libcpp.optional cimport optional
from libcpp.string cimport string
from libcpp.utility cimport pair
from libcpp.vector cimport vector
from cpython.ref cimport PyObject

cdef extern from "../pyx/error_bridge.h" namespace "mtlinv_py":
    cdef cppclass CErrorClasses "mtlinv_py::ErrorClasses":
        PyObject* invalid_argument
        PyObject* dtype
        PyObject* device
        PyObject* kernel
        PyObject* memory
        PyObject* base
        PyObject* checks_passed
    CErrorClasses& error_classes()
    void raise_py_error()

cdef extern from "../src/core/dtype.h" namespace "mtlinv":
    cdef enum class CDType "mtlinv::DType":
        f32 "mtlinv::DType::f32"
        f16 "mtlinv::DType::f16"
        bf16 "mtlinv::DType::bf16"
        u32 "mtlinv::DType::u32"
        i32 "mtlinv::DType::i32"
        u8 "mtlinv::DType::u8"
        i8 "mtlinv::DType::i8"
    size_t dtype_size(CDType)
    const char* dtype_name(CDType)
    CDType dtype_from_name(const string&) except +raise_py_error

cdef extern from "../src/core/kernel_id.h" namespace "mtlinv":
    cdef cppclass CKernelId "mtlinv::KernelId":
        pass
    size_t c_kernel_table_size "mtlinv::kernel_table_size"()
    CKernelId c_kernel_at "mtlinv::kernel_at"(size_t)
    const char* c_kernel_name "mtlinv::kernel_name"(CKernelId)

cdef extern from "../src/core/backend.h" namespace "mtlinv":
    cdef cppclass CStorage "mtlinv::Storage":
        void* host
        void* device
        size_t bytes
    cdef cppclass CDeviceCaps "mtlinv::DeviceCaps":
        string backend
        string name
        uint32_t simd_width
        uint32_t max_threads_per_threadgroup
        uint32_t threadgroup_memory_bytes
        uint32_t compute_units
        bool bfloat
        bool matrix_units
        bool overlapped_launches
        string gpu_family
    cdef cppclass CKernelSource "mtlinv::Backend::KernelSource":
        string origin
        optional[double] load_seconds
        string fallback
    cdef cppclass CDim3 "mtlinv::Dim3":
        uint32_t x, y, z
    cdef cppclass CBackend "mtlinv::Backend":
        const CDeviceCaps& caps()
        vector[string] kernel_names()
        CKernelSource kernel_source() except +raise_py_error
        void synchronize() except +raise_py_error nogil
        void wait_for_stream(uintptr_t) except +raise_py_error
    CBackend& c_active_backend "mtlinv::active_backend"() except +raise_py_error
    const string& c_backend_fallback "mtlinv::backend_fallback"() except +raise_py_error
    vector[string] c_built_backends "mtlinv::built_backends"()

cdef extern from "../src/core/tensor.h" namespace "mtlinv":
    cdef cppclass CTensor "mtlinv::Tensor":
        CTensor()
        CDType dtype
        vector[int64_t] shape
        vector[int64_t] strides
        shared_ptr[CStorage] storage
        size_t offset
        int64_t numel()
        size_t nbytes()
        void* host_address()
        void* host_data() except +raise_py_error nogil
        void download(void*, size_t, const char*) except +raise_py_error nogil
        CTensor reshape(const vector[int64_t]&) except +raise_py_error
        @staticmethod
        CTensor empty(const vector[int64_t]&, CDType) except +raise_py_error
        @staticmethod
        CTensor shape_only(const vector[int64_t]&, CDType) except +raise_py_error
        @staticmethod
        CTensor from_host(void*, const vector[int64_t]&, const vector[int64_t]&, CDType) except +raise_py_error
        @staticmethod
        CTensor from_device(void*, const vector[int64_t]&, const vector[int64_t]&, CDType) except +raise_py_error

cdef extern from "../src/core/checks_only.h" namespace "mtlinv":
    cdef cppclass CChecksOnlyScope "mtlinv::ChecksOnlyScope":
        CChecksOnlyScope()

cdef extern from "../src/core/limit.h" namespace "mtlinv":
    int c_get_limit "mtlinv::get_limit"() except +raise_py_error
    int c_set_limit "mtlinv::set_limit"(int) except +raise_py_error
    void c_init_limit_from_env "mtlinv::init_limit_from_env"() except +raise_py_error

cdef extern from "../src/core/plan.h" namespace "mtlinv":
    cdef enum CPlanBufferKind "mtlinv::PlanBuffer::Kind":
        c_plan_buffer_none "mtlinv::PlanBuffer::none"
        c_plan_buffer_operand "mtlinv::PlanBuffer::operand"
        c_plan_buffer_scratch "mtlinv::PlanBuffer::scratch"
    cdef cppclass CPlanBuffer "mtlinv::PlanBuffer":
        CPlanBufferKind kind
        int index
    cdef cppclass CPlanLaunch "mtlinv::PlanLaunch":
        CKernelId kernel
        CDim3 threadgroups
        CDim3 threads_per_threadgroup
        const vector[uint8_t]& args()
        vector[CPlanBuffer] buffers
    cdef cppclass CPlan "mtlinv::Plan":
        vector[CPlanLaunch] launches
        vector[size_t] scratch_bytes
        bool canonical

cdef extern from "../pyx/context_limit.h" namespace "mtlinv_py":
    cdef cppclass CContextLimit "mtlinv_py::ContextLimit":
        void open(int) except +raise_py_error

cdef extern from "../src/core/ops/checks.h" namespace "mtlinv":
    const int64_t c_max_dim "mtlinv::kMaxDim"  # every dimension's limit: the kernels count in 32 bits

cdef extern from "../include/mtlinv/version.h":
    int MTLINV_VERSION_MAJOR, MTLINV_VERSION_MINOR, MTLINV_VERSION_PATCH
