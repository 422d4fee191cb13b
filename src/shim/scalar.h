// MSL's 16-bit floats `half` (IEEE binary16) and `bfloat` (bfloat16), as storage types over a uint16_t payload,
// and as_type. The target defines first, in MTLINV_SHIM_NS::detail, the formats binary16 and bfloat16: each with
// static from_float(float) -> uint16_t (round to nearest even) and to_float(uint16_t) -> float (exact).
//
// Arithmetic widens to float, computes, and rounds back once; for + - * / that is the correctly rounded 16-bit
// result, because binary32 carries at least 2p + 2 significand bits for p = 11 (half) and p = 8 (bfloat), so
// rounding twice never differs from rounding once.
#pragma once
#include <string.h>  // ::memcpy, which CUDA device code also knows

#include <cstdint>
#include <type_traits>

#include "params.h"

namespace MTLINV_SHIM_NS {

// A 16-bit float stored as bits. Converts implicitly from any arithmetic type (MSL's `half h = 1;`) and to float;
// conversion between the two formats is explicit, as in MSL. Conversions from double or from integers beyond
// 2^24 go through float, so they may round twice (MSL has no double; kernels convert small integers).
template <class Format>
struct storage_float {
  uint16_t bits;

  storage_float() = default;
  template <class S, std::enable_if_t<std::is_arithmetic<S>::value, int> = 0>
  MTLINV_SHIM_FN storage_float(S v) : bits(Format::from_float(static_cast<float>(v))) {}
  template <class Other, std::enable_if_t<!std::is_same<Other, Format>::value, int> = 0>
  MTLINV_SHIM_FN explicit storage_float(storage_float<Other> v) : bits(Format::from_float(static_cast<float>(v))) {}

  MTLINV_SHIM_FN operator float() const { return Format::to_float(bits); }

  static MTLINV_SHIM_FN constexpr storage_float from_bits(uint16_t b) { return storage_float(bits_tag{}, b); }

  // Negation flips the sign bit: exact, and -0 / NaN behave as in IEEE.
  MTLINV_SHIM_FN storage_float operator-() const { return from_bits(static_cast<uint16_t>(bits ^ 0x8000u)); }
  MTLINV_SHIM_FN storage_float operator+() const { return *this; }

  template <class S>
  MTLINV_SHIM_FN storage_float& operator+=(const S& o) { return *this = storage_float(*this + o); }
  template <class S>
  MTLINV_SHIM_FN storage_float& operator-=(const S& o) { return *this = storage_float(*this - o); }
  template <class S>
  MTLINV_SHIM_FN storage_float& operator*=(const S& o) { return *this = storage_float(*this * o); }
  template <class S>
  MTLINV_SHIM_FN storage_float& operator/=(const S& o) { return *this = storage_float(*this / o); }

 private:
  struct bits_tag {};
  MTLINV_SHIM_FN constexpr storage_float(bits_tag, uint16_t b) : bits(b) {}
};

using half = storage_float<detail::binary16>;
using bfloat = storage_float<detail::bfloat16>;
static_assert(sizeof(half) == 2 && alignof(half) == 2, "half must be 2 bytes like MSL's");
static_assert(sizeof(bfloat) == 2 && alignof(bfloat) == 2, "bfloat must be 2 bytes like MSL's");
static_assert(std::is_trivially_copyable<half>::value && std::is_standard_layout<half>::value,
              "half must be copyable as bytes (buffers, simd exchange, as_type)");

template <class T>
struct is_storage_float : std::false_type {};
template <class F>
struct is_storage_float<storage_float<F>> : std::true_type {};

namespace detail {
// Floating scalars (float, half, bfloat; double for host-side code) and all scalars (those plus integers, bool).
template <class T>
constexpr bool is_float_v = std::is_floating_point<T>::value || is_storage_float<T>::value;
template <class T>
constexpr bool is_scalar_v = std::is_arithmetic<T>::value || is_storage_float<T>::value;
// The type math on T is carried out in: float for the 16-bit floats, T itself otherwise.
template <class T>
using compute_t = std::conditional_t<is_storage_float<T>::value, float, T>;
}  // namespace detail

// Operators. Same format: computed in float, rounded to the format. With an integer: the integer converts to the
// 16-bit type (MSL's usual arithmetic conversions), so `h + 1` is a half. With float (or double): the result is
// float (double). Exact-match templates keep `h * 2.0f`, `h + 1`, `x < h` unambiguous against the built-in
// operators reached through `operator float`.
#define MTLINV_SHIM_STORAGE_FLOAT_ARITH(op)                                                    \
  template <class F>                                                                           \
  MTLINV_SHIM_FN storage_float<F> operator op(storage_float<F> a, storage_float<F> b) {        \
    return storage_float<F>(static_cast<float>(a) op static_cast<float>(b));                   \
  }                                                                                            \
  template <class F, class S, std::enable_if_t<std::is_integral<S>::value, int> = 0>           \
  MTLINV_SHIM_FN storage_float<F> operator op(storage_float<F> a, S b) {                       \
    return a op storage_float<F>(b);                                                           \
  }                                                                                            \
  template <class F, class S, std::enable_if_t<std::is_integral<S>::value, int> = 0>           \
  MTLINV_SHIM_FN storage_float<F> operator op(S a, storage_float<F> b) {                       \
    return storage_float<F>(a) op b;                                                           \
  }                                                                                            \
  template <class F, class S, std::enable_if_t<std::is_floating_point<S>::value, int> = 0>     \
  MTLINV_SHIM_FN S operator op(storage_float<F> a, S b) {                                      \
    return static_cast<S>(static_cast<float>(a)) op b;                                         \
  }                                                                                            \
  template <class F, class S, std::enable_if_t<std::is_floating_point<S>::value, int> = 0>     \
  MTLINV_SHIM_FN S operator op(S a, storage_float<F> b) {                                      \
    return a op static_cast<S>(static_cast<float>(b));                                         \
  }
MTLINV_SHIM_STORAGE_FLOAT_ARITH(+)
MTLINV_SHIM_STORAGE_FLOAT_ARITH(-)
MTLINV_SHIM_STORAGE_FLOAT_ARITH(*)
MTLINV_SHIM_STORAGE_FLOAT_ARITH(/)
#undef MTLINV_SHIM_STORAGE_FLOAT_ARITH

// Comparisons are exact in float whatever the other operand (integers are compared as MSL converts them).
#define MTLINV_SHIM_STORAGE_FLOAT_COMPARE(op)                                                  \
  template <class F>                                                                           \
  MTLINV_SHIM_FN bool operator op(storage_float<F> a, storage_float<F> b) {                    \
    return static_cast<float>(a) op static_cast<float>(b);                                     \
  }                                                                                            \
  template <class F, class S, std::enable_if_t<std::is_arithmetic<S>::value, int> = 0>         \
  MTLINV_SHIM_FN bool operator op(storage_float<F> a, S b) {                                   \
    return std::is_integral<S>::value ? a op storage_float<F>(b)                               \
                                      : static_cast<float>(a) op b;                            \
  }                                                                                            \
  template <class F, class S, std::enable_if_t<std::is_arithmetic<S>::value, int> = 0>         \
  MTLINV_SHIM_FN bool operator op(S a, storage_float<F> b) {                                   \
    return std::is_integral<S>::value ? storage_float<F>(a) op b                               \
                                      : a op static_cast<float>(b);                            \
  }
MTLINV_SHIM_STORAGE_FLOAT_COMPARE(==)
MTLINV_SHIM_STORAGE_FLOAT_COMPARE(!=)
MTLINV_SHIM_STORAGE_FLOAT_COMPARE(<)
MTLINV_SHIM_STORAGE_FLOAT_COMPARE(<=)
MTLINV_SHIM_STORAGE_FLOAT_COMPARE(>)
MTLINV_SHIM_STORAGE_FLOAT_COMPARE(>=)
#undef MTLINV_SHIM_STORAGE_FLOAT_COMPARE

// MSL's as_type: reinterprets the bytes of a value of the same size (the memcpy compiles to a register move).
template <class U, class V>
MTLINV_SHIM_FN U as_type(const V& v) {
  static_assert(sizeof(U) == sizeof(V), "as_type needs types of the same size");
  static_assert(std::is_trivially_copyable<U>::value && std::is_trivially_copyable<V>::value,
                "as_type needs plain data types");
  U u;
  ::memcpy(&u, &v, sizeof(U));
  return u;
}

}  // namespace MTLINV_SHIM_NS

// MSL's short integer names, declared by each target where its kernels look them up. The same types as glibc's
// <sys/types.h> typedefs of these names, so either may come first at global scope.
#define MTLINV_SHIM_INTEGER_NAMES   \
  using uint = unsigned int;        \
  using ushort = unsigned short;    \
  using uchar = unsigned char;      \
  using ulong = unsigned long; /* MSL's long is 64-bit, as on LP64 Linux */
