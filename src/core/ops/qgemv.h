#pragma once
#include "../tensor.h"

namespace mtlinv {

// y = x @ W.T (+ bias) with W [N, K] given in MLX's affine quantized format: wq uint32 [N, K * bits / 32] (values
// packed little-endian, value k of a row at bits [k * bits, (k + 1) * bits)), scales and biases [N, K / group_size]
// in x's dtype (or, for GGUF imports, float32 with 16-bit x at bits 4 and 8, float16 with bfloat16 x at bits 4, 5
// and 8 and group sizes 32 and up), W(n, k) = scales[n, k / group_size] * q(n, k) + biases[n, k / group_size],
// dequantised in float32 as mtlinv.quant.dequantize_float32 does. x [K] or [..., M, K] (float32, float16 or bfloat16);
// float32 accumulation, y in x's dtype. bits in {2, 3, 4, 5, 6, 8}, group_size in {32, 64, 128} (and 16 at bits 8:
// GGUF's Q6_K imported exactly). Rows M <= get_limit() (and M == 1 always) take the canonical kernel: each row's bits
// are those of the row alone. bias may be null.
// On a device with matrix units, 16-bit x may instead meet W in the tile layout (wq [N/16, ceil(K/128), 16,
// 4*bits], scales and biases [N/16, K/group_size, 16]; bits 4 or 8 or a super-block format below, N a multiple
// of 16: mtlinv.quant.tile and
// metal/qgemv_mma.metal describe it), which gives the row layout's bits at or below the limit and reads each
// block whole. `out`, when given, is the result's memory (ops/checks.h, result_tensor).
// The super-block form (GGUF's Q4_K, Q5_K and Q6_K at their own bytes: mtlinv.gguf_kquants.to_super): scales and
// biases int8 codes [N, K/group_size], `supers` float32 [N, K/256, 2] (tile layout [N/16, K/256, 16, 2]), and
// scales[n, g] in W(n, k) read as supers[n, k / 256, 0] * scales[n, g], biases[n, g] as supers[n, k / 256, 1] *
// biases[n, g], each product rounded to float32 (metal/quant.h, QuantGroups<char>); bits 4 or 5 at group_size 32,
// bits 6 at group_size 16, K a multiple of 256.
// constant_weights: the caller's promise that no kernel that may still be running when this call's kernel starts
// (on CUDA the one queued right before it) writes wq, scales, biases or supers; true of a model's projections called
// between the model's own ops. The kernel may then read its first weights while the kernel ahead of it still runs
// (plans/qgemv.h, QGemvShape::constant_weights). The bits are the same.
Tensor qgemv(const Tensor& x, const Tensor& wq, const Tensor& scales, const Tensor& biases, const Tensor* bias,
             int group_size, int bits, const Tensor* out = nullptr, const Tensor* supers = nullptr,
             bool constant_weights = false);

}  // namespace mtlinv
