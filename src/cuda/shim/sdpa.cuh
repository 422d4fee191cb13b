// metal/sdpa_keys.h's softmax helpers as single instructions, on the contract stated there.
#pragma once
#include <cmath>

#define MTLINV_TARGET_SDPA_SOFTMAX 1

namespace cu_msl {

// One MUFU.EX2 where the portable form compiles to seven or eight: CUDA's exp2f is that instruction alone for
// x >= -126 (below, it halves x and squares the result, to reach the subnormals), and a weight is 0 below -125.
// So the bits are exp2f's, the portable form's on this target. `.ftz` flushes only subnormal operands, whose 2^x
// rounds to 1 either way.
__device__ __forceinline__ float sdpa_weight(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return x < -125.0f ? 0.0f : r;
}

// FMNMX, where the shim's max is a compare, a NaN test and a select: its NaN rule is MSL's, and of two zeros of
// opposite signs it returns +0, which sdpa_keys.h allows.
__device__ __forceinline__ float sdpa_max(float a, float b) {
  return fmaxf(a, b);
}

}  // namespace cu_msl
