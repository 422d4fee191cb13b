// Which keys a query sees, and the weight a seen key gets: shared by the sdpa kernels (metal/sdpa.metal,
// metal/sdpa_mma.metal).
#pragma once
#include "common.h"
#include "sdpa_args.h"

// The softmax weight 2^x of a score x below the maximum it is weighed against (a key's score below its query's
// running maximum, or a partial maximum below the merged one): 0 where 2^x < 2^-125. Every weight is then 0 or a
// normal float32 (exp2 is within a few ulp, so at least 2^-126 at x = -125), never a subnormal, which a GPU may
// flush to zero or keep as it pleases (the Metal Shading Language allows either): the bits do not depend on which.
// A weight that small counted for less than 2^-125 of the maximum's weight of 1, which every sum of weights holds.
//
// sdpa_max: the larger of two scores or maxima, a NaN operand yielding the other (MSL's fmax rule). Of two zeros of
// opposite signs either may come back: a maximum reaches the results only through sdpa_weight of a difference with
// it, and 2^(+0) = 2^(-0), so no result depends on that sign.
//
// The CUDA shim replaces both with single instructions (src/cuda/shim/sdpa.cuh, which defines
// MTLINV_TARGET_SDPA_SOFTMAX), where nvcc made 3 of each max and 7 or 8 of each weight (docs/decisions.md, "sdpa:
// the softmax's instructions").
#if !defined(MTLINV_TARGET_SDPA_SOFTMAX)
inline float sdpa_weight(float x) {
  return x < -125.0f ? 0.0f : exp2(x);
}
inline float sdpa_max(float a, float b) {
  return max(a, b);
}
#endif

// The last key query i of the block sees (the op guarantees q_len <= kv_len for causal attention).
inline uint sdpa_last_key(constant SdpaArgs& args, uint i) {
  return args.causal != 0 ? args.kv_len - args.q_len + i : args.kv_len - 1;
}
