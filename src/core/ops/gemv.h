#pragma once
#include "../tensor.h"

namespace mtlinv {

// y = x @ W.T (+ bias) with W [N, K] (transpose=true, a linear layer's weight) or y = x @ W with W [K, N]
// (transpose=false). x [K] or [..., M, K] with a 2-D W; with a batched W [B, ...], x is [B, M, K] or a shared
// [M, K]. With a 2-D W, M counts every row of x (its leading dimensions flattened); with a batched W, the rows
// per batch entry. M <= get_limit() (and M == 1 always) takes the canonical kernel: each row's bits are those of
// the row alone. bias may be null.
Tensor gemv(const Tensor& x, const Tensor& w, const Tensor* bias, bool transpose);

// What errors call the op and its operands: matmul(a, b) is gemv(a, b, transpose=false) under its own names.
struct GemvNames {
  const char* op = "gemv";
  const char* x = "x";
  const char* w = "w";
};
// `out`, when given, is the result's memory (ops/checks.h, result_tensor).
Tensor gemv(const Tensor& x, const Tensor& w, const Tensor* bias, bool transpose, const GemvNames& names,
            const Tensor* out = nullptr);

}  // namespace mtlinv
