#include <cstdint>

#include "../limit.h"
#include "../ops.h"
#include "../plans/gemv.h"
#include "../run_plan.h"
#include "checks.h"

namespace mtlinv {

Tensor gemv(const Tensor& x, const Tensor& w, const Tensor* bias, bool transpose) {
  return gemv(x, w, bias, transpose, GemvNames{});
}

Tensor gemv(const Tensor& x, const Tensor& w, const Tensor* bias, bool transpose, const GemvNames& names,
            const Tensor* out) {
  const char* op = names.op;
  const char* xn = names.x;
  const char* wn = names.w;
  require_float_operands(op, {{xn, x}, {wn, w}});
  // Two layouts of w [N, K], told apart by rank: rows, or gemv_nk_mma's tile layout [N/16, K/32, 16, 32]
  // (mtlinv.tile_weights), whose shape gives N and K.
  const bool tiled = w.ndim() == 4;
  if (tiled && !transpose) {
    throw InvalidArgument(op, ": ", wn, " of shape ", shape_str(w.shape), " is w [N, K] in the tile layout, which "
                          "needs transpose (y = x @ w.T)");
  }
  const char* layout = tiled ? "[N/16, K/32, 16, 32] (tiles)" : transpose ? "[N, K]" : "[K, N]";
  if (w.ndim() != 2 && w.ndim() != 3 && !tiled) {
    throw InvalidArgument(op, ": ", wn, " must be ", layout, " or batched [B, ", layout + 1,
                          transpose ? " or [N, K] in the tile layout [N/16, K/32, 16, 32]" : "",
                          ", got shape ", shape_str(w.shape));
  }
  if (tiled && (w.dim(2) != kGemvMmaRows || w.dim(3) != kGemvMmaBlockK)) {
    throw InvalidArgument(op, ": ", wn, " in the tile layout must be [N/16, K/32, ", kGemvMmaRows, ", ",
                          kGemvMmaBlockK, "], got shape ", shape_str(w.shape));
  }
  if (x.ndim() < 1) throw InvalidArgument(op, ": ", xn, " must be [K] or [..., M, K], got shape ", shape_str(x.shape));
  const int64_t k = x.dim(-1);
  const int64_t wk = tiled ? w.dim(1) * kGemvMmaBlockK : transpose ? w.dim(-1) : w.dim(-2);
  const int64_t n = tiled ? w.dim(0) * kGemvMmaRows : transpose ? w.dim(-2) : w.dim(-1);
  if (wk != k) {
    throw InvalidArgument(op, ": ", xn, " has K=", k, " but ", wn, " has K=", wk, " (", xn, " ", shape_str(x.shape),
                          ", ", wn, " ", shape_str(w.shape), ", ", wn, " layout ", layout, ")");
  }

  GemvShape s;
  s.k = k;
  s.n = n;
  s.dtype = x.dtype;
  s.w_kn = !transpose;
  s.tiled = tiled;
  Shape out_shape(x.shape.begin(), x.shape.end() - 1);
  if (w.ndim() == 3) {
    s.batch = w.dim(0);
    s.w_batched = true;
    if (x.ndim() == 3) {
      if (x.dim(0) != s.batch) {
        throw InvalidArgument(op, ": ", xn, " has batch ", x.dim(0), " but ", wn, " has batch ", s.batch, " (", xn,
                              " ", shape_str(x.shape), ", ", wn, " ", shape_str(w.shape), ")");
      }
      s.rows = x.dim(1);
    } else if (x.ndim() <= 2) {
      s.rows = x.ndim() == 2 ? x.dim(0) : 1;
      s.x_batched = false;
      out_shape.insert(out_shape.begin(), s.batch);
    } else {
      throw InvalidArgument(op, ": with batched ", wn, " ", shape_str(w.shape), ", ", xn,
                            " must be [B, M, K], [M, K] or [K]; got ", shape_str(x.shape));
    }
  } else {
    s.rows = k ? x.numel() / k : 0;
    if (k == 0) {
      s.rows = 1;
      for (int i = 0; i + 1 < x.ndim(); ++i) s.rows *= x.dim(i);
    }
  }
  out_shape.push_back(n);
  require_bias(op, {xn, x}, {wn, w}, bias, n);
  require_u32(op, "B", s.batch);
  require_reduced_extent(op, "K", k);
  require_u32(op, "N", n);
  require_u32(op, "M", s.rows);
  require_u32(op, "rows*K", s.rows * k);
  require_u32(op, "K*N", k * n);
  require_u32(op, "rows*N", s.rows * n);

  check_gemv_operands(s, active_backend().caps());
  Tensor y = result_tensor(op, out, out_shape, x.dtype);
  if (y.numel() == 0) return y;
  if (k == 0) throw InvalidArgument(op, ": K must be >= 1, got ", xn, " ", shape_str(x.shape));
  s.has_bias = bias != nullptr;
  s.aligned = aligned16(x) && aligned16(w);
  const Tensor* b = bias ? bias : &y;  // an unread placeholder binding when there is no bias
  run_plan(plan_gemv(s, get_limit(), active_backend().caps()), {&x, &w, b, &y});
  return y;
}

}  // namespace mtlinv
