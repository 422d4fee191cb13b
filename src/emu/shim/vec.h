// MSL vector types: vec<T, N> (N = 2, 3, 4) with .x .y .z .w (and .r .g .b .a), operator[], element-wise
// arithmetic and comparisons, and MSL's sizes and alignments. Packed vectors (packed_float3, ...) are the same
// template with Packed = true: N * sizeof(T) bytes aligned like T; arithmetic on them yields plain vectors.
//
// Not provided: swizzles (.xy, .zyx, ...), and implicit scalar-to-vector conversion (write float4(0.0f)).
#pragma once
#include <cstddef>
#include <type_traits>
#if defined(__F16C__) && defined(__SSE4_1__)
#include <immintrin.h>
#endif

#include "scalar.h"

namespace metal {

template <class T, int N, bool Packed = false>
struct vec;

template <class T>
struct is_vec : std::false_type {};
template <class T, int N, bool P>
struct is_vec<vec<T, N, P>> : std::true_type {};

namespace detail {

// Four half or bfloat values to float in one step (F16C / SSE4.1); exact, like the scalar conversions.
#if defined(__F16C__) && defined(__SSE4_1__)
template <class U>
constexpr bool widens_fast = std::is_same<U, half>::value || std::is_same<U, bfloat>::value;
template <class U>
inline void widen4(const U* src, float* dst) {
  const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
  if constexpr (std::is_same<U, half>::value) {
    _mm_storeu_ps(dst, _mm_cvtph_ps(raw));
  } else {
    _mm_storeu_ps(dst, _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(raw), 16)));
  }
}
#else
template <class U>
constexpr bool widens_fast = false;
template <class U>
inline void widen4(const U*, float*) {}
#endif

// MSL layout: an N-vector takes N elements (a 3-vector takes 4) and is aligned to its size; packed vectors take
// N elements aligned like one.
template <int N, bool Packed>
constexpr int vec_slots = (N == 3 && !Packed) ? 4 : N;
template <class T, int N, bool Packed>
constexpr std::size_t vec_align = Packed ? alignof(T) : vec_slots<N, Packed> * sizeof(T);

// The union makes .x and v[0] the same object (both compilers define this type punning), so operator[] indexes
// an array instead of offsetting from a member.
template <class T, int N, bool Packed>
struct vec_storage;
template <class T, bool P>
struct alignas(vec_align<T, 2, P>) vec_storage<T, 2, P> {
  union {
    T v[2];
    struct { T x, y; };
    struct { T r, g; };
  };
};
template <class T, bool P>
struct alignas(vec_align<T, 3, P>) vec_storage<T, 3, P> {
  union {
    T v[vec_slots<3, P>];
    struct { T x, y, z; };
    struct { T r, g, b; };
  };
};
template <class T, bool P>
struct alignas(vec_align<T, 4, P>) vec_storage<T, 4, P> {
  union {
    T v[4];
    struct { T x, y, z, w; };
    struct { T r, g, b, a; };
  };
};

// How many components an argument of a vector constructor supplies: 1 for a scalar, M for an M-vector.
template <class A, class = void>
struct components : std::integral_constant<int, 0> {};
template <class A>
struct components<A, std::enable_if_t<is_scalar_v<A>>> : std::integral_constant<int, 1> {};
template <class U, int M, bool Q>
struct components<vec<U, M, Q>> : std::integral_constant<int, M> {};

template <class... A>
constexpr int total_components = (0 + ... + components<A>::value);
template <class... A>
constexpr bool all_components = (true && ... && (components<A>::value > 0));

}  // namespace detail

template <class T, int N, bool Packed>
struct vec : detail::vec_storage<T, N, Packed> {
  static_assert(N >= 2 && N <= 4, "MSL vectors have 2, 3 or 4 elements");
  using value_type = T;
  static constexpr int size = N;

  vec() = default;

  // One scalar fills every element (explicit, as in MSL: float4(0.0f)).
  template <class S, std::enable_if_t<detail::is_scalar_v<S>, int> = 0>
  constexpr explicit vec(S s) : detail::vec_storage<T, N, Packed>{} {
    for (int i = 0; i < N; ++i) this->v[i] = static_cast<T>(s);
  }

  // Scalars and vectors whose components add up to N, in order: float4(a, b, c, d), float4(f3, 1.0f), ...
  template <class... A, std::enable_if_t<(sizeof...(A) >= 2) && detail::all_components<A...> &&
                                             detail::total_components<A...> == N, int> = 0>
  constexpr vec(const A&... parts) : detail::vec_storage<T, N, Packed>{} {
    int i = 0;
    (put(i, parts), ...);
  }

  // Element type conversion is explicit: float4(h4). Widening four 16-bit floats is the emulator's hottest
  // conversion (every vector load of the matmul kernels): done in one instruction where the CPU has one, with
  // the same exact results as the element-wise conversion.
  template <class U, bool Q, std::enable_if_t<!std::is_same<U, T>::value, int> = 0>
  explicit vec(const vec<U, N, Q>& o) : detail::vec_storage<T, N, Packed>{} {
    if constexpr (std::is_same<T, float>::value && N == 4 && detail::widens_fast<U>) {
      detail::widen4(&o[0], this->v);
    } else {
      for (int i = 0; i < N; ++i) this->v[i] = static_cast<T>(o[i]);
    }
  }
  // Packed <-> unpacked with the same elements is implicit.
  template <bool Q, std::enable_if_t<Q != Packed, int> = 0>
  constexpr vec(const vec<T, N, Q>& o) : detail::vec_storage<T, N, Packed>{} {
    for (int i = 0; i < N; ++i) this->v[i] = o[i];
  }

  constexpr T& operator[](std::size_t i) { return this->v[i]; }
  constexpr const T& operator[](std::size_t i) const { return this->v[i]; }

  template <class O>
  vec& operator+=(const O& o) { return *this = *this + o; }
  template <class O>
  vec& operator-=(const O& o) { return *this = *this - o; }
  template <class O>
  vec& operator*=(const O& o) { return *this = *this * o; }
  template <class O>
  vec& operator/=(const O& o) { return *this = *this / o; }
  template <class O>
  vec& operator%=(const O& o) { return *this = *this % o; }
  template <class O>
  vec& operator&=(const O& o) { return *this = *this & o; }
  template <class O>
  vec& operator|=(const O& o) { return *this = *this | o; }
  template <class O>
  vec& operator^=(const O& o) { return *this = *this ^ o; }
  template <class O>
  vec& operator<<=(const O& o) { return *this = *this << o; }
  template <class O>
  vec& operator>>=(const O& o) { return *this = *this >> o; }

 private:
  template <class S>
  constexpr void put(int& i, const S& s) {
    if constexpr (is_vec<S>::value) {
      for (int k = 0; k < S::size; ++k) this->v[i++] = static_cast<T>(s[k]);
    } else {
      this->v[i++] = static_cast<T>(s);
    }
  }
};

// Element-wise operators: vector op vector (same element type and length), and vector op scalar either way, the
// scalar converted to the element type first (MSL: half4 * 2.0f is a half4).
#define EMU_SHIM_VEC_BINARY(op, R, constraint)                                                         \
  template <class T, int N, bool P, bool Q, std::enable_if_t<constraint, int> = 0>                     \
  vec<R, N> operator op(const vec<T, N, P>& a, const vec<T, N, Q>& b) {                                \
    vec<R, N> r;                                                                                       \
    for (int i = 0; i < N; ++i) r[i] = static_cast<R>(a[i] op b[i]);                                   \
    return r;                                                                                          \
  }                                                                                                    \
  template <class T, int N, bool P, class S,                                                           \
            std::enable_if_t<(constraint) && detail::is_scalar_v<S>, int> = 0>                         \
  vec<R, N> operator op(const vec<T, N, P>& a, const S& s) {                                           \
    const T b = static_cast<T>(s);                                                                     \
    vec<R, N> r;                                                                                       \
    for (int i = 0; i < N; ++i) r[i] = static_cast<R>(a[i] op b);                                      \
    return r;                                                                                          \
  }                                                                                                    \
  template <class T, int N, bool P, class S,                                                           \
            std::enable_if_t<(constraint) && detail::is_scalar_v<S>, int> = 0>                         \
  vec<R, N> operator op(const S& s, const vec<T, N, P>& b) {                                           \
    const T a = static_cast<T>(s);                                                                     \
    vec<R, N> r;                                                                                       \
    for (int i = 0; i < N; ++i) r[i] = static_cast<R>(a op b[i]);                                     \
    return r;                                                                                          \
  }
EMU_SHIM_VEC_BINARY(+, T, true)
EMU_SHIM_VEC_BINARY(-, T, true)
EMU_SHIM_VEC_BINARY(*, T, true)
EMU_SHIM_VEC_BINARY(/, T, true)
EMU_SHIM_VEC_BINARY(%, T, std::is_integral<T>::value)
EMU_SHIM_VEC_BINARY(&, T, std::is_integral<T>::value)
EMU_SHIM_VEC_BINARY(|, T, std::is_integral<T>::value)
EMU_SHIM_VEC_BINARY(^, T, std::is_integral<T>::value)
EMU_SHIM_VEC_BINARY(<<, T, std::is_integral<T>::value)
EMU_SHIM_VEC_BINARY(>>, T, std::is_integral<T>::value)
EMU_SHIM_VEC_BINARY(==, bool, true)
EMU_SHIM_VEC_BINARY(!=, bool, true)
EMU_SHIM_VEC_BINARY(<, bool, true)
EMU_SHIM_VEC_BINARY(<=, bool, true)
EMU_SHIM_VEC_BINARY(>, bool, true)
EMU_SHIM_VEC_BINARY(>=, bool, true)
#undef EMU_SHIM_VEC_BINARY

template <class T, int N, bool P>
vec<T, N> operator-(const vec<T, N, P>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r[i] = static_cast<T>(-a[i]);
  return r;
}
template <class T, int N, bool P>
vec<T, N> operator+(const vec<T, N, P>& a) {
  return vec<T, N>(a);
}
template <class T, int N, bool P, std::enable_if_t<std::is_integral<T>::value, int> = 0>
vec<T, N> operator~(const vec<T, N, P>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r[i] = static_cast<T>(~a[i]);
  return r;
}
template <int N, bool P>
vec<bool, N> operator!(const vec<bool, N, P>& a) {
  vec<bool, N> r;
  for (int i = 0; i < N; ++i) r[i] = !a[i];
  return r;
}

// True when every (any) element of a bool vector is true.
template <int N, bool P>
bool all(const vec<bool, N, P>& a) {
  for (int i = 0; i < N; ++i) {
    if (!a[i]) return false;
  }
  return true;
}
template <int N, bool P>
bool any(const vec<bool, N, P>& a) {
  for (int i = 0; i < N; ++i) {
    if (a[i]) return true;
  }
  return false;
}
inline bool all(bool a) { return a; }
inline bool any(bool a) { return a; }

// dot: products summed left to right, each rounded separately (no fma), so the order is fixed and documented.
template <class T, int N, bool P, bool Q, std::enable_if_t<detail::is_float_v<T>, int> = 0>
T dot(const vec<T, N, P>& a, const vec<T, N, Q>& b) {
  T s = static_cast<T>(a[0] * b[0]);
  for (int i = 1; i < N; ++i) s = static_cast<T>(s + a[i] * b[i]);
  return s;
}

}  // namespace metal

// The MSL names, at global scope like the scalar types.
#define EMU_SHIM_VEC_NAMES(T, name)                  \
  using name##2 = ::metal::vec<T, 2>;                \
  using name##3 = ::metal::vec<T, 3>;                \
  using name##4 = ::metal::vec<T, 4>;                \
  using packed_##name##2 = ::metal::vec<T, 2, true>; \
  using packed_##name##3 = ::metal::vec<T, 3, true>; \
  using packed_##name##4 = ::metal::vec<T, 4, true>;
EMU_SHIM_VEC_NAMES(float, float)
EMU_SHIM_VEC_NAMES(::metal::half, half)
EMU_SHIM_VEC_NAMES(::metal::bfloat, bfloat)
EMU_SHIM_VEC_NAMES(int, int)
EMU_SHIM_VEC_NAMES(unsigned int, uint)
EMU_SHIM_VEC_NAMES(short, short)
EMU_SHIM_VEC_NAMES(unsigned short, ushort)
EMU_SHIM_VEC_NAMES(char, char)
EMU_SHIM_VEC_NAMES(unsigned char, uchar)
EMU_SHIM_VEC_NAMES(bool, bool)
#undef EMU_SHIM_VEC_NAMES

static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "MSL float4 layout");
static_assert(sizeof(float3) == 16 && alignof(float3) == 16, "MSL float3 layout");
static_assert(sizeof(float2) == 8 && alignof(float2) == 8, "MSL float2 layout");
static_assert(sizeof(half4) == 8 && alignof(half4) == 8, "MSL half4 layout");
static_assert(sizeof(half3) == 8 && alignof(half3) == 8, "MSL half3 layout");
static_assert(sizeof(uchar4) == 4 && alignof(uchar4) == 4, "MSL uchar4 layout");
static_assert(sizeof(packed_float3) == 12 && alignof(packed_float3) == 4, "MSL packed_float3 layout");
static_assert(std::is_trivially_copyable<float4>::value, "vectors must be copyable as bytes");
