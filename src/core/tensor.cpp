#include "tensor.h"

#include <cstring>
#include <memory>
#include <sstream>

#include "checks_only.h"
#include "errors.h"

namespace mtlinv {

std::string shape_str(const Shape& s) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < s.size(); ++i) out << (i ? ", " : "") << s[i];
  out << "]";
  return out.str();
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

// Dimensions are non-negative and their product (times 8 bytes, the widest element) fits in int64.
static void check_shape(const Shape& shape) {
  int64_t n = 8;
  for (int64_t d : shape) {
    if (d < 0) throw InvalidArgument("negative dimension in shape ", shape_str(shape));
    if (__builtin_mul_overflow(n, d, &n)) throw InvalidArgument("shape ", shape_str(shape), " is too large");
  }
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // nothing to lay out; numpy reports arbitrary strides for empty arrays
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != step) return false;
    step *= shape[i];
  }
  return true;
}

void* Tensor::host_address() const {
  if (!storage || !storage->host) return nullptr;
  return static_cast<char*>(storage->host) + offset;
}

void* Tensor::host_data() const {
  stop_if_checks_only();
  void* address = host_address();
  if (address) active_backend().synchronize();
  return address;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  stop_if_checks_only();
  check_shape(shape);
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = contiguous_strides(shape);
  t.storage = active_backend().allocate(t.nbytes());
  return t;
}

Tensor Tensor::shape_only(const Shape& shape, DType dtype) {
  check_shape(shape);
  static const StoragePtr no_memory = std::make_shared<Storage>();
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = contiguous_strides(shape);
  t.storage = no_memory;
  return t;
}

namespace {

// A Tensor of `shape` and `strides` over memory at `data`: the checks from_host and from_device share.
Tensor over_memory(const char* what, void* data, const Shape& shape, const Shape& strides, DType dtype) {
  check_shape(shape);
  if (strides.size() != shape.size()) {
    throw InvalidArgument(what, ": strides ", shape_str(strides), " have ", strides.size(), " entries but shape ",
                          shape_str(shape), " has ", shape.size());
  }
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = strides;
  if (!t.is_contiguous()) {
    throw InvalidArgument(what, ": array of shape ", shape_str(shape), " is not contiguous (strides ",
                          shape_str(strides), " elements); make a contiguous copy first");
  }
  t.strides = contiguous_strides(shape);
  if (data == nullptr && t.nbytes() > 0) {
    throw InvalidArgument(what, ": data is NULL for shape ", shape_str(shape), " (", t.nbytes(), " bytes)");
  }
  return t;
}

}  // namespace

Tensor Tensor::from_host(void* data, const Shape& shape, const Shape& strides, DType dtype) {
  Tensor t = over_memory("from_host", data, shape, strides, dtype);
  Backend& backend = active_backend();
  t.storage = backend.wrap_host(data, t.nbytes());
  if (!t.storage) {
    t.storage = backend.allocate(t.nbytes());
    backend.upload(*t.storage, 0, data, t.nbytes());
  }
  return t;
}

Tensor Tensor::from_device(void* data, const Shape& shape, const Shape& strides, DType dtype) {
  Tensor t = over_memory("from_device", data, shape, strides, dtype);
  Backend& backend = active_backend();
  t.storage = backend.wrap_device(data, t.nbytes());
  if (!t.storage) {
    throw DeviceError("from_device: the ", backend.caps().backend, " backend cannot wrap device memory");
  }
  return t;
}

Tensor Tensor::reshape(const Shape& new_shape) const {
  int64_t n = 1;  // the new size; -1 where a dimension is negative or the product overflows
  for (int64_t d : new_shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
      n = -1;
      break;
    }
  }
  if (n != numel()) {
    throw InvalidArgument("reshape: cannot view shape ", shape_str(shape), " as ", shape_str(new_shape));
  }
  Tensor t = *this;
  t.shape = new_shape;
  t.strides = contiguous_strides(new_shape);
  if (!is_contiguous()) throw InvalidArgument("reshape: tensor of shape ", shape_str(shape), " is not contiguous");
  return t;
}

int64_t Tensor::dim(int i) const {
  if (i < -ndim() || i >= ndim()) {
    throw InvalidArgument("dim: index ", i, " is out of range for shape ", shape_str(shape));
  }
  return shape[static_cast<size_t>(i < 0 ? i + ndim() : i)];
}

void Tensor::require_dense(const char* op, const char* arg) const {
  if (!storage) throw InvalidArgument(op, ": ", arg, " has no memory (a default-constructed or moved-from Tensor)");
  if (!is_contiguous()) {
    throw InvalidArgument(op, ": ", arg, " of shape ", shape_str(shape), " has strides ", shape_str(strides),
                          " (elements); a contiguous tensor is required");
  }
}

// Both sides must be the tensor's whole, dense extent: a partial or oversized copy is a caller's error, never a
// silent overrun of the tensor's memory.
static void check_copy(const char* what, const Tensor& t, const void* host, size_t bytes) {
  stop_if_checks_only();
  t.require_dense(what, "the tensor");
  if (host == nullptr && bytes > 0) throw InvalidArgument(what, ": data is NULL");
  if (bytes != t.nbytes()) {
    throw InvalidArgument(what, ": ", bytes, " bytes given for a tensor of ", t.nbytes(), " bytes (shape ",
                          shape_str(t.shape), ", ", dtype_name(t.dtype), ")");
  }
  if (t.offset > t.storage->bytes || bytes > t.storage->bytes - t.offset) {  // a shape edited past its memory
    throw InvalidArgument(what, ": the tensor's ", bytes, " bytes at offset ", t.offset, " pass the end of its ",
                          t.storage->bytes, " bytes of memory");
  }
}

void Tensor::upload(const void* src, size_t bytes, const char* what) {
  check_copy(what, *this, src, bytes);
  if (bytes > 0) active_backend().upload(*storage, offset, src, bytes);
}

void Tensor::download(void* dst, size_t bytes, const char* what) const {
  check_copy(what, *this, dst, bytes);
  if (bytes > 0) active_backend().download(*storage, offset, dst, bytes);
}

}  // namespace mtlinv
