// The MSL names every target defines, as lists for the using-declarations that bring them into the kernels'
// namespace (src/emu/msl_shim.h and src/cuda/cuda_shim.cuh say why by using-declarations). A function missing
// from these lists would silently find the C library's double version at global scope, so a kernel needing a new
// builtin adds it to every target and here.
#pragma once

// The math functions, which also make up metal::precise and metal::fast.
#define MTLINV_SHIM_MATH_NAMES(X)                                                                               \
  X(fma) X(exp) X(exp2) X(log) X(log2) X(sqrt) X(rsqrt) X(abs) X(fabs) X(max) X(min) X(fmax) X(fmin) X(clamp) \
  X(select) X(isnan) X(isinf) X(isfinite) X(floor) X(ceil) X(round) X(rint) X(trunc) X(pow) X(sin) X(cos)     \
  X(tanh) X(copysign) X(dot)
// The rest of metal_stdlib that kernels use, and mtlinv's own builtins (metal/common.h).
#define MTLINV_SHIM_OTHER_NAMES(X)                                                                          \
  X(vec) X(all) X(any) X(as_type) X(numeric_limits) X(threadgroup_barrier) X(simdgroup_barrier)             \
  X(simd_shuffle) X(simd_broadcast) X(simd_shuffle_down) X(simd_shuffle_up) X(simd_shuffle_xor)             \
  X(simd_broadcast_first) X(simd_sum) X(simd_max) X(simd_min) X(simd_prefix_inclusive_sum)                  \
  X(simd_prefix_exclusive_sum) X(simd_and) X(simd_or) X(simd_xor) X(simd_all) X(simd_any) X(simd_is_first) \
  X(load_streaming) X(prefetch_l2) X(wait_for_previous_kernels)
