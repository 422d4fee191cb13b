// The C API's tensor helpers beyond capi.cpp's, its version, and the ops of the decoder's layers (mtlinv.h,
// "More ops"): thin calls of the core's ops inside capi::run.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "../../include/mtlinv/mtlinv.h"
#include "../core/errors.h"
#include "../core/ops.h"
#include "../core/ops/checks.h"
#include "capi_internal.h"

using mtlinv::capi::checked_shape;
using mtlinv::capi::require;
using mtlinv::capi::require_all;
using mtlinv::capi::run;
using mtlinv::capi::wrap;

namespace mtlinv::capi {

SdpaOptions sdpa_options(const char* fn, int causal, int64_t kv_len, float scale, bool rows_out) {
  // scale <= 0 asks for the default; NaN and the infinities are neither a scale nor that request.
  if (!std::isfinite(scale)) throw InvalidArgument(fn, ": scale is ", scale, ", not a finite number");
  SdpaOptions o;
  o.causal = causal != 0;
  o.has_kv_len = kv_len >= 0;
  o.kv_len = kv_len;
  o.has_scale = scale > 0.0f;
  o.scale = scale;
  o.rows_out = rows_out;
  return o;
}

}  // namespace mtlinv::capi

extern "C" {

int mtlinv_version(void) { return MTLINV_VERSION; }

const char* mtlinv_version_string(void) {
  static const std::string version = std::to_string(MTLINV_VERSION_MAJOR) + "." +
                                     std::to_string(MTLINV_VERSION_MINOR) + "." +
                                     std::to_string(MTLINV_VERSION_PATCH);
  return version.c_str();
}

mtlinv_status mtlinv_tensor_empty(const int64_t* shape, int ndim, mtlinv_dtype dtype, mtlinv_tensor** out) {
  return run([&] {
    const char* fn = "mtlinv_tensor_empty";
    require(out, fn, "out");
    *out = wrap(mtlinv::Tensor::empty(checked_shape(fn, shape, ndim), mtlinv::capi::dtype(dtype, fn, "dtype")));
  });
}

mtlinv_status mtlinv_tensor_dtype(const mtlinv_tensor* t, mtlinv_dtype* dtype) {
  return run([&] {
    require_all("mtlinv_tensor_dtype", {{"t", t}, {"dtype", dtype}});
    *dtype = mtlinv::capi::c_dtype(t->t.dtype);
  });
}

mtlinv_status mtlinv_tensor_reshape(const mtlinv_tensor* t, const int64_t* shape, int ndim, mtlinv_tensor** out) {
  return run([&] {
    const char* fn = "mtlinv_tensor_reshape";
    require_all(fn, {{"t", t}, {"out", out}});
    *out = wrap(t->t.reshape(checked_shape(fn, shape, ndim)));
  });
}

mtlinv_status mtlinv_matmul(const mtlinv_tensor* a, const mtlinv_tensor* b, mtlinv_tensor** out) {
  return run([&] {
    require_all("mtlinv_matmul", {{"a", a}, {"b", b}, {"out", out}});
    *out = wrap(mtlinv::gemv(a->t, b->t, nullptr, false, mtlinv::GemvNames{"matmul", "a", "b"}));
  });
}

mtlinv_status mtlinv_sdpa_rows(const mtlinv_tensor* q, const mtlinv_tensor* k, const mtlinv_tensor* v, int causal,
                               int64_t kv_len, float scale, mtlinv_tensor** out) {
  return run([&] {
    const char* fn = "mtlinv_sdpa_rows";
    require_all(fn, {{"q", q}, {"k", k}, {"v", v}, {"out", out}});
    *out = wrap(mtlinv::sdpa(q->t, k->t, v->t, mtlinv::capi::sdpa_options(fn, causal, kv_len, scale, true)));
  });
}

mtlinv_status mtlinv_add_rms_norm(const mtlinv_tensor* x, const mtlinv_tensor* residual, const mtlinv_tensor* weight,
                                  float eps, mtlinv_tensor** sum, mtlinv_tensor** out) {
  return run([&] {
    require_all("mtlinv_add_rms_norm",
                {{"x", x}, {"residual", residual}, {"weight", weight}, {"sum", sum}, {"out", out}});
    auto [s, y] = mtlinv::add_rms_norm(x->t, residual->t, weight->t, eps);
    mtlinv_tensor* s_handle = wrap(std::move(s));
    try {
      *out = wrap(std::move(y));
    } catch (...) {
      mtlinv_tensor_free(s_handle);
      throw;
    }
    *sum = s_handle;
  });
}

mtlinv_status mtlinv_add(const mtlinv_tensor* a, const mtlinv_tensor* b, mtlinv_tensor** out) {
  return run([&] {
    require_all("mtlinv_add", {{"a", a}, {"b", b}, {"out", out}});
    *out = wrap(mtlinv::add(a->t, b->t));
  });
}

mtlinv_status mtlinv_swiglu(const mtlinv_tensor* gate, const mtlinv_tensor* up, mtlinv_tensor** out) {
  return run([&] {
    require_all("mtlinv_swiglu", {{"gate", gate}, {"up", up}, {"out", out}});
    *out = wrap(mtlinv::swiglu(gate->t, up->t));
  });
}

mtlinv_status mtlinv_swiglu_halves(const mtlinv_tensor* x, mtlinv_tensor** out) {
  return run([&] {
    require_all("mtlinv_swiglu_halves", {{"x", x}, {"out", out}});
    *out = wrap(mtlinv::swiglu_halves(x->t));
  });
}

mtlinv_status mtlinv_write_heads(const mtlinv_tensor* x, mtlinv_tensor* dst, int64_t seq_offset, int64_t start_pos,
                                 int rotate, double base) {
  return run([&] {
    require_all("mtlinv_write_heads", {{"x", x}, {"dst", dst}});
    mtlinv::write_heads(x->t, dst->t, seq_offset, start_pos, rotate != 0, base, "mtlinv_write_heads");
  });
}

mtlinv_status mtlinv_rope_heads(const mtlinv_tensor* x, int64_t start_pos, double base, mtlinv_tensor** out) {
  return run([&] {
    const char* fn = "mtlinv_rope_heads";
    require_all(fn, {{"x", x}, {"out", out}});
    const mtlinv::Tensor& t = x->t;
    if (t.ndim() != 3 || t.shape[2] % 2 != 0) {
      throw mtlinv::InvalidArgument(fn, ": x must be [L, H, D] with an even D, got ", mtlinv::shape_str(t.shape));
    }
    mtlinv::Tensor y = mtlinv::Tensor::empty({t.shape[1], t.shape[0], t.shape[2]}, t.dtype);
    mtlinv::write_heads(t, y, 0, start_pos, true, base, fn);
    *out = wrap(std::move(y));
  });
}

mtlinv_status mtlinv_qkv_to_heads(const mtlinv_tensor* x, int64_t q_heads, mtlinv_tensor* k_dst, mtlinv_tensor* v_dst,
                                  int64_t seq_offset, int64_t start_pos, double base, mtlinv_tensor** out) {
  return run([&] {
    require_all("mtlinv_qkv_to_heads", {{"x", x}, {"k_dst", k_dst}, {"v_dst", v_dst}, {"out", out}});
    *out = wrap(mtlinv::qkv_to_heads(x->t, q_heads, k_dst->t, v_dst->t, seq_offset, start_pos, base));
  });
}

mtlinv_status mtlinv_qkv_to_heads_freqs(const mtlinv_tensor* x, int64_t q_heads, mtlinv_tensor* k_dst,
                                        mtlinv_tensor* v_dst, int64_t seq_offset, int64_t start_pos,
                                        const float* freqs, size_t n_freqs, mtlinv_tensor** out) {
  return run([&] {
    const char* fn = "mtlinv_qkv_to_heads_freqs";
    require_all(fn, {{"x", x}, {"k_dst", k_dst}, {"v_dst", v_dst}, {"out", out}});
    require(freqs, fn, "freqs");
    const mtlinv::Tensor table = mtlinv::rope_freqs(fn, "freqs", std::vector<float>(freqs, freqs + n_freqs));
    *out = wrap(mtlinv::qkv_to_heads(x->t, q_heads, k_dst->t, v_dst->t, seq_offset, start_pos, 1.0, &table));
  });
}

mtlinv_status mtlinv_qk_rms_norm(const mtlinv_tensor* x, int64_t q_heads, int64_t kv_heads,
                                 const mtlinv_tensor* q_weight, const mtlinv_tensor* k_weight, float eps,
                                 mtlinv_tensor** out) {
  return run([&] {
    require_all("mtlinv_qk_rms_norm", {{"x", x}, {"q_weight", q_weight}, {"k_weight", k_weight}, {"out", out}});
    *out = wrap(mtlinv::qk_rms_norm(x->t, q_heads, kv_heads, q_weight->t, k_weight->t, eps));
  });
}

mtlinv_status mtlinv_heads_to_rows(const mtlinv_tensor* x, mtlinv_tensor** out) {
  return run([&] {
    require_all("mtlinv_heads_to_rows", {{"x", x}, {"out", out}});
    *out = wrap(mtlinv::heads_to_rows(x->t));
  });
}

mtlinv_status mtlinv_embedding(const mtlinv_tensor* table, const int64_t* ids, size_t n_ids, mtlinv_tensor** out) {
  return run([&] {
    const char* fn = "mtlinv_embedding";
    require_all(fn, {{"table", table}, {"out", out}});
    if (n_ids > 0) require(ids, fn, "ids");
    *out = wrap(mtlinv::embedding(table->t, std::vector<int64_t>(ids, ids + n_ids)));
  });
}

}  // extern "C"
