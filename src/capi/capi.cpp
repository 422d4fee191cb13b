// The C API (include/mtlinv/mtlinv.h): catches every C++ exception at the boundary and turns it into a status
// plus a thread-local message, so no exception ever crosses into C or Swift.
#include "../../include/mtlinv/mtlinv.h"

#include <cstring>
#include <new>
#include <string>

#include "../core/backend.h"
#include "../core/errors.h"
#include "../core/limit.h"
#include "../core/ops.h"
#include "../core/tensor.h"

struct mtlinv_tensor {
  mtlinv::Tensor t;
};

namespace {

thread_local std::string g_last_error;

template <class Fn>
mtlinv_status guarded(Fn&& fn) {
  try {
    fn();
    g_last_error.clear();
    return MTLINV_OK;
  } catch (const mtlinv::InvalidArgument& e) {
    g_last_error = e.what();
    return MTLINV_ERROR_INVALID_ARGUMENT;
  } catch (const mtlinv::DTypeError& e) {
    g_last_error = e.what();
    return MTLINV_ERROR_DTYPE;
  } catch (const mtlinv::DeviceError& e) {
    g_last_error = e.what();
    return MTLINV_ERROR_DEVICE;
  } catch (const mtlinv::KernelError& e) {
    g_last_error = e.what();
    return MTLINV_ERROR_KERNEL;
  } catch (const mtlinv::OutOfMemory& e) {
    g_last_error = e.what();
    return MTLINV_ERROR_OUT_OF_MEMORY;
  } catch (const std::bad_alloc&) {
    g_last_error = "out of host memory";
    return MTLINV_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return MTLINV_ERROR_INTERNAL;
  } catch (...) {
    g_last_error = "unknown C++ exception";
    return MTLINV_ERROR_INTERNAL;
  }
}

void require(bool ok, const char* what) {
  if (!ok) throw mtlinv::InvalidArgument(what);
}

mtlinv::DType to_dtype(mtlinv_dtype d) {
  switch (d) {
    case MTLINV_FLOAT32: return mtlinv::DType::f32;
    case MTLINV_FLOAT16: return mtlinv::DType::f16;
    case MTLINV_BFLOAT16: return mtlinv::DType::bf16;
    case MTLINV_UINT32: return mtlinv::DType::u32;
    case MTLINV_INT32: return mtlinv::DType::i32;
  }
  throw mtlinv::DTypeError("unknown mtlinv_dtype ", static_cast<int>(d));
}

mtlinv_tensor* wrap(mtlinv::Tensor t) { return new mtlinv_tensor{std::move(t)}; }

}  // namespace

extern "C" {

const char* mtlinv_last_error(void) { return g_last_error.c_str(); }

mtlinv_status mtlinv_set_limit(int limit, int* previous) {
  return guarded([&] {
    int old = mtlinv::set_limit(limit);
    if (previous) *previous = old;
  });
}

int mtlinv_get_limit(void) { return mtlinv::get_limit(); }

mtlinv_status mtlinv_device_name(char* buf, size_t size) {
  return guarded([&] {
    require(buf != nullptr && size > 0, "mtlinv_device_name: buf must be non-NULL with size > 0");
    const mtlinv::DeviceCaps& caps = mtlinv::active_backend().caps();
    std::string name = caps.backend + ": " + caps.name;
    std::strncpy(buf, name.c_str(), size - 1);
    buf[size - 1] = '\0';
  });
}

mtlinv_status mtlinv_synchronize(void) {
  return guarded([&] { mtlinv::active_backend().synchronize(); });
}

mtlinv_status mtlinv_tensor_from_host(const void* data, const int64_t* shape, int ndim, mtlinv_dtype dtype,
                                      mtlinv_tensor** out) {
  return guarded([&] {
    require(out != nullptr, "mtlinv_tensor_from_host: out must be non-NULL");
    require(ndim >= 0 && ndim <= 8 && (ndim == 0 || shape != nullptr), "mtlinv_tensor_from_host: bad shape");
    mtlinv::Shape s(shape, shape + ndim);
    mtlinv::Tensor t = mtlinv::Tensor::empty(s, to_dtype(dtype));
    require(data != nullptr || t.nbytes() == 0, "mtlinv_tensor_from_host: data must be non-NULL");
    if (t.nbytes() > 0) mtlinv::active_backend().upload(*t.storage, t.offset, data, t.nbytes());
    *out = wrap(std::move(t));
  });
}

mtlinv_status mtlinv_tensor_to_host(const mtlinv_tensor* t, void* data, size_t bytes) {
  return guarded([&] {
    require(t != nullptr && data != nullptr, "mtlinv_tensor_to_host: tensor and data must be non-NULL");
    if (bytes != t->t.nbytes()) {
      throw mtlinv::InvalidArgument("mtlinv_tensor_to_host: tensor has ", t->t.nbytes(), " bytes, buffer has ", bytes);
    }
    mtlinv::active_backend().download(*t->t.storage, t->t.offset, data, bytes);
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
    require(x && w && out, "mtlinv_gemv: x, w and out must be non-NULL");
    *out = wrap(mtlinv::gemv(x->t, w->t, bias ? &bias->t : nullptr, transpose != 0));
  });
}

mtlinv_status mtlinv_qgemv(const mtlinv_tensor* x, const mtlinv_tensor* wq, const mtlinv_tensor* scales,
                           const mtlinv_tensor* biases, const mtlinv_tensor* bias, int group_size, int bits,
                           mtlinv_tensor** out) {
  return guarded([&] {
    require(x && wq && scales && biases && out, "mtlinv_qgemv: x, wq, scales, biases and out must be non-NULL");
    *out = wrap(mtlinv::qgemv(x->t, wq->t, scales->t, biases->t, bias ? &bias->t : nullptr, group_size, bits));
  });
}

mtlinv_status mtlinv_sdpa(const mtlinv_tensor* q, const mtlinv_tensor* k, const mtlinv_tensor* v, int causal,
                          int64_t kv_len, float scale, mtlinv_tensor** out) {
  return guarded([&] {
    require(q && k && v && out, "mtlinv_sdpa: q, k, v and out must be non-NULL");
    mtlinv::SdpaOptions o;
    o.causal = causal != 0;
    o.has_kv_len = kv_len >= 0;
    o.kv_len = kv_len;
    o.has_scale = scale > 0.0f;
    o.scale = scale;
    *out = wrap(mtlinv::sdpa(q->t, k->t, v->t, o));
  });
}

mtlinv_status mtlinv_rms_norm(const mtlinv_tensor* x, const mtlinv_tensor* weight, float eps, mtlinv_tensor** out) {
  return guarded([&] {
    require(x && weight && out, "mtlinv_rms_norm: x, weight and out must be non-NULL");
    *out = wrap(mtlinv::rms_norm(x->t, weight->t, eps));
  });
}

}  // extern "C"
