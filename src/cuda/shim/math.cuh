// MSL math functions on CUDA: src/shim/math.h over CUDA's IEEE functions (expf, sqrtf, ...; never the
// __expf-style intrinsics). The build passes --fmad=false --prec-div=true --prec-sqrt=true --ftz=false, so
// `a * b + c` is never contracted and division and square root are correctly rounded.
#pragma once
#include <cmath>

#include <cuda/std/limits>

#include "scalar.cuh"
#include "target.cuh"
#include "vec.cuh"
#include "../../shim/params.h"  // the MTLINV_SHIM_LIBM_* lists

namespace cu_msl {
namespace detail {
namespace libm {
// NAME for float (::NAMEf) and double (::NAME).
#define MTLINV_CU_LIBM_UNARY(name)                                 \
  MTLINV_HD float name(float x) { return ::name##f(x); }           \
  MTLINV_HD double name(double x) { return ::name(x); }
MTLINV_SHIM_LIBM_UNARY(MTLINV_CU_LIBM_UNARY)
#undef MTLINV_CU_LIBM_UNARY
#define MTLINV_CU_LIBM_BINARY(name)                                        \
  MTLINV_HD float name(float x, float y) { return ::name##f(x, y); }       \
  MTLINV_HD double name(double x, double y) { return ::name(x, y); }
MTLINV_SHIM_LIBM_BINARY(MTLINV_CU_LIBM_BINARY)
#undef MTLINV_CU_LIBM_BINARY
#define MTLINV_CU_LIBM_CLASSIFY(name) \
  template <class C>                  \
  MTLINV_HD bool name(C x) {          \
    return ::name(x);                 \
  }
MTLINV_SHIM_LIBM_CLASSIFY(MTLINV_CU_LIBM_CLASSIFY)
#undef MTLINV_CU_LIBM_CLASSIFY
MTLINV_HD float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
MTLINV_HD double fma(double a, double b, double c) { return ::fma(a, b, c); }
}  // namespace libm
// libcu++'s, usable in device code.
template <class T>
using builtin_limits = ::cuda::std::numeric_limits<T>;
}  // namespace detail
}  // namespace cu_msl

#include "../../shim/math.h"
