// The target-independent half of the metal_stdlib shims: what MSL specifies and C++ can say once for both the
// CPU emulator (src/emu/shim) and CUDA (src/cuda/shim), so that the two cannot drift apart.
//
//   scalar.h  the 16-bit storage floats (half, bfloat) over a target's conversions, their operators, as_type
//   vec.h     vec<T, N> with MSL's layout, its operators, all, any, dot; the vector type names
//   math.h    the math functions over a target's C library bindings; numeric_limits; HALF_MAX, M_PI_F, ...
//   names.h   the lists of MSL names the kernels' namespaces bring in
//
// scalar.h, vec.h and math.h are each included only by the target's header of the same name, after the target
// has defined what that one needs (the 16-bit conversions, the vector conversion, the C library bindings: see the
// top of each) and these parameters (src/emu/shim/target.h, src/cuda/shim/target.cuh):
//   MTLINV_SHIM_NS      the namespace of the types and functions: metal on the emulator, cu_msl on CUDA. Distinct,
//                       because both targets' templates are linked into one library (one definition rule).
//   MTLINV_SHIM_FN      the qualifiers of every function: nothing on the emulator (templates and in-class members
//                       need no `inline` to live in a header), __host__ __device__ __forceinline__ on CUDA.
//   MTLINV_SHIM_UNROLL  put before each loop over a vector's elements: CUDA's `#pragma unroll`, or nothing.
// A non-template function at namespace scope is written `MTLINV_SHIM_FN constexpr`: constexpr makes it inline on
// the emulator, where CUDA's __forceinline__ beside an `inline` would be a duplicate specifier.
#pragma once
#if !defined(MTLINV_SHIM_NS) || !defined(MTLINV_SHIM_FN) || !defined(MTLINV_SHIM_UNROLL)
#error "src/shim headers are included through a target's shim (src/emu/msl_shim.h, src/cuda/cuda_shim.cuh)"
#endif

// The C library functions a target binds for math.h, in detail::libm for float and double (see there).
#define MTLINV_SHIM_LIBM_UNARY(X) \
  X(exp) X(exp2) X(log) X(log2) X(sqrt) X(fabs) X(floor) X(ceil) X(round) X(rint) X(trunc) X(sin) X(cos) X(tanh)
#define MTLINV_SHIM_LIBM_BINARY(X) X(pow) X(copysign)
#define MTLINV_SHIM_LIBM_CLASSIFY(X) X(isnan) X(isinf) X(isfinite)
