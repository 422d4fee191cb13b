#pragma once
#include <cstdint>

#include "../tensor.h"

namespace mtlinv {

struct SdpaOptions {
  bool causal = true;
  bool has_scale = false;   // false: scale = 1 / sqrt(D)
  double scale = 1.0;     // double, so that the check of scale * log2(e) against float32 sees the caller's value
  bool has_kv_len = false;  // false: kv_len = C, every key of k and v
  int64_t kv_len = 0;
  // out as [B, Lq, Hq * D] ([Lq, Hq * D] for a 3-d q): each query's heads side by side, the rows an output
  // projection takes, written by the last kernel itself. The bits are heads_to_rows of the default layout's.
  bool rows_out = false;
};

// Scaled dot-product attention, softmax(scale * q k^T) v with float32 softmax and accumulation. q [B, Hq, Lq, D];
// k and v [B, Hkv, C, D] with Hq % Hkv == 0 (GQA), of which the first kv_len <= C keys are valid (a preallocated
// KV cache needs no copy); or q [Hq, Lq, D] with k and v [Hkv, C, D], as B = 1. Causal: query i sits at absolute
// position kv_len - Lq + i and sees keys 0 .. that position. D in {64, 80, 96, 128, 256}; float32, float16 or
// bfloat16, one dtype; out has q's shape (or [B, Lq, Hq * D] with rows_out).
// Lq <= get_limit() (and Lq == 1 always) takes the canonical kernels: query i's bits equal those of a
// single-query call over the first kv_len - Lq + i + 1 keys (causal), or over the same keys (not causal).
// `out`, when given, is the result's memory (ops/checks.h, result_tensor).
Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options,
            const Tensor* out = nullptr);

}  // namespace mtlinv
