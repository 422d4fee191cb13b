#include <cmath>


#include "../ops.h"
#include "../plans/rms_norm.h"
#include "../run_plan.h"
#include "checks.h"

namespace mtlinv {

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  const char* op = "rms_norm";
  require_float(op, "x", x);
  require_same_dtype(op, "x", x, "weight", weight);
  x.require_contiguous(op, "x");
  weight.require_contiguous(op, "weight");
  if (x.ndim() < 1) throw InvalidArgument(op, ": x must have at least one dimension, got shape ", shape_str(x.shape));
  const int64_t cols = x.dim(-1);
  if (weight.ndim() != 1 || weight.dim(0) != cols) {
    throw InvalidArgument(op, ": weight has shape ", shape_str(weight.shape), " but x has shape ", shape_str(x.shape),
                          "; expected [", cols, "]");
  }
  if (!(eps >= 0.0f) || !std::isfinite(eps)) throw InvalidArgument(op, ": eps must be finite and >= 0, got ", eps);
  const int64_t rows = cols ? x.numel() / cols : 0;
  require_u32(op, "rows", rows);
  require_reduced_extent(op, "cols", cols);

  Tensor y = Tensor::empty(x.shape, x.dtype);
  if (rows == 0 || cols == 0) return y;
  run_plan(plan_rms_norm(rows, cols, x.dtype, eps, active_backend().caps()), {&x, &weight, &y});
  return y;
}

}  // namespace mtlinv
