// The extension's functions: mtlinv's gemv, qgemv and sdpa as lazy MLX arrays (primitives.h), for a model's own
// arrays: a linear layer's weight [N, K], MLX's affine-quantized weight (mx.quantize's wq [N, K*bits/32], scales
// and biases [N, K/group_size]), attention's q [B, Hq, Lq, D] and k, v [B, Hkv, L, D]. Calls with M <= limit rows
// (queries) take mtlinv's canonical kernels. Bad arguments raise mtlinv's errors as the graph is built.
#pragma once
#include <optional>

#include "mlx/array.h"

namespace mtlinv_mlx {

namespace mx = mlx::core;

mx::array gemv(const mx::array& x, const mx::array& w, const std::optional<mx::array>& bias, int limit);
mx::array qgemv(const mx::array& x, const mx::array& wq, const mx::array& scales, const mx::array& biases,
                const std::optional<mx::array>& bias, int group_size, int bits, int limit);
mx::array sdpa(const mx::array& q, const mx::array& k, const mx::array& v, std::optional<double> scale, bool causal,
               int limit);

}  // namespace mtlinv_mlx
