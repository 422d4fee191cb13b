// The CUDA target's metal_stdlib: what the kernels under metal/ use of MSL, in CUDA C++17, for the code that
// tools/msl2cpp.py --target cuda generates (it includes this header first, then the kernels inside namespace
// MTLINV_VARIANT_NS, cu_kernels unless the build says otherwise). The same API as the emulator's
// src/emu/msl_shim.h:
//
//   shim/scalar.cuh  uint, ushort, uchar, ulong, half, bfloat, as_type
//   shim/vec.cuh     float4, half2, packed_float3, ... and their operators, dot, all, any
//   shim/math.cuh    fma, exp, sqrt, rsqrt, max, clamp, select, isnan, ...; numeric_limits; HALF_MAX, M_PI_F, ...
//   shim/simd.cuh    mem_flags, threadgroup_barrier, simdgroup_barrier, simd_* (warp shuffles)
//   shim/device.cuh  cu::KernelCtx, cu::bind_device / bind_constant / attr, MTLINV_KERNEL
//
// Types and functions live in namespace cu_msl (with cu_msl::precise and cu_msl::fast) and are brought into the
// kernels' namespace by using-declarations: CUDA declares float4, uint2, max, fma, ... at global scope, and a
// using-declaration in the kernels' namespace hides those instead of competing with them. There, `metal` is an
// alias of cu_msl, for kernels that write metal::precise::exp. Not `namespace metal` itself: the emulator's shim
// defines templates of the same names there, and both are linked into one library (one definition rule).
//
// Unlike the emulator's shim, this one defines no keyword macros: the pre-pass erases MSL's address spaces itself,
// because CUDA's __device__ and __constant__ expand through the tokens `device` and `constant`.
#pragma once
// CUDA's own `half` typedef (of __half) would only add confusion next to cu_msl::half.
#ifndef CUDA_NO_HALF
#define CUDA_NO_HALF
#endif

#include "launch.h"
#include "shim/device.cuh"
#include "shim/math.cuh"
#include "shim/scalar.cuh"
#include "shim/simd.cuh"
#include "shim/vec.cuh"

#define MTLINV_CU_MATH_NAMES(X)                                                                                 \
  X(fma) X(exp) X(exp2) X(log) X(log2) X(sqrt) X(rsqrt) X(abs) X(fabs) X(max) X(min) X(fmax) X(fmin) X(clamp) \
  X(select) X(isnan) X(isinf) X(isfinite) X(floor) X(ceil) X(round) X(rint) X(trunc) X(pow) X(sin) X(cos)     \
  X(tanh) X(copysign) X(dot)
#define MTLINV_CU_OTHER_NAMES(X)                                                                                \
  X(all) X(any) X(as_type) X(numeric_limits) X(threadgroup_barrier) X(simdgroup_barrier) X(simd_shuffle)       \
  X(simd_broadcast) X(simd_shuffle_down) X(simd_shuffle_up) X(simd_shuffle_xor) X(simd_broadcast_first)        \
  X(simd_sum) X(simd_max) X(simd_min) X(simd_prefix_inclusive_sum) X(simd_prefix_exclusive_sum) X(simd_and)    \
  X(simd_or) X(simd_xor) X(simd_all) X(simd_any) X(simd_is_first) X(mem_flags) X(vec) X(is_vec)              \
  X(uint) X(ushort) X(uchar) X(ulong) X(half) X(bfloat)
// Every vector name: float2 ... packed_bool4.
#define MTLINV_CU_VEC_USING(name)                                                                 \
  using ::cu_msl::name##2; using ::cu_msl::name##3; using ::cu_msl::name##4;                        \
  using ::cu_msl::packed_##name##2; using ::cu_msl::packed_##name##3; using ::cu_msl::packed_##name##4;
#define MTLINV_CU_VEC_ELEMENTS(X) X(float) X(half) X(bfloat) X(int) X(uint) X(short) X(ushort) X(char) X(uchar) X(bool)
#define MTLINV_CU_USING(name) using ::cu_msl::name;

namespace cu_msl {
// On CUDA, too, the precise and fast variants are both the precise (IEEE) functions: canonical kernels depend on
// it, and the others lose little.
namespace precise {
MTLINV_CU_MATH_NAMES(MTLINV_CU_USING)
}
namespace fast {
MTLINV_CU_MATH_NAMES(MTLINV_CU_USING)
}
}  // namespace cu_msl

#ifndef MTLINV_VARIANT_NS
#define MTLINV_VARIANT_NS cu_kernels
#endif

namespace MTLINV_VARIANT_NS {
MTLINV_CU_MATH_NAMES(MTLINV_CU_USING)
MTLINV_CU_OTHER_NAMES(MTLINV_CU_USING)
MTLINV_CU_VEC_ELEMENTS(MTLINV_CU_VEC_USING)
namespace metal = ::cu_msl;
namespace precise = ::cu_msl::precise;
namespace fast = ::cu_msl::fast;
}  // namespace MTLINV_VARIANT_NS
