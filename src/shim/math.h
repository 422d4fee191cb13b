// MSL math functions, scalar and element-wise on vectors, plus MSL's constants and numeric_limits.
//
// Floating functions take float, half or bfloat (and double, for host-side code) and return the same type; the
// 16-bit types compute in float and round once. `precise::` and `fast::` are the same functions on every target
// (the canonical kernels depend on it). max/min/fmax/fmin follow MSL's fmax rule: a NaN operand yields the other.
//
// The target defines first, in MTLINV_SHIM_NS::detail:
//   namespace libm: its C library for float and double (CUDA's device functions are not the host's, and the
//     host's float overloads live in std): NAME(x) for each NAME of MTLINV_SHIM_LIBM_UNARY, NAME(x, y) for
//     MTLINV_SHIM_LIBM_BINARY, NAME(x) -> bool for MTLINV_SHIM_LIBM_CLASSIFY (the lists are in params.h), and
//     fma(a, b, c), fused (one rounding);
//   builtin_limits<T>: the numeric_limits of the built-in types.
#pragma once
#include <cfloat>  // FLT_MAX, FLT_MIN
#include <cmath>   // INFINITY, NAN
#include <cstdint>
#include <type_traits>

#include "params.h"

namespace MTLINV_SHIM_NS {
namespace detail {
template <class F>
using if_float = std::enable_if_t<is_float_v<F>, F>;
template <class T>
using if_scalar = std::enable_if_t<is_scalar_v<T>, T>;

// Element i of a vector operand, or a scalar operand converted to the element type.
template <class T, class B>
MTLINV_SHIM_FN T element(const B& b, int i) {
  if constexpr (is_vec<B>::value) {
    return static_cast<T>(b[i]);
  } else {
    (void)i;
    return static_cast<T>(b);
  }
}
}  // namespace detail

// One-argument floating functions: scalar, and element-wise on vectors of floating elements.
#define MTLINV_SHIM_UNARY(name, expr)                                                      \
  template <class F>                                                                       \
  MTLINV_SHIM_FN detail::if_float<F> name(F x_) {                                          \
    const detail::compute_t<F> x = static_cast<detail::compute_t<F>>(x_);                  \
    return static_cast<F>(expr);                                                           \
  }                                                                                        \
  template <class F, int N, bool P, std::enable_if_t<detail::is_float_v<F>, int> = 0>      \
  MTLINV_SHIM_FN vec<F, N> name(const vec<F, N, P>& a) {                                   \
    vec<F, N> r{};                                                                         \
    MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = name(a[i]);                      \
    return r;                                                                              \
  }
#define MTLINV_SHIM_LIBM(name) MTLINV_SHIM_UNARY(name, detail::libm::name(x))
MTLINV_SHIM_LIBM_UNARY(MTLINV_SHIM_LIBM)
#undef MTLINV_SHIM_LIBM
// Both operations correctly rounded (CUDA builds with --prec-div=true --prec-sqrt=true), never an approximation.
MTLINV_SHIM_UNARY(rsqrt, 1 / detail::libm::sqrt(x))
#undef MTLINV_SHIM_UNARY

// Two-argument floating functions: scalar, and vector-vector.
#define MTLINV_SHIM_BINARY(name, expr)                                                     \
  template <class F>                                                                       \
  MTLINV_SHIM_FN detail::if_float<F> name(F x_, F y_) {                                    \
    const detail::compute_t<F> x = static_cast<detail::compute_t<F>>(x_);                  \
    const detail::compute_t<F> y = static_cast<detail::compute_t<F>>(y_);                  \
    return static_cast<F>(expr);                                                           \
  }                                                                                        \
  template <class F, int N, bool P, bool Q, std::enable_if_t<detail::is_float_v<F>, int> = 0> \
  MTLINV_SHIM_FN vec<F, N> name(const vec<F, N, P>& a, const vec<F, N, Q>& b) {            \
    vec<F, N> r{};                                                                         \
    MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = name(a[i], b[i]);                \
    return r;                                                                              \
  }
#define MTLINV_SHIM_LIBM(name) MTLINV_SHIM_BINARY(name, detail::libm::name(x, y))
MTLINV_SHIM_LIBM_BINARY(MTLINV_SHIM_LIBM)
#undef MTLINV_SHIM_LIBM
// Spelled out rather than the C library's fmax so it inlines to a compare and select, and so that even the sign
// of a zero result is the same on every target; x != x is the NaN test of the rule.
MTLINV_SHIM_BINARY(fmax, (x < y || x != x) ? y : x)
MTLINV_SHIM_BINARY(fmin, (y < x || x != x) ? y : x)
#undef MTLINV_SHIM_BINARY

// A true fused multiply-add: one rounding for float (a single instruction with -mfma, or on the GPU). The 16-bit
// types fuse in float and round again to 16 bits.
template <class F>
MTLINV_SHIM_FN detail::if_float<F> fma(F a, F b, F c) {
  using C = detail::compute_t<F>;
  return static_cast<F>(detail::libm::fma(static_cast<C>(a), static_cast<C>(b), static_cast<C>(c)));
}
template <class F, int N, bool P, bool Q, bool R, std::enable_if_t<detail::is_float_v<F>, int> = 0>
MTLINV_SHIM_FN vec<F, N> fma(const vec<F, N, P>& a, const vec<F, N, Q>& b, const vec<F, N, R>& c) {
  vec<F, N> r{};
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = fma(a[i], b[i], c[i]);
  return r;
}

// abs, max, min, clamp: any scalar type (floating ones with the fmax NaN rule), element-wise on vectors, and
// vector-scalar for max/min/clamp as in MSL. Scalars are taken by value: program-scope constexpr constants
// (GEMV_ROWS, ...) may then be passed without being odr-used, which CUDA device code could not do.
template <class T>
MTLINV_SHIM_FN detail::if_scalar<T> abs(T x) {
  if constexpr (detail::is_float_v<T>) {
    return fabs(x);
  } else if constexpr (std::is_signed<T>::value) {
    return static_cast<T>(x < 0 ? -x : x);
  } else {
    return x;
  }
}
template <class T>
MTLINV_SHIM_FN detail::if_scalar<T> max(T x, T y) {
  if constexpr (detail::is_float_v<T>) {
    return fmax(x, y);
  } else {
    return x < y ? y : x;
  }
}
template <class T>
MTLINV_SHIM_FN detail::if_scalar<T> min(T x, T y) {
  if constexpr (detail::is_float_v<T>) {
    return fmin(x, y);
  } else {
    return y < x ? y : x;
  }
}
template <class T>
MTLINV_SHIM_FN detail::if_scalar<T> clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}
template <class T, int N, bool P>
MTLINV_SHIM_FN vec<T, N> abs(const vec<T, N, P>& a) {
  vec<T, N> r{};
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = abs(a[i]);
  return r;
}
template <class T, int N, bool P, class B, std::enable_if_t<is_vec<B>::value || detail::is_scalar_v<B>, int> = 0>
MTLINV_SHIM_FN vec<T, N> max(const vec<T, N, P>& a, const B& b) {
  vec<T, N> r{};
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = max(a[i], detail::element<T>(b, i));
  return r;
}
template <class T, int N, bool P, class B, std::enable_if_t<is_vec<B>::value || detail::is_scalar_v<B>, int> = 0>
MTLINV_SHIM_FN vec<T, N> min(const vec<T, N, P>& a, const B& b) {
  vec<T, N> r{};
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = min(a[i], detail::element<T>(b, i));
  return r;
}
template <class T, int N, bool P, class L, class H>
MTLINV_SHIM_FN vec<T, N> clamp(const vec<T, N, P>& x, const L& lo, const H& hi) {
  return min(max(x, lo), hi);
}

// select(a, b, c): b where c is true, else a.
template <class T>
MTLINV_SHIM_FN detail::if_scalar<T> select(T a, T b, bool c) {
  return c ? b : a;
}
template <class T, int N, bool P, bool Q, bool R>
MTLINV_SHIM_FN vec<T, N> select(const vec<T, N, P>& a, const vec<T, N, Q>& b, const vec<bool, N, R>& c) {
  vec<T, N> r{};
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = c[i] ? b[i] : a[i];
  return r;
}

// isnan, isinf, isfinite: scalar, and element-wise to a bool vector.
#define MTLINV_SHIM_CLASSIFY(name)                                                         \
  template <class F, std::enable_if_t<detail::is_float_v<F>, int> = 0>                     \
  MTLINV_SHIM_FN bool name(F x) {                                                          \
    return detail::libm::name(static_cast<detail::compute_t<F>>(x));                      \
  }                                                                                        \
  template <class F, int N, bool P, std::enable_if_t<detail::is_float_v<F>, int> = 0>      \
  MTLINV_SHIM_FN vec<bool, N> name(const vec<F, N, P>& a) {                                \
    vec<bool, N> r{};                                                                      \
    MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = name(a[i]);                      \
    return r;                                                                              \
  }
MTLINV_SHIM_LIBM_CLASSIFY(MTLINV_SHIM_CLASSIFY)
#undef MTLINV_SHIM_CLASSIFY

// numeric_limits: the target's for the built-in types, and the 16-bit floats' own.
template <class T>
struct numeric_limits : detail::builtin_limits<T> {};

// The limits of a 16-bit format, given as bit patterns (largest finite, smallest normal, epsilon, smallest
// subnormal, infinity, quiet NaN) and the significand's digits including the implicit bit.
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
  static MTLINV_SHIM_FN constexpr T min() { return T::from_bits(Min); }
  static MTLINV_SHIM_FN constexpr T max() { return T::from_bits(Max); }
  static MTLINV_SHIM_FN constexpr T lowest() { return T::from_bits(static_cast<uint16_t>(Max | 0x8000u)); }
  static MTLINV_SHIM_FN constexpr T epsilon() { return T::from_bits(Eps); }
  static MTLINV_SHIM_FN constexpr T denorm_min() { return T::from_bits(DenormMin); }
  static MTLINV_SHIM_FN constexpr T infinity() { return T::from_bits(Inf); }
  static MTLINV_SHIM_FN constexpr T quiet_NaN() { return T::from_bits(NaN); }
};
template <>
struct numeric_limits<half>
    : storage_float_limits<detail::binary16, 0x7bff, 0x0400, 0x1400, 0x0001, 0x7c00, 0x7e00, 11> {};
template <>
struct numeric_limits<bfloat>
    : storage_float_limits<detail::bfloat16, 0x7f7f, 0x0080, 0x3c00, 0x0001, 0x7f80, 0x7fc0, 8> {};

}  // namespace MTLINV_SHIM_NS

// MSL constants that <cmath> / <cfloat> do not define (INFINITY, NAN, FLT_MAX, FLT_MIN come from there and work
// in CUDA device code too).
#define HALF_MAX (::MTLINV_SHIM_NS::half::from_bits(0x7bffu))
#define HALF_MIN (::MTLINV_SHIM_NS::half::from_bits(0x0400u))
#define M_PI_F 3.14159265358979323846264338327950288f
#define M_LOG2E_F 1.44269504088896340735992468100189214f
#define M_LN2_F 0.693147180559945309417232121458176568f
#ifndef MAXFLOAT
#define MAXFLOAT 3.40282347e+38F
#endif
