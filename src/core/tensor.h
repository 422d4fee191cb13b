// A strided view of device memory. Ops take and return Tensors; Storage belongs to the active backend.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend.h"
#include "dtype.h"

namespace mtlinv {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[2, 3]"

struct Tensor {
  DType dtype = DType::f32;
  Shape shape;
  Shape strides;        // in elements
  StoragePtr storage;
  size_t offset = 0;    // in bytes

  // A new contiguous tensor on the active backend (contents uninitialised).
  static Tensor empty(const Shape& shape, DType dtype);
  // A contiguous tensor with a shape and no memory (its storage holds 0 bytes), for an op's checks in checks-only
  // mode (checks_only.h), which stops before anything reads or writes it.
  static Tensor shape_only(const Shape& shape, DType dtype);
  // A view of host memory: zero-copy where the backend can wrap it, else a copy. `strides` in elements.
  static Tensor from_host(void* data, const Shape& shape, const Shape& strides, DType dtype);
  // A view of the active device's own memory that another library allocated (Backend::wrap_device); contiguous
  // only, never copied: throws DeviceError where the backend cannot wrap it.
  static Tensor from_device(void* data, const Shape& shape, const Shape& strides, DType dtype);

  int ndim() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  // Dimension i, counted from the end when negative; throws InvalidArgument outside [-ndim, ndim).
  int64_t dim(int i) const;
  bool is_contiguous() const;
  // Where the tensor's bytes lie in host memory, or nullptr when the storage is not host-visible. An address to
  // compare, not to access: the device may still be writing there.
  void* host_address() const;
  // host_address(), once the device has finished the work queued before (Backend::synchronize, which throws the
  // error of a kernel that failed). Every read or write of Storage::host goes through here (backend.h: host access).
  void* host_data() const;
  // A contiguous view with a new shape of the same number of elements (throws if not contiguous).
  Tensor reshape(const Shape& new_shape) const;
  // Throws InvalidArgument naming `op` and `arg` unless the tensor has memory (a default-constructed or moved-from
  // Tensor has none) and is contiguous (kernels index it densely).
  void require_dense(const char* op, const char* arg) const;
  // Copies between host memory and the tensor's: `bytes` must be nbytes(). Both wait for the work queued before
  // them. `what` names the caller in errors.
  void upload(const void* src, size_t bytes, const char* what = "upload");
  void download(void* dst, size_t bytes, const char* what = "download") const;
};

Shape contiguous_strides(const Shape& shape);

}  // namespace mtlinv
