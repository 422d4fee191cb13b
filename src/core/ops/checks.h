// Input checks shared by the ops; every message names the op, the argument and the offending values.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "../errors.h"
#include "../tensor.h"

namespace mtlinv {

inline void require_float(const char* op, const char* arg, const Tensor& t) {
  if (!is_float(t.dtype)) {
    throw DTypeError(op, ": ", arg, " has dtype ", dtype_name(t.dtype), "; expected float32, float16 or bfloat16");
  }
}

inline void require_same_dtype(const char* op, const char* arg_a, const Tensor& a, const char* arg_b,
                               const Tensor& b) {
  if (a.dtype != b.dtype) {
    throw DTypeError(op, ": ", arg_a, " is ", dtype_name(a.dtype), " but ", arg_b, " is ", dtype_name(b.dtype),
                     "; all operands must have one dtype");
  }
}

// An rms_norm's eps as the kernels take it (float32): checked as given, then as that float32 (1e39 is finite here,
// not there).
inline float check_eps(const char* op, const char* arg, double eps) {
  const float eps_f = static_cast<float>(eps);
  if (!(eps >= 0.0) || !std::isfinite(eps_f)) {
    throw InvalidArgument(op, ": ", arg, " must be >= 0 and finite within float32, got ", eps);
  }
  return eps_f;
}

// An operand as the messages name it.
struct Operand {
  const char* name;
  const Tensor& tensor;
};

// The checks the float ops open with: the first operand (there is always one) has a float dtype, every other has
// the first's, and all are dense. Dtypes first, in the operands' order, so a wrong dtype is named before a layout.
inline void require_float_operands(const char* op, std::initializer_list<Operand> operands) {
  const Operand& first = *operands.begin();
  require_float(op, first.name, first.tensor);
  for (const Operand& o : operands) {
    if (&o != &first) require_same_dtype(op, first.name, first.tensor, o.name, o.tensor);
  }
  for (const Operand& o : operands) o.tensor.require_dense(op, o.name);
}

// A matrix-vector product's optional bias [N]: x's dtype, dense, one value per output column of w (`n` of them).
inline void require_bias(const char* op, const Operand& x, const Operand& w, const Tensor* bias, int64_t n) {
  if (bias == nullptr) return;
  require_same_dtype(op, x.name, x.tensor, "bias", *bias);
  bias->require_dense(op, "bias");
  if (bias->ndim() != 1 || bias->dim(0) != n) {
    throw InvalidArgument(op, ": bias has shape ", shape_str(bias->shape), " but ", w.name, " has N=", n, " (",
                          w.name, " ", shape_str(w.tensor.shape), ")");
  }
}

// The op's result: `out`, memory the caller gives (an MLX primitive's output array), once it is checked to be a
// dense tensor of the result's shape and dtype; else a new tensor. `out` must not overlap an operand.
inline Tensor result_tensor(const char* op, const Tensor* out, const Shape& shape, DType dtype) {
  if (out == nullptr) return Tensor::empty(shape, dtype);
  if (out->shape != shape || out->dtype != dtype) {
    throw InvalidArgument(op, ": out has shape ", shape_str(out->shape), " and dtype ", dtype_name(out->dtype),
                          "; the result is ", shape_str(shape), " ", dtype_name(dtype));
  }
  out->require_dense(op, "out");
  return *out;
}

// Whether a tensor (one that has memory: Tensor::require_dense) starts on a 16-byte boundary, so kernels may load
// 16 bytes at a time. Device memory (no host pointer) always does.
inline bool aligned16(const Tensor& t) {
  if (t.offset % 16 != 0) return false;
  return t.storage->host == nullptr || reinterpret_cast<uintptr_t>(t.storage->host) % 16 == 0;
}

// Dimensions are passed to kernels as uint32.
constexpr int64_t kMaxDim = 0xFFFFFFFFll;
inline void require_u32(const char* op, const char* what, int64_t v) {
  if (v < 0 || v > kMaxDim) throw InvalidArgument(op, ": ", what, "=", v, " is out of range for the kernels");
}

// A reduced extent (a GEMV's K, rms_norm's columns, attention's keys): the kernels walk it in uint32 steps of up to
// a few thousand (k + step <= K, chunk = (K + splits - 1) / splits, a chunk's first key + a quarter of it), which
// wrap within that distance of 2^32 and then end early, skip keys or never end. Below 2^31 they cannot.
inline void require_reduced_extent(const char* op, const char* what, int64_t v) {
  if (v < 0 || v > 0x7FFFFFFFll) {
    throw InvalidArgument(op, ": ", what, "=", v, " is out of range for the kernels (at most 2^31 - 1)");
  }
}

}  // namespace mtlinv
