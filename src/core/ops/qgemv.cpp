#include <cstdint>

#include "../limit.h"
#include "../ops.h"
#include "../plans/qgemv.h"
#include "../run_plan.h"
#include "../tile_layout.h"
#include "checks.h"

namespace mtlinv {

namespace {

// scales and biases: one value per row and group, [N, K / group_size]; in the tile layout [N/16, K/group_size, 16].
void require_group_shape(const char* op, const char* arg, const Tensor& t, int64_t n, int64_t k, int group_size,
                         bool tiled) {
  const Shape expected = tiled ? quant_tiled_group_shape(n, k, group_size) : Shape{n, k / group_size};
  if (t.shape != expected) {
    throw InvalidArgument(op, ": ", arg, " has shape ", shape_str(t.shape), " but N=", n, ", K=", k,
                          " at group_size=", group_size, " needs ",
                          tiled ? "[N/16, K/group_size, 16] = " : "[N, K/group_size] = ", shape_str(expected));
  }
}

// The super-block form's operands: int8 codes come with supers, float32 [N, K/256, 2] (tiles [N/16, K/256, 16, 2]),
// K a multiple of 256; supers without int8 codes are refused rather than ignored.
void require_supers(const char* op, const Tensor& scales, const Tensor* supers, int64_t n, int64_t k, bool tiled) {
  if (scales.dtype != DType::i8) {
    if (supers != nullptr) {
      throw InvalidArgument(op, ": supers is given but scales are ", dtype_name(scales.dtype),
                            "; supers goes with int8 scale and bias codes (the super-block form)");
    }
    return;
  }
  if (supers == nullptr) {
    throw InvalidArgument(op, ": scales are int8 codes (the super-block form) but supers is not given; it holds "
                          "the float32 factors of each ", kQgemvSuperK, " values of a row, [N, K/", kQgemvSuperK,
                          ", 2]");
  }
  if (supers->dtype != DType::f32) {
    throw DTypeError(op, ": supers has dtype ", dtype_name(supers->dtype), "; expected float32");
  }
  supers->require_dense(op, "supers");
  if (k % kQgemvSuperK != 0) {
    throw InvalidArgument(op, ": K=", k, " is not a multiple of ", kQgemvSuperK,
                          ", the values of a super-block (int8 scale codes)");
  }
  const Shape expected = tiled ? quant_tiled_super_shape(n, k) : Shape{n, k / kQgemvSuperK, 2};
  if (supers->shape != expected) {
    throw InvalidArgument(op, ": supers has shape ", shape_str(supers->shape), " but N=", n, ", K=", k, " needs ",
                          tiled ? "[N/16, K/256, 16, 2] = " : "[N, K/256, 2] = ", shape_str(expected));
  }
}

}  // namespace

Tensor qgemv(const Tensor& x, const Tensor& wq, const Tensor& scales, const Tensor& biases, const Tensor* bias,
             int group_size, int bits, const Tensor* out, const Tensor* supers, bool constant_weights) {
  const char* op = "qgemv";
  require_float(op, "x", x);
  if (wq.dtype != DType::u32) {
    throw DTypeError(op, ": wq has dtype ", dtype_name(wq.dtype),
                     "; expected uint32 (packed quantized weights, as mtlinv.quant.quantize returns them)");
  }
  // Float scales of another dtype than x's, and int8 codes, are checked with the width (check_qgemv_operands, which
  // says what the kernels take); other dtypes are refused here.
  if (!is_float(scales.dtype) && scales.dtype != DType::i8) require_same_dtype(op, "x", x, "scales", scales);
  require_same_dtype(op, "scales", scales, "biases", biases);
  // Before the shapes, which depend on them.
  if (scales.dtype == DType::i8) {
    check_qgemv_super_format(bits, group_size);
  } else {
    check_qgemv_format(bits, group_size);
  }
  x.require_dense(op, "x");
  wq.require_dense(op, "wq");
  scales.require_dense(op, "scales");
  biases.require_dense(op, "biases");
  // Two layouts, told apart by wq's rank: MLX's rows [N, K*bits/32], or the tile layout of qgemv_mma
  // [N/16, ceil(K/128), 16, 4*bits] (mtlinv.quant.tile).
  const bool tiled = wq.ndim() == 4;
  if (wq.ndim() != 2 && !tiled) {
    throw InvalidArgument(op, ": wq must be [N, K*bits/32] (rows) or [N/16, ceil(K/128), 16, 4*bits] (tiles), got "
                          "shape ", shape_str(wq.shape));
  }
  if (x.ndim() < 1) throw InvalidArgument(op, ": x must be [K] or [..., M, K], got shape ", shape_str(x.shape));
  const int64_t k = x.dim(-1);
  const int64_t n = tiled ? wq.dim(0) * kQgemvMmaRows : wq.dim(0);
  if (k % group_size != 0) {
    throw InvalidArgument(op, ": K=", k, " is not a multiple of group_size=", group_size, " (x ",
                          shape_str(x.shape), ")");
  }
  require_whole_runs(op, k);
  if (tiled) {
    const Shape expected = quant_tiled_shape(n, k, bits);
    if (wq.shape != expected) {
      throw InvalidArgument(op, ": x has K=", k, " but wq in the tile layout has shape ", shape_str(wq.shape),
                            "; K=", k, " at bits=", bits, " needs [N/16, ceil(K/128), 16, 4*bits] = ",
                            shape_str(expected));
    }
  } else if (wq.dim(1) * 32 != k * bits) {
    throw InvalidArgument(op, ": x has K=", k, " but wq ", shape_str(wq.shape), " holds ", wq.dim(1),
                          " words per row; K=", k, " at bits=", bits, " needs ", k * bits / 32);
  }
  require_group_shape(op, "scales", scales, n, k, group_size, tiled);
  require_group_shape(op, "biases", biases, n, k, group_size, tiled);
  require_supers(op, scales, supers, n, k, tiled);
  require_bias(op, {"x", x}, {"wq", wq}, bias, n);

  QGemvShape s;
  s.rows = 1;
  for (int i = 0; i + 1 < x.ndim(); ++i) s.rows *= x.dim(i);
  s.k = k;
  s.n = n;
  s.group_size = group_size;
  s.bits = bits;
  s.dtype = x.dtype;
  s.scale_dtype = scales.dtype;
  require_reduced_extent(op, "K", k);
  require_u32(op, "N", n);
  require_u32(op, "M", s.rows);
  require_u32(op, "rows*K", s.rows * k);
  require_u32(op, "rows*N", s.rows * n);
  require_u32(op, "K*bits", k * bits);
  require_u32(op, "wq words", wq.numel());

  s.tiled = tiled;
  check_qgemv_operands(s, active_backend().caps());
  Shape out_shape(x.shape.begin(), x.shape.end() - 1);
  out_shape.push_back(n);
  Tensor y = result_tensor(op, out, out_shape, x.dtype);
  if (y.numel() == 0) return y;
  if (k == 0) throw InvalidArgument(op, ": K must be >= 1, got x ", shape_str(x.shape));
  s.has_bias = bias != nullptr;
  s.aligned = aligned16(x);
  s.w_aligned = aligned16(wq);
  s.constant_weights = constant_weights;
  const Tensor* b = bias ? bias : &y;  // an unread placeholder binding when there is no bias
  // Likewise without supers: wq, whose 4-byte words suit the slot's float alignment on every target.
  const Tensor* f = supers ? supers : &wq;
  run_plan(plan_qgemv(s, get_limit(), active_backend().caps()), {&x, &wq, &scales, &biases, b, &y, f});
  return y;
}

}  // namespace mtlinv
