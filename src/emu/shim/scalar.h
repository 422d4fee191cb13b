// MSL scalar types that C++ lacks: the short integer names, and the 16-bit floats `half` (IEEE binary16) and
// `bfloat` (bfloat16).
//
// Both 16-bit floats are storage types over a uint16_t payload. Arithmetic widens to float, computes, and rounds
// back once; for + - * / that is the correctly rounded 16-bit result, because binary32 carries at least 2p + 2
// significand bits for p = 11 (half) and p = 8 (bfloat), so rounding twice never differs from rounding once.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__F16C__)
#include <immintrin.h>
#endif

// Same types as glibc's <sys/types.h> typedefs of these names, so either may come first.
using uint = unsigned int;
using ushort = unsigned short;
using uchar = unsigned char;
using ulong = unsigned long;  // MSL's long is 64-bit, as on LP64 Linux

namespace metal {
namespace detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// binary32 -> binary16, round to nearest, ties to even; overflow gives inf. A NaN keeps its sign and the top 9
// bits of its payload and becomes quiet: the same bits as the F16C instruction, so the emulator's results do not
// depend on the build's -m flags (the tests compare both paths).
inline uint16_t f32_to_f16_soft(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {
    return ax == 0x7f800000u ? static_cast<uint16_t>(sign | 0x7c00u)
                             : static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: rounds past 65504
  if (ax >= 0x38800000u) {                                              // >= 2^-14: a normal half
    // Rebias the exponent (127 -> 15), then round away the low 13 bits; a carry ripples into the exponent.
    uint32_t m = ax - 0x38000000u;
    m += 0xfffu + ((m >> 13) & 1u);
    return static_cast<uint16_t>(sign | (m >> 13));
  }
  if (ax <= 0x33000000u) return sign;  // <= 2^-25: half of the smallest subnormal ties to even, i.e. zero
  // Subnormal result: the significand with its implicit bit, in units of 2^-24, rounded to nearest even.
  const uint32_t e = ax >> 23;  // 102..112
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t r = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // may become 0x400: the smallest normal, correctly
  return static_cast<uint16_t>(sign | r);
}

// binary16 -> binary32, exact. NaNs become quiet with their payload kept, like F16C.
inline float f16_to_f32_soft(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return bits_float(sign | 0x7f800000u | (m ? 0x400000u : 0u) | (m << 13));
  if (e == 0) {
    // Subnormal (or zero): m * 2^-24 is exact in float.
    const float mag = static_cast<float>(m) * 0x1p-24f;
    return bits_float(sign | float_bits(mag));
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

struct binary16 {
  static uint16_t from_float(float f) {
#if defined(__F16C__)
    return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
    return f32_to_f16_soft(f);
#endif
  }
  static float to_float(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32_soft(h);
#endif
  }
};

// bfloat16 is the top half of a binary32, so widening is a shift and narrowing rounds away the low 16 bits
// (nearest even; a carry into the exponent gives the next binade or inf). NaNs stay NaN: quiet, payload's top
// bits and sign kept.
struct bfloat16 {
  static uint16_t from_float(float f) {
    const uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  static float to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }
};

}  // namespace detail

// A 16-bit float stored as bits. Converts implicitly from any arithmetic type (MSL's `half h = 1;`) and to float;
// conversion between the two formats is explicit, as in MSL. Conversions from double or from integers beyond
// 2^24 go through float, so they may round twice (MSL has no double; kernels convert small integers).
template <class Format>
struct storage_float {
  uint16_t bits;

  storage_float() = default;
  template <class S, std::enable_if_t<std::is_arithmetic<S>::value, int> = 0>
  storage_float(S v) : bits(Format::from_float(static_cast<float>(v))) {}
  template <class Other, std::enable_if_t<!std::is_same<Other, Format>::value, int> = 0>
  explicit storage_float(storage_float<Other> v) : bits(Format::from_float(static_cast<float>(v))) {}

  operator float() const { return Format::to_float(bits); }

  static constexpr storage_float from_bits(uint16_t b) { return storage_float(bits_tag{}, b); }

  // Negation flips the sign bit: exact, and -0 / NaN behave as in IEEE.
  storage_float operator-() const { return from_bits(static_cast<uint16_t>(bits ^ 0x8000u)); }
  storage_float operator+() const { return *this; }

  template <class S>
  storage_float& operator+=(const S& o) { return *this = storage_float(*this + o); }
  template <class S>
  storage_float& operator-=(const S& o) { return *this = storage_float(*this - o); }
  template <class S>
  storage_float& operator*=(const S& o) { return *this = storage_float(*this * o); }
  template <class S>
  storage_float& operator/=(const S& o) { return *this = storage_float(*this / o); }

 private:
  struct bits_tag {};
  constexpr storage_float(bits_tag, uint16_t b) : bits(b) {}
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
#define EMU_SHIM_STORAGE_FLOAT_ARITH(op)                                                        \
  template <class F>                                                                            \
  storage_float<F> operator op(storage_float<F> a, storage_float<F> b) {                        \
    return storage_float<F>(static_cast<float>(a) op static_cast<float>(b));                    \
  }                                                                                             \
  template <class F, class S, std::enable_if_t<std::is_integral<S>::value, int> = 0>            \
  storage_float<F> operator op(storage_float<F> a, S b) {                                       \
    return a op storage_float<F>(b);                                                            \
  }                                                                                             \
  template <class F, class S, std::enable_if_t<std::is_integral<S>::value, int> = 0>            \
  storage_float<F> operator op(S a, storage_float<F> b) {                                       \
    return storage_float<F>(a) op b;                                                            \
  }                                                                                             \
  template <class F, class S, std::enable_if_t<std::is_floating_point<S>::value, int> = 0>      \
  S operator op(storage_float<F> a, S b) {                                                      \
    return static_cast<S>(static_cast<float>(a)) op b;                                          \
  }                                                                                             \
  template <class F, class S, std::enable_if_t<std::is_floating_point<S>::value, int> = 0>      \
  S operator op(S a, storage_float<F> b) {                                                      \
    return a op static_cast<S>(static_cast<float>(b));                                          \
  }
EMU_SHIM_STORAGE_FLOAT_ARITH(+)
EMU_SHIM_STORAGE_FLOAT_ARITH(-)
EMU_SHIM_STORAGE_FLOAT_ARITH(*)
EMU_SHIM_STORAGE_FLOAT_ARITH(/)
#undef EMU_SHIM_STORAGE_FLOAT_ARITH

// Comparisons are exact in float whatever the other operand (integers are compared as MSL converts them).
#define EMU_SHIM_STORAGE_FLOAT_COMPARE(op)                                                      \
  template <class F>                                                                            \
  bool operator op(storage_float<F> a, storage_float<F> b) {                                    \
    return static_cast<float>(a) op static_cast<float>(b);                                      \
  }                                                                                             \
  template <class F, class S, std::enable_if_t<std::is_arithmetic<S>::value, int> = 0>          \
  bool operator op(storage_float<F> a, S b) {                                                   \
    return std::is_integral<S>::value ? a op storage_float<F>(b)                                \
                                      : static_cast<float>(a) op b;                             \
  }                                                                                             \
  template <class F, class S, std::enable_if_t<std::is_arithmetic<S>::value, int> = 0>          \
  bool operator op(S a, storage_float<F> b) {                                                   \
    return std::is_integral<S>::value ? storage_float<F>(a) op b                                \
                                      : a op static_cast<float>(b);                             \
  }
EMU_SHIM_STORAGE_FLOAT_COMPARE(==)
EMU_SHIM_STORAGE_FLOAT_COMPARE(!=)
EMU_SHIM_STORAGE_FLOAT_COMPARE(<)
EMU_SHIM_STORAGE_FLOAT_COMPARE(<=)
EMU_SHIM_STORAGE_FLOAT_COMPARE(>)
EMU_SHIM_STORAGE_FLOAT_COMPARE(>=)
#undef EMU_SHIM_STORAGE_FLOAT_COMPARE

// MSL's as_type: reinterprets the bytes of a value of the same size.
template <class U, class V>
U as_type(const V& v) {
  static_assert(sizeof(U) == sizeof(V), "as_type needs types of the same size");
  static_assert(std::is_trivially_copyable<U>::value && std::is_trivially_copyable<V>::value,
                "as_type needs plain data types");
  U u;
  std::memcpy(&u, &v, sizeof(U));
  return u;
}

}  // namespace metal

using half = metal::half;
using bfloat = metal::bfloat;
