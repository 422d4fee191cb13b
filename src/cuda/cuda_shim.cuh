// The CUDA target's metal_stdlib: what the kernels under metal/ use of MSL, in CUDA C++17, for the code that
// tools/msl2cpp.py --target cuda generates (it includes this header first, then the kernels inside namespace
// MTLINV_VARIANT_NS, cu_kernels unless the build says otherwise). The same API as the emulator's
// src/emu/msl_shim.h:
//
//   shim/scalar.cuh  uint, ushort, uchar, ulong, half, bfloat, as_type
//   shim/vec.cuh     float4, half2, packed_float3, ... and their operators, dot, all, any
//   shim/math.cuh    fma, exp, sqrt, rsqrt, max, clamp, select, isnan, ...; numeric_limits; HALF_MAX, M_PI_F, ...
//   shim/mma.cuh     simd_mma_16x8x32 on the tensor cores (metal/mma.h has the builtin's contract)
//   shim/pair16.cuh  pair16_add, pair16_fma, ... as single instructions (metal/pair16.h has the contract)
//   shim/sdpa.cuh    sdpa_weight and sdpa_max as single instructions (metal/sdpa_keys.h has the contract)
//   shim/simd.cuh    mem_flags, threadgroup_barrier, simdgroup_barrier, simd_* (warp shuffles)
//   shim/device.cuh  cu::KernelCtx, cu::bind_device / bind_constant / attr, MTLINV_KERNEL
// scalar.cuh, vec.cuh and math.cuh hold only what is CUDA's own (the 16-bit conversions over __half and
// __nv_bfloat16, the whole-vector load, the IEEE math bindings) and include the rest from src/shim/, the
// target-independent part shared with the emulator's shim.
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
#include "shim/mma.cuh"
#include "shim/pair16.cuh"
#include "shim/scalar.cuh"
#include "shim/sdpa.cuh"
#include "shim/simd.cuh"
#include "shim/vec.cuh"
#include "../shim/names.h"

// CUDA declares float4, uint2, half, ... at global scope, so the kernels' namespace names cu_msl's types too.
#define MTLINV_CU_OTHER_NAMES(X) \
  MTLINV_SHIM_OTHER_NAMES(X) X(mem_flags) X(is_vec) X(uint) X(ushort) X(uchar) X(ulong) X(half) X(bfloat) \
  X(simd_mma_16x8x32) X(pair16_add) X(pair16_fma) \
  X(pair16_and_or) X(pair16_interleave) X(sdpa_weight) X(sdpa_max)
// Every vector name: float2 ... packed_bool4.
#define MTLINV_CU_VEC_USING(name)                                                                 \
  using ::cu_msl::name##2; using ::cu_msl::name##3; using ::cu_msl::name##4;                        \
  using ::cu_msl::packed_##name##2; using ::cu_msl::packed_##name##3; using ::cu_msl::packed_##name##4;
#define MTLINV_CU_USING(name) using ::cu_msl::name;

namespace cu_msl {
// On CUDA, too, the precise and fast variants are both the precise (IEEE) functions: canonical kernels depend on
// it, and the others lose little.
namespace precise {
MTLINV_SHIM_MATH_NAMES(MTLINV_CU_USING)
}
namespace fast {
MTLINV_SHIM_MATH_NAMES(MTLINV_CU_USING)
}
}  // namespace cu_msl

#ifndef MTLINV_VARIANT_NS
#define MTLINV_VARIANT_NS cu_kernels
#endif

namespace MTLINV_VARIANT_NS {
MTLINV_SHIM_MATH_NAMES(MTLINV_CU_USING)
MTLINV_CU_OTHER_NAMES(MTLINV_CU_USING)
MTLINV_SHIM_VEC_ELEMENTS(MTLINV_CU_VEC_USING)
namespace metal = ::cu_msl;
namespace precise = ::cu_msl::precise;
namespace fast = ::cu_msl::fast;
}  // namespace MTLINV_VARIANT_NS
