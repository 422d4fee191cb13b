#pragma once
#include <cstdint>
#include <utility>

#include "../tensor.h"

namespace mtlinv {

// y = x * rsqrt(mean(x^2, axis=-1) + eps) * weight; x [..., C], weight [C], one dtype.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// (s, y) with s = x + residual (add's bits) and y = rms_norm(s, weight, eps) (rms_norm's bits), in one launch: a
// decoder's residual add and the norm after it.
std::pair<Tensor, Tensor> add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps);

// The per-head RMS norms of a q|k|v projection's output before RoPE (Qwen 3's q_norm and k_norm): x
// [L, q_heads + 2 kv_heads, D] (or the projection's own [L, (q_heads + 2 kv_heads) * D]), query heads normed with
// q_weight [D], key heads with k_weight [D] (each head's row with rms_norm's bits), value heads copied; same shape.
Tensor qk_rms_norm(const Tensor& x, int64_t q_heads, int64_t kv_heads, const Tensor& q_weight, const Tensor& k_weight,
                   double eps);

}  // namespace mtlinv
