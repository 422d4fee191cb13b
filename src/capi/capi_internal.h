// What the C API's files share (capi.cpp defines it): the handle behind mtlinv_tensor, and the guard that turns
// every C++ exception into a status plus the thread's mtlinv_last_error() message. Each file of the C API keeps
// its functions' bodies inside run(), so no exception ever crosses into C or Swift.
#pragma once
#include <functional>
#include <initializer_list>
#include <utility>

#include "../../include/mtlinv/mtlinv.h"
#include "../core/dtype.h"
#include "../core/ops/sdpa.h"
#include "../core/tensor.h"

struct mtlinv_tensor {
  mtlinv::Tensor t;
};

namespace mtlinv::capi {

// Runs fn: MTLINV_OK and an empty message, or the status and message of the exception it threw.
mtlinv_status run(const std::function<void()>& fn);
// Throws InvalidArgument "<fn>: <arg> is NULL" when p is NULL: each pointer on its own, so the message names it.
void require(const void* p, const char* fn, const char* arg);
// require() of each (name, pointer), in the order given.
void require_all(const char* fn, std::initializer_list<std::pair<const char*, const void*>> args);
// A C shape (ndim entries at `shape`) as the core's, each dimension checked in [0, 2^32 - 1] before any allocation
// (which would otherwise fail first and report memory, not the shape).
Shape checked_shape(const char* fn, const int64_t* shape, int ndim);
// The core's dtype of a C one; DTypeError for a value outside the enum.
DType dtype(mtlinv_dtype d, const char* fn, const char* arg);
mtlinv_dtype c_dtype(DType d);
// A new handle owning t (a copy sharing its storage); released by mtlinv_tensor_free.
mtlinv_tensor* wrap(Tensor t);
// mtlinv_sdpa's and mtlinv_sdpa_rows's arguments as the core's options (capi_ops.cpp): kv_len < 0 is every key,
// scale <= 0 the default; a NaN or infinite scale is InvalidArgument naming fn.
SdpaOptions sdpa_options(const char* fn, int causal, int64_t kv_len, float scale, bool rows_out);

}  // namespace mtlinv::capi
