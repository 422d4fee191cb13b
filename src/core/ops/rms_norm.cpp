#include <utility>

#include "../ops.h"
#include "../plans/rms_norm.h"
#include "../run_plan.h"
#include "checks.h"

namespace mtlinv {

namespace {

// The checks rms_norm and add_rms_norm share; returns eps as the kernels take it (float32).
float check_rms_norm(const char* op, const Tensor& x, const Tensor& weight, double eps) {
  require_float_operands(op, {{"x", x}, {"weight", weight}});
  if (x.ndim() < 1) throw InvalidArgument(op, ": x must have at least one dimension, got shape ", shape_str(x.shape));
  const int64_t cols = x.dim(-1);
  if (weight.ndim() != 1 || weight.dim(0) != cols) {
    throw InvalidArgument(op, ": weight has shape ", shape_str(weight.shape), " but x has shape ", shape_str(x.shape),
                          "; expected [", cols, "]");
  }
  const float eps_f = check_eps(op, "eps", eps);
  require_u32(op, "rows", cols ? x.numel() / cols : 0);
  require_reduced_extent(op, "cols", cols);
  return eps_f;
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  const float eps_f = check_rms_norm("rms_norm", x, weight, eps);
  const int64_t cols = x.dim(-1), rows = cols ? x.numel() / cols : 0;
  Tensor y = Tensor::empty(x.shape, x.dtype);
  if (rows == 0 || cols == 0) return y;
  run_plan(plan_rms_norm(rows, cols, x.dtype, eps_f, active_backend().caps()), {&x, &weight, &y});
  return y;
}

std::pair<Tensor, Tensor> add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps) {
  const char* op = "add_rms_norm";
  const float eps_f = check_rms_norm(op, x, weight, eps);
  require_same_dtype(op, "x", x, "residual", residual);
  residual.require_dense(op, "residual");
  if (residual.shape != x.shape) {
    throw InvalidArgument(op, ": shapes differ: x ", shape_str(x.shape), " and residual ", shape_str(residual.shape));
  }
  const int64_t cols = x.dim(-1), rows = cols ? x.numel() / cols : 0;
  Tensor s = Tensor::empty(x.shape, x.dtype);
  Tensor y = Tensor::empty(x.shape, x.dtype);
  if (rows == 0 || cols == 0) return {s, y};
  run_plan(plan_rms_norm(rows, cols, x.dtype, eps_f, active_backend().caps(), true), {&x, &residual, &weight, &s, &y});
  return {s, y};
}

Tensor qk_rms_norm(const Tensor& x, int64_t q_heads, int64_t kv_heads, const Tensor& q_weight, const Tensor& k_weight,
                   double eps) {
  const char* op = "qk_rms_norm";
  require_float_operands(op, {{"x", x}, {"q_weight", q_weight}, {"k_weight", k_weight}});
  if (q_weight.ndim() != 1 || k_weight.shape != q_weight.shape || q_weight.dim(0) < 1) {
    throw InvalidArgument(op, ": q_weight and k_weight must be [D] of one shape, D >= 1, got ",
                          shape_str(q_weight.shape), " and ", shape_str(k_weight.shape));
  }
  if (q_heads < 1 || kv_heads < 1) {
    throw InvalidArgument(op, ": q_heads=", q_heads, " and kv_heads=", kv_heads, " must be positive");
  }
  const int64_t dim = q_weight.dim(0);
  require_u32(op, "q_heads", q_heads);
  require_u32(op, "kv_heads", kv_heads);
  require_u32(op, "q_heads + 2 kv_heads", q_heads + 2 * kv_heads);  // each below 2^32: no wrap
  require_reduced_extent(op, "D", dim);
  const int64_t heads = q_heads + 2 * kv_heads;
  // [L, heads, D], or the projection's own [L, heads * D]: the same dense layout (heads * D < 2^64: no wrap).
  const bool heads_ok = x.ndim() == 3 ? x.dim(1) == heads && x.dim(2) == dim
                                      : x.ndim() == 2 && x.dim(1) % dim == 0 && x.dim(1) / dim == heads;
  if (!heads_ok) {
    throw InvalidArgument(op, ": x must be [L, q_heads + 2 kv_heads, D] or [L, (q_heads + 2 kv_heads) * D] for "
                          "weights [D], got x ", shape_str(x.shape), ", q_heads=", q_heads, ", kv_heads=", kv_heads,
                          ", q_weight ", shape_str(q_weight.shape));
  }
  const float eps_f = check_eps(op, "eps", eps);
  require_u32(op, "L", x.dim(0));
  require_u32(op, "L * (q_heads + 2 kv_heads)", x.dim(0) * heads);  // both below 2^32: no wrap
  Tensor y = Tensor::empty(x.shape, x.dtype);
  if (x.numel() == 0) return y;
  run_plan(plan_qk_rms_norm(x.dim(0), q_heads, kv_heads, dim, x.dtype, eps_f, active_backend().caps()),
           {&x, &q_weight, &k_weight, &y});
  return y;
}

}  // namespace mtlinv
