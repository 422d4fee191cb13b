#include <cmath>
#include <utility>

#include "../ops.h"
#include "../plans/rms_norm.h"
#include "../run_plan.h"
#include "checks.h"

namespace mtlinv {

namespace {

// The checks rms_norm and add_rms_norm share; returns eps as the kernels take it (float32).
float check_rms_norm(const char* op, const Tensor& x, const Tensor& weight, double eps) {
  require_float(op, "x", x);
  require_same_dtype(op, "x", x, "weight", weight);
  x.require_dense(op, "x");
  weight.require_dense(op, "weight");
  if (x.ndim() < 1) throw InvalidArgument(op, ": x must have at least one dimension, got shape ", shape_str(x.shape));
  const int64_t cols = x.dim(-1);
  if (weight.ndim() != 1 || weight.dim(0) != cols) {
    throw InvalidArgument(op, ": weight has shape ", shape_str(weight.shape), " but x has shape ", shape_str(x.shape),
                          "; expected [", cols, "]");
  }
  // Checked as given, then as the float32 the kernels take (1e39 is finite here, not there).
  const float eps_f = static_cast<float>(eps);
  if (!(eps >= 0.0) || !std::isfinite(eps_f)) {
    throw InvalidArgument(op, ": eps must be >= 0 and finite within float32, got ", eps);
  }
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

}  // namespace mtlinv
