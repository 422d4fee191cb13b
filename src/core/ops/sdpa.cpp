#include <cmath>
#include <cstdint>

#include "../limit.h"
#include "../ops.h"
#include "../plans/sdpa.h"
#include "../run_plan.h"
#include "checks.h"

namespace mtlinv {

Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options, const Tensor* out) {
  const char* op = "sdpa";
  require_float_operands(op, {{"q", q}, {"k", k}, {"v", v}});
  // [B, H, L, D], or [H, L, D] for one sequence (a decoder's per-layer head views need no reshape to [1, ...]).
  if (q.ndim() != 4 && q.ndim() != 3) {
    throw InvalidArgument(op, ": q must be [B, Hq, Lq, D] or [Hq, Lq, D], got shape ", shape_str(q.shape));
  }
  if (k.ndim() != q.ndim()) {
    throw InvalidArgument(op, ": k must be ", q.ndim() == 4 ? "[B, Hkv, C, D]" : "[Hkv, C, D]", " like q ",
                          shape_str(q.shape), ", got shape ", shape_str(k.shape));
  }
  if (v.shape != k.shape) {
    throw InvalidArgument(op, ": v has shape ", shape_str(v.shape), " but k has shape ", shape_str(k.shape));
  }

  SdpaShape s;
  s.batch = q.ndim() == 4 ? q.dim(0) : 1;
  s.q_heads = q.dim(-3);
  s.q_len = q.dim(-2);
  s.head_dim = q.dim(-1);
  s.kv_heads = k.dim(-3);
  s.capacity = k.dim(-2);
  s.dtype = q.dtype;
  s.causal = options.causal;
  if (k.ndim() == 4 && k.dim(0) != s.batch) {
    throw InvalidArgument(op, ": q has batch B=", s.batch, " but k has B=", k.dim(0), " (q ", shape_str(q.shape),
                          ", k ", shape_str(k.shape), ")");
  }
  if (k.dim(-1) != s.head_dim) {
    throw InvalidArgument(op, ": q has head dim D=", s.head_dim, " but k has D=", k.dim(-1), " (q ",
                          shape_str(q.shape), ", k ", shape_str(k.shape), ")");
  }
  if (!sdpa_head_dim_supported(s.head_dim)) {
    throw InvalidArgument(op, ": head dim D=", s.head_dim, " is not supported (supported: ", sdpa_head_dims_str(),
                          ")");
  }
  if (s.kv_heads < 1) {
    throw InvalidArgument(op, ": k has Hkv=", s.kv_heads, " heads; attention needs at least one (k ",
                          shape_str(k.shape), ")");
  }
  if (s.q_heads % s.kv_heads != 0) {
    throw InvalidArgument(op, ": q has Hq=", s.q_heads, " heads, which is not a multiple of k's Hkv=", s.kv_heads,
                          " (q ", shape_str(q.shape), ", k ", shape_str(k.shape), ")");
  }
  s.kv_len = options.has_kv_len ? options.kv_len : s.capacity;
  if (s.kv_len < 1 || s.kv_len > s.capacity) {
    throw InvalidArgument(op, ": kv_len=", s.kv_len, " must be in [1, C] for k with C=", s.capacity, " keys (k ",
                          shape_str(k.shape), ")");
  }
  if (s.causal && s.q_len > s.kv_len) {
    throw InvalidArgument(op, ": causal attention needs Lq <= kv_len, got Lq=", s.q_len, " queries and kv_len=",
                          s.kv_len, " keys");
  }
  // The kernels take scale * log2(e) as a float32 (exp2 of scaled scores): it must be finite too.
  if (options.has_scale && !std::isfinite(static_cast<float>(options.scale * kLog2e))) {
    throw InvalidArgument(op, ": scale must be finite with scale * log2(e) within float32, got ", options.scale);
  }
  s.scale = static_cast<float>(options.has_scale ? options.scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim)));

  require_u32(op, "B*Hq*Lq", s.batch * s.q_heads * s.q_len);
  require_reduced_extent(op, "C", s.capacity);
  // sdpa_combine's grid takes a query's head dims in pieces of 32 along x: Lq * ceil(D / 32) threadgroups.
  require_u32(op, "Lq*ceil(D/32)", s.q_len * ((s.head_dim + 31) / 32));

  Shape out_shape = q.shape;
  if (options.rows_out) {
    out_shape = {s.q_len, s.q_heads * s.head_dim};
    if (q.ndim() == 4) out_shape.insert(out_shape.begin(), s.batch);
  }
  Tensor y = result_tensor(op, out, out_shape, q.dtype);
  if (y.numel() == 0) return y;
  s.aligned = aligned16(q) && aligned16(k) && aligned16(v);
  s.rows_out = options.rows_out;
  run_plan(plan_sdpa(s, get_limit(), active_backend().caps()), {&q, &k, &v, &y});
  return y;
}

}  // namespace mtlinv
