// MSL math functions on CUDA, scalar and element-wise on vectors, plus MSL's constants and numeric_limits; the
// same names and rules as the emulator's src/emu/shim/math.h.
//
// IEEE functions throughout (expf, sqrtf, ...; never the __expf-style intrinsics), and the build passes
// --fmad=false --prec-div=true --prec-sqrt=true --ftz=false, so `a * b + c` is never contracted and rsqrt is
// 1 / sqrt(x) with both operations correctly rounded. `precise::` and `fast::` are the same functions here.
// max/min/fmax/fmin follow MSL's fmax rule: a NaN operand yields the other operand.
#pragma once
#include <cfloat>
#include <cmath>
#include <type_traits>

#include <cuda/std/limits>

#include "scalar.cuh"
#include "vec.cuh"

namespace cu_msl {
namespace detail {
template <class F>
using if_float = std::enable_if_t<is_float_v<F>, F>;
template <class T>
using if_scalar = std::enable_if_t<is_scalar_v<T>, T>;

template <class T, class B>
MTLINV_HD T element(const B& b, int i) {
  if constexpr (is_vec<B>::value) {
    return static_cast<T>(b[i]);
  } else {
    (void)i;
    return static_cast<T>(b);
  }
}
}  // namespace detail

// One-argument floating functions: float (and double, for completeness) through CUDA's IEEE functions; the
// 16-bit types compute in float and round once; element-wise on vectors.
#define MTLINV_CU_UNARY(name, fexpr, dexpr)                                                    \
  namespace detail {                                                                           \
  MTLINV_HD float name##_impl(float x) { return fexpr; }                                       \
  MTLINV_HD double name##_impl(double x) { return dexpr; }                                     \
  }                                                                                            \
  template <class F>                                                                           \
  MTLINV_HD detail::if_float<F> name(F x) {                                                    \
    return static_cast<F>(detail::name##_impl(static_cast<detail::compute_t<F>>(x)));          \
  }                                                                                            \
  template <class F, int N, bool P, std::enable_if_t<detail::is_float_v<F>, int> = 0>          \
  MTLINV_HD vec<F, N> name(const vec<F, N, P>& a) {                                            \
    vec<F, N> r;                                                                               \
    _Pragma("unroll") for (int i = 0; i < N; ++i) r[i] = name(a[i]);                           \
    return r;                                                                                  \
  }
MTLINV_CU_UNARY(exp, ::expf(x), ::exp(x))
MTLINV_CU_UNARY(exp2, ::exp2f(x), ::exp2(x))
MTLINV_CU_UNARY(log, ::logf(x), ::log(x))
MTLINV_CU_UNARY(log2, ::log2f(x), ::log2(x))
MTLINV_CU_UNARY(sqrt, ::sqrtf(x), ::sqrt(x))
MTLINV_CU_UNARY(rsqrt, 1.0f / ::sqrtf(x), 1.0 / ::sqrt(x))
MTLINV_CU_UNARY(fabs, ::fabsf(x), ::fabs(x))
MTLINV_CU_UNARY(floor, ::floorf(x), ::floor(x))
MTLINV_CU_UNARY(ceil, ::ceilf(x), ::ceil(x))
MTLINV_CU_UNARY(round, ::roundf(x), ::round(x))
MTLINV_CU_UNARY(rint, ::rintf(x), ::rint(x))
MTLINV_CU_UNARY(trunc, ::truncf(x), ::trunc(x))
MTLINV_CU_UNARY(sin, ::sinf(x), ::sin(x))
MTLINV_CU_UNARY(cos, ::cosf(x), ::cos(x))
MTLINV_CU_UNARY(tanh, ::tanhf(x), ::tanh(x))
#undef MTLINV_CU_UNARY

// Two-argument floating functions: scalar, and vector-vector.
#define MTLINV_CU_BINARY(name, fexpr, dexpr)                                                   \
  namespace detail {                                                                           \
  MTLINV_HD float name##_impl(float x, float y) { return fexpr; }                              \
  MTLINV_HD double name##_impl(double x, double y) { return dexpr; }                           \
  }                                                                                            \
  template <class F>                                                                           \
  MTLINV_HD detail::if_float<F> name(F x, F y) {                                               \
    using C = detail::compute_t<F>;                                                            \
    return static_cast<F>(detail::name##_impl(static_cast<C>(x), static_cast<C>(y)));          \
  }                                                                                            \
  template <class F, int N, bool P, bool Q, std::enable_if_t<detail::is_float_v<F>, int> = 0>  \
  MTLINV_HD vec<F, N> name(const vec<F, N, P>& a, const vec<F, N, Q>& b) {                     \
    vec<F, N> r;                                                                               \
    _Pragma("unroll") for (int i = 0; i < N; ++i) r[i] = name(a[i], b[i]);                     \
    return r;                                                                                  \
  }
MTLINV_CU_BINARY(pow, ::powf(x, y), ::pow(x, y))
MTLINV_CU_BINARY(copysign, ::copysignf(x, y), ::copysign(x, y))
// Spelled out like the emulator's, so even the sign of a zero result matches it.
MTLINV_CU_BINARY(fmax, (x < y || x != x) ? y : x, (x < y || x != x) ? y : x)
MTLINV_CU_BINARY(fmin, (y < x || x != x) ? y : x, (y < x || x != x) ? y : x)
#undef MTLINV_CU_BINARY

// A true fused multiply-add, one rounding (fmaf). The 16-bit types fuse in float and round again to 16 bits.
template <class F>
MTLINV_HD detail::if_float<F> fma(F a, F b, F c) {
  using C = detail::compute_t<F>;
  if constexpr (std::is_same<C, double>::value) {
    return ::fma(a, b, c);
  } else {
    return static_cast<F>(::fmaf(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c)));
  }
}
template <class F, int N, bool P, bool Q, bool R, std::enable_if_t<detail::is_float_v<F>, int> = 0>
MTLINV_HD vec<F, N> fma(const vec<F, N, P>& a, const vec<F, N, Q>& b, const vec<F, N, R>& c) {
  vec<F, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = fma(a[i], b[i], c[i]);
  return r;
}

// abs, max, min, clamp: any scalar type (floating ones with the fmax NaN rule), element-wise on vectors, and
// vector-scalar for max/min/clamp as in MSL. Scalars are taken by value: program-scope constexpr constants
// (GEMV_ROWS, ...) may then be passed without being odr-used, which device code could not do.
template <class T>
MTLINV_HD detail::if_scalar<T> abs(T x) {
  if constexpr (detail::is_float_v<T>) {
    return fabs(x);
  } else if constexpr (std::is_signed<T>::value) {
    return static_cast<T>(x < 0 ? -x : x);
  } else {
    return x;
  }
}
template <class T>
MTLINV_HD detail::if_scalar<T> max(T x, T y) {
  if constexpr (detail::is_float_v<T>) {
    return fmax(x, y);
  } else {
    return x < y ? y : x;
  }
}
template <class T>
MTLINV_HD detail::if_scalar<T> min(T x, T y) {
  if constexpr (detail::is_float_v<T>) {
    return fmin(x, y);
  } else {
    return y < x ? y : x;
  }
}
template <class T>
MTLINV_HD detail::if_scalar<T> clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}
template <class T, int N, bool P>
MTLINV_HD vec<T, N> abs(const vec<T, N, P>& a) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = abs(a[i]);
  return r;
}
template <class T, int N, bool P, class B, std::enable_if_t<is_vec<B>::value || detail::is_scalar_v<B>, int> = 0>
MTLINV_HD vec<T, N> max(const vec<T, N, P>& a, const B& b) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = max(a[i], detail::element<T>(b, i));
  return r;
}
template <class T, int N, bool P, class B, std::enable_if_t<is_vec<B>::value || detail::is_scalar_v<B>, int> = 0>
MTLINV_HD vec<T, N> min(const vec<T, N, P>& a, const B& b) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = min(a[i], detail::element<T>(b, i));
  return r;
}
template <class T, int N, bool P, class L, class H>
MTLINV_HD vec<T, N> clamp(const vec<T, N, P>& x, const L& lo, const H& hi) {
  return min(max(x, lo), hi);
}

// select(a, b, c): b where c is true, else a.
template <class T>
MTLINV_HD detail::if_scalar<T> select(T a, T b, bool c) {
  return c ? b : a;
}
template <class T, int N, bool P, bool Q, bool R>
MTLINV_HD vec<T, N> select(const vec<T, N, P>& a, const vec<T, N, Q>& b, const vec<bool, N, R>& c) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = c[i] ? b[i] : a[i];
  return r;
}

template <class F, std::enable_if_t<detail::is_float_v<F>, int> = 0>
MTLINV_HD bool isnan(F x) {
  return ::isnan(static_cast<detail::compute_t<F>>(x));
}
template <class F, std::enable_if_t<detail::is_float_v<F>, int> = 0>
MTLINV_HD bool isinf(F x) {
  return ::isinf(static_cast<detail::compute_t<F>>(x));
}
template <class F, std::enable_if_t<detail::is_float_v<F>, int> = 0>
MTLINV_HD bool isfinite(F x) {
  return ::isfinite(static_cast<detail::compute_t<F>>(x));
}
#define MTLINV_CU_CLASSIFY(name)                                                          \
  template <class F, int N, bool P, std::enable_if_t<detail::is_float_v<F>, int> = 0>     \
  MTLINV_HD vec<bool, N> name(const vec<F, N, P>& a) {                                    \
    vec<bool, N> r;                                                                       \
    _Pragma("unroll") for (int i = 0; i < N; ++i) r[i] = name(a[i]);                      \
    return r;                                                                             \
  }
MTLINV_CU_CLASSIFY(isnan)
MTLINV_CU_CLASSIFY(isinf)
MTLINV_CU_CLASSIFY(isfinite)
#undef MTLINV_CU_CLASSIFY

// numeric_limits: libcu++'s for the built-in types (usable in device code), and the 16-bit floats' own.
template <class T>
struct numeric_limits : ::cuda::std::numeric_limits<T> {};

template <class F, uint16_t Max, uint16_t Min, uint16_t Eps, uint16_t DenormMin, uint16_t Inf, uint16_t NaN,
          int Digits>
struct storage_float_limits {
  using T = storage_float<F>;
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool is_iec559 = std::is_same<F, detail::binary16>::value;
  static constexpr int digits = Digits;
  static constexpr int radix = 2;
  static MTLINV_HD constexpr T min() { return T::from_bits(Min); }
  static MTLINV_HD constexpr T max() { return T::from_bits(Max); }
  static MTLINV_HD constexpr T lowest() { return T::from_bits(static_cast<uint16_t>(Max | 0x8000u)); }
  static MTLINV_HD constexpr T epsilon() { return T::from_bits(Eps); }
  static MTLINV_HD constexpr T denorm_min() { return T::from_bits(DenormMin); }
  static MTLINV_HD constexpr T infinity() { return T::from_bits(Inf); }
  static MTLINV_HD constexpr T quiet_NaN() { return T::from_bits(NaN); }
};
template <>
struct numeric_limits<half> : storage_float_limits<detail::binary16, 0x7bff, 0x0400, 0x1400, 0x0001, 0x7c00, 0x7e00, 11> {};
template <>
struct numeric_limits<bfloat> : storage_float_limits<detail::bfloat16, 0x7f7f, 0x0080, 0x3c00, 0x0001, 0x7f80, 0x7fc0, 8> {};

}  // namespace cu_msl

// MSL constants that <cmath> / <cfloat> do not define (INFINITY, NAN, FLT_MAX, FLT_MIN come from there and work
// in device code).
#define HALF_MAX (::cu_msl::half::from_bits(0x7bffu))
#define HALF_MIN (::cu_msl::half::from_bits(0x0400u))
#define M_PI_F 3.14159265358979323846264338327950288f
#define M_LOG2E_F 1.44269504088896340735992468100189214f
#define M_LN2_F 0.693147180559945309417232121458176568f
#ifndef MAXFLOAT
#define MAXFLOAT 3.40282347e+38F
#endif
