// MSL math functions, scalar and element-wise on vectors, plus MSL's constants and numeric_limits.
//
// Floating functions take float, half or bfloat (and double, for host-side code) and return the same type; the
// 16-bit types compute in float and round once. On the CPU, `precise::` and `fast::` are the same functions.
// max/min/fmax/fmin follow MSL's fmax rule: a NaN operand yields the other operand.
#pragma once
#include <cfloat>
#include <cmath>
#include <limits>
#include <type_traits>

#include "scalar.h"
#include "vec.h"

namespace metal {
namespace detail {
template <class F>
using if_float = std::enable_if_t<is_float_v<F>, F>;
template <class T>
using if_scalar = std::enable_if_t<is_scalar_v<T>, T>;

// Element i of a vector operand, or a scalar operand converted to the element type.
template <class T, class B>
T element(const B& b, int i) {
  if constexpr (is_vec<B>::value) {
    return static_cast<T>(b[i]);
  } else {
    (void)i;
    return static_cast<T>(b);
  }
}

template <class T, int N, bool P, class Fn>
vec<T, N> map(const vec<T, N, P>& a, Fn fn) {
  vec<T, N> r{};
  for (int i = 0; i < N; ++i) r[i] = fn(a[i]);
  return r;
}
}  // namespace detail

// One-argument floating functions: scalar, and element-wise on vectors of floating elements.
#define EMU_SHIM_UNARY(name, expr)                                                          \
  template <class F>                                                                        \
  detail::if_float<F> name(F x_) {                                                          \
    const detail::compute_t<F> x = static_cast<detail::compute_t<F>>(x_);                   \
    return static_cast<F>(expr);                                                            \
  }                                                                                         \
  template <class F, int N, bool P, std::enable_if_t<detail::is_float_v<F>, int> = 0>       \
  vec<F, N> name(const vec<F, N, P>& a) {                                                   \
    return detail::map(a, [](F e) { return name(e); });                                     \
  }
EMU_SHIM_UNARY(exp, std::exp(x))
EMU_SHIM_UNARY(exp2, std::exp2(x))
EMU_SHIM_UNARY(log, std::log(x))
EMU_SHIM_UNARY(log2, std::log2(x))
EMU_SHIM_UNARY(sqrt, std::sqrt(x))
EMU_SHIM_UNARY(rsqrt, 1 / std::sqrt(x))
EMU_SHIM_UNARY(fabs, std::fabs(x))
EMU_SHIM_UNARY(floor, std::floor(x))
EMU_SHIM_UNARY(ceil, std::ceil(x))
EMU_SHIM_UNARY(round, std::round(x))
EMU_SHIM_UNARY(rint, std::rint(x))
EMU_SHIM_UNARY(trunc, std::trunc(x))
EMU_SHIM_UNARY(sin, std::sin(x))
EMU_SHIM_UNARY(cos, std::cos(x))
EMU_SHIM_UNARY(tanh, std::tanh(x))
#undef EMU_SHIM_UNARY

// Two-argument floating functions: scalar, and vector-vector.
#define EMU_SHIM_BINARY(name, expr)                                                         \
  template <class F>                                                                        \
  detail::if_float<F> name(F x_, F y_) {                                                    \
    const detail::compute_t<F> x = static_cast<detail::compute_t<F>>(x_);                   \
    const detail::compute_t<F> y = static_cast<detail::compute_t<F>>(y_);                   \
    return static_cast<F>(expr);                                                            \
  }                                                                                         \
  template <class F, int N, bool P, bool Q, std::enable_if_t<detail::is_float_v<F>, int> = 0> \
  vec<F, N> name(const vec<F, N, P>& a, const vec<F, N, Q>& b) {                            \
    vec<F, N> r{};                                                                          \
    for (int i = 0; i < N; ++i) r[i] = name(a[i], b[i]);                                    \
    return r;                                                                               \
  }
EMU_SHIM_BINARY(pow, std::pow(x, y))
EMU_SHIM_BINARY(copysign, std::copysign(x, y))
// Spelled out rather than std::fmax so it inlines to a compare and select; same results, NaN rule included.
EMU_SHIM_BINARY(fmax, (x < y || std::isnan(x)) ? y : x)
EMU_SHIM_BINARY(fmin, (y < x || std::isnan(x)) ? y : x)
#undef EMU_SHIM_BINARY

// A true fused multiply-add: one rounding for float (a single instruction with -mfma). The 16-bit types fuse in
// float and round again to 16 bits.
template <class F>
detail::if_float<F> fma(F a, F b, F c) {
  using C = detail::compute_t<F>;
  return static_cast<F>(std::fma(static_cast<C>(a), static_cast<C>(b), static_cast<C>(c)));
}
template <class F, int N, bool P, bool Q, bool R, std::enable_if_t<detail::is_float_v<F>, int> = 0>
vec<F, N> fma(const vec<F, N, P>& a, const vec<F, N, Q>& b, const vec<F, N, R>& c) {
  vec<F, N> r{};
  for (int i = 0; i < N; ++i) r[i] = fma(a[i], b[i], c[i]);
  return r;
}

// abs, max, min, clamp: any scalar type (floating ones with the fmax NaN rule), element-wise on vectors, and
// vector-scalar for max/min/clamp as in MSL.
template <class T>
detail::if_scalar<T> abs(T x) {
  if constexpr (detail::is_float_v<T>) {
    return fabs(x);
  } else if constexpr (std::is_signed<T>::value) {
    return static_cast<T>(x < 0 ? -x : x);
  } else {
    return x;
  }
}
template <class T>
detail::if_scalar<T> max(T x, T y) {
  if constexpr (detail::is_float_v<T>) {
    return fmax(x, y);
  } else {
    return x < y ? y : x;
  }
}
template <class T>
detail::if_scalar<T> min(T x, T y) {
  if constexpr (detail::is_float_v<T>) {
    return fmin(x, y);
  } else {
    return y < x ? y : x;
  }
}
template <class T>
detail::if_scalar<T> clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}
template <class T, int N, bool P>
vec<T, N> abs(const vec<T, N, P>& a) {
  return detail::map(a, [](T e) { return abs(e); });
}
template <class T, int N, bool P, class B, std::enable_if_t<is_vec<B>::value || detail::is_scalar_v<B>, int> = 0>
vec<T, N> max(const vec<T, N, P>& a, const B& b) {
  vec<T, N> r{};
  for (int i = 0; i < N; ++i) r[i] = max(a[i], detail::element<T>(b, i));
  return r;
}
template <class T, int N, bool P, class B, std::enable_if_t<is_vec<B>::value || detail::is_scalar_v<B>, int> = 0>
vec<T, N> min(const vec<T, N, P>& a, const B& b) {
  vec<T, N> r{};
  for (int i = 0; i < N; ++i) r[i] = min(a[i], detail::element<T>(b, i));
  return r;
}
template <class T, int N, bool P, class L, class H>
vec<T, N> clamp(const vec<T, N, P>& x, const L& lo, const H& hi) {
  return min(max(x, lo), hi);
}

// select(a, b, c): b where c is true, else a.
template <class T>
detail::if_scalar<T> select(T a, T b, bool c) {
  return c ? b : a;
}
template <class T, int N, bool P, bool Q, bool R>
vec<T, N> select(const vec<T, N, P>& a, const vec<T, N, Q>& b, const vec<bool, N, R>& c) {
  vec<T, N> r{};
  for (int i = 0; i < N; ++i) r[i] = c[i] ? b[i] : a[i];
  return r;
}

template <class F, std::enable_if_t<detail::is_float_v<F>, int> = 0>
bool isnan(F x) {
  return std::isnan(static_cast<detail::compute_t<F>>(x));
}
template <class F, std::enable_if_t<detail::is_float_v<F>, int> = 0>
bool isinf(F x) {
  return std::isinf(static_cast<detail::compute_t<F>>(x));
}
template <class F, std::enable_if_t<detail::is_float_v<F>, int> = 0>
bool isfinite(F x) {
  return std::isfinite(static_cast<detail::compute_t<F>>(x));
}
#define EMU_SHIM_CLASSIFY(name)                                                     \
  template <class F, int N, bool P, std::enable_if_t<detail::is_float_v<F>, int> = 0> \
  vec<bool, N> name(const vec<F, N, P>& a) {                                        \
    vec<bool, N> r{};                                                               \
    for (int i = 0; i < N; ++i) r[i] = name(a[i]);                                  \
    return r;                                                                       \
  }
EMU_SHIM_CLASSIFY(isnan)
EMU_SHIM_CLASSIFY(isinf)
EMU_SHIM_CLASSIFY(isfinite)
#undef EMU_SHIM_CLASSIFY

// numeric_limits: std's for the built-in types, and the 16-bit floats' own.
template <class T>
struct numeric_limits : std::numeric_limits<T> {};

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
  static constexpr T min() { return T::from_bits(Min); }
  static constexpr T max() { return T::from_bits(Max); }
  static constexpr T lowest() { return T::from_bits(static_cast<uint16_t>(Max | 0x8000u)); }
  static constexpr T epsilon() { return T::from_bits(Eps); }
  static constexpr T denorm_min() { return T::from_bits(DenormMin); }
  static constexpr T infinity() { return T::from_bits(Inf); }
  static constexpr T quiet_NaN() { return T::from_bits(NaN); }
};
template <>
struct numeric_limits<half>
    : storage_float_limits<detail::binary16, 0x7bff, 0x0400, 0x1400, 0x0001, 0x7c00, 0x7e00, 11> {};
template <>
struct numeric_limits<bfloat>
    : storage_float_limits<detail::bfloat16, 0x7f7f, 0x0080, 0x3c00, 0x0001, 0x7f80, 0x7fc0, 8> {};

}  // namespace metal

// MSL constants that <cmath> / <cfloat> do not define (INFINITY, NAN, FLT_MAX, FLT_MIN come from there).
#define HALF_MAX (::metal::half::from_bits(0x7bffu))
#define HALF_MIN (::metal::half::from_bits(0x0400u))
#define M_PI_F 3.14159265358979323846264338327950288f
#define M_LOG2E_F 1.44269504088896340735992468100189214f
#define M_LN2_F 0.693147180559945309417232121458176568f
#ifndef MAXFLOAT
#define MAXFLOAT 3.40282347e+38F
#endif
