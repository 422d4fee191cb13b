// MSL math functions on the emulator: src/shim/math.h over the C++ standard library's functions.
#pragma once
#include <cmath>
#include <limits>

#include "scalar.h"
#include "target.h"
#include "vec.h"
#include "../../shim/params.h"  // the MTLINV_SHIM_LIBM_* lists

namespace metal {
namespace detail {
// std's float overloads are the C library's float functions (expf, ...): MSL's float functions are float
// throughout. Using-declarations, not wrappers: the kernels compile to exactly the code of direct std:: calls.
namespace libm {
#define EMU_SHIM_LIBM_USING(name) using std::name;
MTLINV_SHIM_LIBM_UNARY(EMU_SHIM_LIBM_USING)
MTLINV_SHIM_LIBM_BINARY(EMU_SHIM_LIBM_USING)
MTLINV_SHIM_LIBM_CLASSIFY(EMU_SHIM_LIBM_USING)
EMU_SHIM_LIBM_USING(fma)  // a single instruction with -mfma
#undef EMU_SHIM_LIBM_USING
}  // namespace libm
template <class T>
using builtin_limits = std::numeric_limits<T>;
}  // namespace detail
}  // namespace metal

#include "../../shim/math.h"
