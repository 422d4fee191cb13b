#pragma once
#include "../tensor.h"

namespace mtlinv {

// y = x * rsqrt(mean(x^2, axis=-1) + eps) * weight; x [..., C], weight [C], one dtype.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);

}  // namespace mtlinv
