// MSL scalar types on CUDA: the short integer names, and the 16-bit floats `half` (IEEE binary16, over __half's
// conversions) and `bfloat` (over __nv_bfloat16's), both as storage types like the emulator's (src/emu/shim/scalar.h).
//
// Arithmetic widens to float, computes and rounds back once (round to nearest even), as MSL specifies: for
// + - * / that is the correctly rounded 16-bit result, because binary32 carries more than 2p + 2 significand bits
// for p = 11 and p = 8. CUDA's own __half operators would give the same bits; going through float keeps one code
// path for both formats and for the mixed-type rules below.
//
// Everything lives in namespace cu_msl; cuda_shim.cuh brings the names into the kernels' namespace, because CUDA
// declares its own `float4`, `uint2`, ... (and, unless CUDA_NO_HALF, `half`) at global scope.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Host and device, always inlined: these are one or two instructions each.
#define MTLINV_HD __host__ __device__ __forceinline__

namespace cu_msl {

using uint = unsigned int;
using ushort = unsigned short;
using uchar = unsigned char;
using ulong = unsigned long;  // MSL's long is 64-bit, as on LP64 Linux

namespace detail {

// Conversions through CUDA's intrinsics: cvt.rn on the device (sm_90 has it for both formats), the same rounding
// in software on the host.
struct binary16 {
  static MTLINV_HD uint16_t from_float(float f) { return __half_as_ushort(__float2half_rn(f)); }
  static MTLINV_HD float to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
};
struct bfloat16 {
  static MTLINV_HD uint16_t from_float(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
  static MTLINV_HD float to_float(uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
};

}  // namespace detail

// A 16-bit float stored as bits. Converts implicitly from any arithmetic type and to float; conversion between
// the two formats is explicit, as in MSL.
template <class Format>
struct storage_float {
  uint16_t bits;

  storage_float() = default;
  template <class S, std::enable_if_t<std::is_arithmetic<S>::value, int> = 0>
  MTLINV_HD storage_float(S v) : bits(Format::from_float(static_cast<float>(v))) {}
  template <class Other, std::enable_if_t<!std::is_same<Other, Format>::value, int> = 0>
  MTLINV_HD explicit storage_float(storage_float<Other> v) : bits(Format::from_float(static_cast<float>(v))) {}

  MTLINV_HD operator float() const { return Format::to_float(bits); }

  static MTLINV_HD constexpr storage_float from_bits(uint16_t b) { return storage_float(bits_tag{}, b); }

  // Negation flips the sign bit: exact, and -0 / NaN behave as in IEEE.
  MTLINV_HD storage_float operator-() const { return from_bits(static_cast<uint16_t>(bits ^ 0x8000u)); }
  MTLINV_HD storage_float operator+() const { return *this; }

  template <class S>
  MTLINV_HD storage_float& operator+=(const S& o) { return *this = storage_float(*this + o); }
  template <class S>
  MTLINV_HD storage_float& operator-=(const S& o) { return *this = storage_float(*this - o); }
  template <class S>
  MTLINV_HD storage_float& operator*=(const S& o) { return *this = storage_float(*this * o); }
  template <class S>
  MTLINV_HD storage_float& operator/=(const S& o) { return *this = storage_float(*this / o); }

 private:
  struct bits_tag {};
  MTLINV_HD constexpr storage_float(bits_tag, uint16_t b) : bits(b) {}
};

using half = storage_float<detail::binary16>;
using bfloat = storage_float<detail::bfloat16>;
static_assert(sizeof(half) == 2 && alignof(half) == 2, "half must be 2 bytes like MSL's");
static_assert(sizeof(bfloat) == 2 && alignof(bfloat) == 2, "bfloat must be 2 bytes like MSL's");
static_assert(std::is_trivially_copyable<half>::value, "half must be copyable as bytes");

template <class T>
struct is_storage_float : std::false_type {};
template <class F>
struct is_storage_float<storage_float<F>> : std::true_type {};

namespace detail {
template <class T>
constexpr bool is_float_v = std::is_floating_point<T>::value || is_storage_float<T>::value;
template <class T>
constexpr bool is_scalar_v = std::is_arithmetic<T>::value || is_storage_float<T>::value;
// The type math on T is carried out in: float for the 16-bit floats, T itself otherwise.
template <class T>
using compute_t = std::conditional_t<is_storage_float<T>::value, float, T>;
}  // namespace detail

// Same format: computed in float, rounded to the format. With an integer: the integer converts to the 16-bit type
// first (MSL's usual arithmetic conversions), so `h + 1` is a half. With float: the result is float. The
// exact-match templates keep these unambiguous against the built-in operators reached through `operator float`.
#define MTLINV_CU_STORAGE_ARITH(op)                                                         \
  template <class F>                                                                        \
  MTLINV_HD storage_float<F> operator op(storage_float<F> a, storage_float<F> b) {          \
    return storage_float<F>(static_cast<float>(a) op static_cast<float>(b));                \
  }                                                                                         \
  template <class F, class S, std::enable_if_t<std::is_integral<S>::value, int> = 0>        \
  MTLINV_HD storage_float<F> operator op(storage_float<F> a, S b) {                         \
    return a op storage_float<F>(b);                                                        \
  }                                                                                         \
  template <class F, class S, std::enable_if_t<std::is_integral<S>::value, int> = 0>        \
  MTLINV_HD storage_float<F> operator op(S a, storage_float<F> b) {                         \
    return storage_float<F>(a) op b;                                                        \
  }                                                                                         \
  template <class F, class S, std::enable_if_t<std::is_floating_point<S>::value, int> = 0>  \
  MTLINV_HD S operator op(storage_float<F> a, S b) {                                        \
    return static_cast<S>(static_cast<float>(a)) op b;                                      \
  }                                                                                         \
  template <class F, class S, std::enable_if_t<std::is_floating_point<S>::value, int> = 0>  \
  MTLINV_HD S operator op(S a, storage_float<F> b) {                                        \
    return a op static_cast<S>(static_cast<float>(b));                                      \
  }
MTLINV_CU_STORAGE_ARITH(+)
MTLINV_CU_STORAGE_ARITH(-)
MTLINV_CU_STORAGE_ARITH(*)
MTLINV_CU_STORAGE_ARITH(/)
#undef MTLINV_CU_STORAGE_ARITH

// Comparisons are exact in float whatever the other operand.
#define MTLINV_CU_STORAGE_COMPARE(op)                                                       \
  template <class F>                                                                        \
  MTLINV_HD bool operator op(storage_float<F> a, storage_float<F> b) {                      \
    return static_cast<float>(a) op static_cast<float>(b);                                  \
  }                                                                                         \
  template <class F, class S, std::enable_if_t<std::is_arithmetic<S>::value, int> = 0>      \
  MTLINV_HD bool operator op(storage_float<F> a, S b) {                                     \
    return std::is_integral<S>::value ? a op storage_float<F>(b) : static_cast<float>(a) op b; \
  }                                                                                         \
  template <class F, class S, std::enable_if_t<std::is_arithmetic<S>::value, int> = 0>      \
  MTLINV_HD bool operator op(S a, storage_float<F> b) {                                     \
    return std::is_integral<S>::value ? storage_float<F>(a) op b : a op static_cast<float>(b); \
  }
MTLINV_CU_STORAGE_COMPARE(==)
MTLINV_CU_STORAGE_COMPARE(!=)
MTLINV_CU_STORAGE_COMPARE(<)
MTLINV_CU_STORAGE_COMPARE(<=)
MTLINV_CU_STORAGE_COMPARE(>)
MTLINV_CU_STORAGE_COMPARE(>=)
#undef MTLINV_CU_STORAGE_COMPARE

// MSL's as_type: reinterprets the bytes of a value of the same size (memcpy compiles to a register move).
template <class U, class V>
MTLINV_HD U as_type(const V& v) {
  static_assert(sizeof(U) == sizeof(V), "as_type needs types of the same size");
  static_assert(std::is_trivially_copyable<U>::value && std::is_trivially_copyable<V>::value,
                "as_type needs plain data types");
  U u;
  memcpy(&u, &v, sizeof(U));
  return u;
}

}  // namespace cu_msl
