#pragma once
#include <utility>

#include "../tensor.h"

namespace mtlinv {

// y = x * rsqrt(mean(x^2, axis=-1) + eps) * weight; x [..., C], weight [C], one dtype.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// (s, y) with s = x + residual (add's bits) and y = rms_norm(s, weight, eps) (rms_norm's bits), in one launch: a
// decoder's residual add and the norm after it.
std::pair<Tensor, Tensor> add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps);

}  // namespace mtlinv
