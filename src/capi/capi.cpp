// The C API (include/mtlinv/mtlinv.h): catches every C++ exception at the boundary and turns it into a status
// plus a thread-local message, so no exception ever crosses into C or Swift.
#include "../../include/mtlinv/mtlinv.h"
#include "capi_internal.h"

#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "../core/backend.h"
#include "../core/errors.h"
#include "../core/limit.h"
#include "../core/ops.h"
#include "../core/ops/checks.h"
#include "../core/tile_layout.h"
#include "../core/tensor.h"

namespace {

thread_local std::string g_last_error;

// The statuses are the core's error kinds (src/core/errors.h), which classifies the exceptions.
using mtlinv::ErrorKind;
static_assert(MTLINV_ERROR_INVALID_ARGUMENT == static_cast<int>(ErrorKind::invalid_argument) &&
                  MTLINV_ERROR_DTYPE == static_cast<int>(ErrorKind::dtype) &&
                  MTLINV_ERROR_DEVICE == static_cast<int>(ErrorKind::device) &&
                  MTLINV_ERROR_KERNEL == static_cast<int>(ErrorKind::kernel) &&
                  MTLINV_ERROR_OUT_OF_MEMORY == static_cast<int>(ErrorKind::out_of_memory) &&
                  MTLINV_ERROR_INTERNAL == static_cast<int>(ErrorKind::internal),
              "mtlinv_status numbers the core's error kinds");

template <class Fn>
mtlinv_status guarded(Fn&& fn) {
  try {
    fn();
    g_last_error.clear();
    return MTLINV_OK;
  } catch (...) {
    mtlinv::CaughtError error = mtlinv::classify_current_exception();
    g_last_error = std::move(error.message);
    return static_cast<mtlinv_status>(error.kind);
  }
}

// Each pointer argument on its own, so the message says which one was NULL.
void require_arg(const void* p, const char* fn, const char* arg) {
  if (p == nullptr) throw mtlinv::InvalidArgument(fn, ": ", arg, " is NULL");
}

// `fn` and `arg` name the function and argument in the error.
mtlinv::DType to_dtype(mtlinv_dtype d, const char* fn, const char* arg) {
  switch (d) {
    case MTLINV_FLOAT32: return mtlinv::DType::f32;
    case MTLINV_FLOAT16: return mtlinv::DType::f16;
    case MTLINV_BFLOAT16: return mtlinv::DType::bf16;
    case MTLINV_UINT32: return mtlinv::DType::u32;
    case MTLINV_INT32: return mtlinv::DType::i32;
    case MTLINV_INT8: return mtlinv::DType::i8;
  }
  throw mtlinv::DTypeError(fn, ": ", arg, "=", static_cast<int>(d), " is not an mtlinv_dtype");
}

mtlinv_tensor* wrap(mtlinv::Tensor t) { return new mtlinv_tensor{std::move(t)}; }

}  // namespace

using mtlinv::capi::require_all;

extern "C" {

const char* mtlinv_last_error(void) { return g_last_error.c_str(); }

mtlinv_status mtlinv_set_limit(int limit, int* previous) {
  return guarded([&] {
    int old = mtlinv::set_limit(limit);
    if (previous) *previous = old;
  });
}

int mtlinv_get_limit(void) {
  int limit = -1;
  guarded([&] { limit = mtlinv::get_limit(); });
  return limit;
}

mtlinv_status mtlinv_push_limit(int limit) {
  return guarded([&] { mtlinv::push_limit(limit); });
}

mtlinv_status mtlinv_pop_limit(void) {
  return guarded([&] { mtlinv::pop_limit(); });
}

mtlinv_status mtlinv_device_name(char* buf, size_t size) {
  return guarded([&] {
    require_arg(buf, "mtlinv_device_name", "buf");
    const mtlinv::DeviceCaps& caps = mtlinv::active_backend().caps();
    std::string name = caps.backend + ": " + caps.name;
    if (name.size() >= size) {
      throw mtlinv::InvalidArgument("mtlinv_device_name: buf has ", size, " bytes but the name needs ",
                                    name.size() + 1, " ('", name, "')");
    }
    std::memcpy(buf, name.c_str(), name.size() + 1);
  });
}

mtlinv_status mtlinv_synchronize(void) {
  return guarded([&] { mtlinv::active_backend().synchronize(); });
}

mtlinv_status mtlinv_tensor_from_host(const void* data, const int64_t* shape, int ndim, mtlinv_dtype dtype,
                                      mtlinv_tensor** out) {
  return guarded([&] {
    const char* fn = "mtlinv_tensor_from_host";
    require_arg(out, fn, "out");
    mtlinv::Tensor t =
        mtlinv::Tensor::empty(mtlinv::capi::checked_shape(fn, shape, ndim), to_dtype(dtype, fn, "dtype"));
    t.upload(data, t.nbytes(), fn);
    *out = wrap(std::move(t));
  });
}

mtlinv_status mtlinv_tensor_to_host(const mtlinv_tensor* t, void* data, size_t bytes) {
  return guarded([&] {
    const char* fn = "mtlinv_tensor_to_host";
    require_arg(t, fn, "t");
    t->t.download(data, bytes, fn);
  });
}

int mtlinv_tensor_ndim(const mtlinv_tensor* t) { return t ? t->t.ndim() : -1; }
int64_t mtlinv_tensor_dim(const mtlinv_tensor* t, int i) {
  return t && i >= 0 && i < t->t.ndim() ? t->t.shape[static_cast<size_t>(i)] : -1;
}
size_t mtlinv_tensor_nbytes(const mtlinv_tensor* t) { return t ? t->t.nbytes() : 0; }
void mtlinv_tensor_free(mtlinv_tensor* t) { delete t; }

mtlinv_status mtlinv_gemv(const mtlinv_tensor* x, const mtlinv_tensor* w, const mtlinv_tensor* bias, int transpose,
                          mtlinv_tensor** out) {
  return guarded([&] {
    require_all("mtlinv_gemv", {{"x", x}, {"w", w}, {"out", out}});
    *out = wrap(mtlinv::gemv(x->t, w->t, bias ? &bias->t : nullptr, transpose != 0));
  });
}

mtlinv_status mtlinv_qgemv(const mtlinv_tensor* x, const mtlinv_tensor* wq, const mtlinv_tensor* scales,
                           const mtlinv_tensor* biases, const mtlinv_tensor* bias, int group_size, int bits,
                           mtlinv_tensor** out) {
  return guarded([&] {
    require_all("mtlinv_qgemv", {{"x", x}, {"wq", wq}, {"scales", scales}, {"biases", biases}, {"out", out}});
    if (scales->t.dtype == mtlinv::DType::i8) {  // the core would ask for supers, which this function has no place for
      throw mtlinv::InvalidArgument("mtlinv_qgemv: scales are MTLINV_INT8 codes (the super-block form); use ",
                                    "mtlinv_qgemv_super, which takes their supers");
    }
    *out = wrap(mtlinv::qgemv(x->t, wq->t, scales->t, biases->t, bias ? &bias->t : nullptr, group_size, bits));
  });
}

mtlinv_status mtlinv_qgemv_super(const mtlinv_tensor* x, const mtlinv_tensor* wq, const mtlinv_tensor* scales,
                                 const mtlinv_tensor* biases, const mtlinv_tensor* supers, const mtlinv_tensor* bias,
                                 int group_size, int bits, mtlinv_tensor** out) {
  return guarded([&] {
    require_all("mtlinv_qgemv_super",
                {{"x", x}, {"wq", wq}, {"scales", scales}, {"biases", biases}, {"supers", supers}, {"out", out}});
    *out = wrap(mtlinv::qgemv(x->t, wq->t, scales->t, biases->t, bias ? &bias->t : nullptr, group_size, bits, nullptr,
                              &supers->t));
  });
}

mtlinv_status mtlinv_tiled_weight_elements(int64_t n, int64_t k, int64_t* elements) {
  return guarded([&] {
    require_arg(elements, "mtlinv_tiled_weight_elements", "elements");
    *elements = mtlinv::tiled_weight_elements(n, k);
  });
}

mtlinv_status mtlinv_tile_weights(const void* w, mtlinv_dtype dtype, int64_t n, int64_t k, void* w_tiled) {
  return guarded([&] {
    // The pointers and the shape are the core's to check (src/core/tile_layout.h), as for C++ callers.
    if (dtype != MTLINV_FLOAT16 && dtype != MTLINV_BFLOAT16) {
      throw mtlinv::DTypeError("mtlinv_tile_weights: dtype=", static_cast<int>(dtype),
                               " is not MTLINV_FLOAT16 or MTLINV_BFLOAT16");
    }
    mtlinv::tile_weights(w, 2, n, k, w_tiled);
  });
}

mtlinv_status mtlinv_quant_tiled_words(int64_t n, int64_t k, int group_size, int bits, int64_t* words) {
  return guarded([&] {
    require_arg(words, "mtlinv_quant_tiled_words", "words");
    *words = mtlinv::quant_tiled_words(n, k, group_size, bits);
  });
}

mtlinv_status mtlinv_quant_tile(const uint32_t* wq, const void* scales, const void* biases, mtlinv_dtype scale_dtype,
                                int64_t n, int64_t k, int group_size, int bits, uint32_t* wq_tiled,
                                void* scales_tiled, void* biases_tiled) {
  return guarded([&] {
    // The pointers and the shape are the core's to check (src/core/tile_layout.h), as for C++ callers.
    if (scale_dtype != MTLINV_FLOAT16 && scale_dtype != MTLINV_BFLOAT16 && scale_dtype != MTLINV_FLOAT32) {
      throw mtlinv::DTypeError("mtlinv_quant_tile: scale_dtype=", static_cast<int>(scale_dtype),
                               " is not MTLINV_FLOAT16, MTLINV_BFLOAT16 or MTLINV_FLOAT32 (int8 codes: ",
                               "mtlinv_quant_tile_super)");
    }
    const size_t scale_size = mtlinv::dtype_size(to_dtype(scale_dtype, "mtlinv_quant_tile", "scale_dtype"));
    mtlinv::quant_tile(wq, scales, biases, scale_size, n, k, group_size, bits, wq_tiled, scales_tiled, biases_tiled);
  });
}

mtlinv_status mtlinv_quant_tile_super(const uint32_t* wq, const int8_t* scales, const int8_t* biases,
                                      const float* supers, int64_t n, int64_t k, int group_size, int bits,
                                      uint32_t* wq_tiled, int8_t* scales_tiled, int8_t* biases_tiled,
                                      float* supers_tiled) {
  return guarded([&] {
    // quant_tile checks the rest (and refuses codes without supers); checked here, the message names this function.
    require_all("mtlinv_quant_tile_super", {{"supers", supers}, {"supers_tiled", supers_tiled}});
    mtlinv::quant_tile(wq, scales, biases, 1, n, k, group_size, bits, wq_tiled, scales_tiled, biases_tiled, supers,
                       supers_tiled);
  });
}

mtlinv_status mtlinv_sdpa(const mtlinv_tensor* q, const mtlinv_tensor* k, const mtlinv_tensor* v, int causal,
                          int64_t kv_len, float scale, mtlinv_tensor** out) {
  return guarded([&] {
    const char* fn = "mtlinv_sdpa";
    require_all(fn, {{"q", q}, {"k", k}, {"v", v}, {"out", out}});
    *out = wrap(mtlinv::sdpa(q->t, k->t, v->t, mtlinv::capi::sdpa_options(fn, causal, kv_len, scale, false)));
  });
}

mtlinv_status mtlinv_rms_norm(const mtlinv_tensor* x, const mtlinv_tensor* weight, float eps, mtlinv_tensor** out) {
  return guarded([&] {
    require_all("mtlinv_rms_norm", {{"x", x}, {"weight", weight}, {"out", out}});
    *out = wrap(mtlinv::rms_norm(x->t, weight->t, eps));
  });
}

}  // extern "C"

// The helpers above, for the C API's other files (capi_internal.h).
namespace mtlinv::capi {

mtlinv_status run(const std::function<void()>& fn) { return guarded(fn); }
void require(const void* p, const char* fn, const char* arg) { require_arg(p, fn, arg); }

void require_all(const char* fn, std::initializer_list<std::pair<const char*, const void*>> args) {
  for (const auto& [name, p] : args) require_arg(p, fn, name);
}

Shape checked_shape(const char* fn, const int64_t* shape, int ndim) {
  if (ndim < 0 || ndim > 8) throw InvalidArgument(fn, ": ndim=", ndim, " must be in [0, 8]");
  if (ndim > 0) require_arg(shape, fn, "shape");
  Shape s(shape, shape + ndim);
  for (int64_t d : s) {
    if (d < 0) throw InvalidArgument(fn, ": shape ", shape_str(s), " has dimension ", d, ", which is negative");
    if (d > kMaxDim) {
      throw InvalidArgument(fn, ": shape ", shape_str(s), " has dimension ", d, ", beyond the kernels' 2^32 - 1");
    }
  }
  return s;
}
DType dtype(mtlinv_dtype d, const char* fn, const char* arg) { return to_dtype(d, fn, arg); }
mtlinv_tensor* wrap(Tensor t) { return ::wrap(std::move(t)); }

mtlinv_dtype c_dtype(DType d) {
  switch (d) {
    case DType::f32: return MTLINV_FLOAT32;
    case DType::f16: return MTLINV_FLOAT16;
    case DType::bf16: return MTLINV_BFLOAT16;
    case DType::u32: return MTLINV_UINT32;
    case DType::i32: return MTLINV_INT32;
    case DType::i8: return MTLINV_INT8;
    case DType::u8: break;
  }
  throw DTypeError("a tensor of dtype ", dtype_name(d), " has no mtlinv_dtype");
}

}  // namespace mtlinv::capi
