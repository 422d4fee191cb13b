// MSL vector types on CUDA: vec<T, N> (N = 2, 3, 4) with .x .y .z .w (and .r .g .b .a), operator[], element-wise
// arithmetic and comparisons, MSL's sizes and alignments (so a `vec<bfloat, 4>*` load is one 8-byte access), and
// packed vectors. The same API as the emulator's src/emu/shim/vec.h; see there for the rules. In namespace cu_msl:
// CUDA's own float4, uint2, ... stay untouched at global scope.
#pragma once
#include <cstddef>
#include <type_traits>

#include "scalar.cuh"

namespace cu_msl {

template <class T, int N, bool Packed = false>
struct vec;

template <class T>
struct is_vec : std::false_type {};
template <class T, int N, bool P>
struct is_vec<vec<T, N, P>> : std::true_type {};

namespace detail {

template <int N, bool Packed>
constexpr int vec_slots = (N == 3 && !Packed) ? 4 : N;
template <class T, int N, bool Packed>
constexpr std::size_t vec_align = Packed ? alignof(T) : vec_slots<N, Packed> * sizeof(T);

// The union makes .x and v[0] the same object; with constant indices (unrolled loops) both stay in registers.
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
  MTLINV_HD constexpr explicit vec(S s) : detail::vec_storage<T, N, Packed>{} {
#pragma unroll
    for (int i = 0; i < N; ++i) this->v[i] = static_cast<T>(s);
  }

  // Scalars and vectors whose components add up to N, in order: float4(a, b, c, d), float4(f3, 1.0f), ...
  template <class... A, std::enable_if_t<(sizeof...(A) >= 2) && detail::all_components<A...> &&
                                             detail::total_components<A...> == N, int> = 0>
  MTLINV_HD constexpr vec(const A&... parts) : detail::vec_storage<T, N, Packed>{} {
    int i = 0;
    (put(i, parts), ...);
  }

  // Element type conversion is explicit: float4(h4). The source is copied whole first: float4(*(half4*)p) then
  // reads memory as one 8-byte vector load, where element-wise reads became four 2-byte loads (seen in the PTX).
  template <class U, bool Q, std::enable_if_t<!std::is_same<U, T>::value, int> = 0>
  MTLINV_HD constexpr explicit vec(const vec<U, N, Q>& o) : detail::vec_storage<T, N, Packed>{} {
    const vec<U, N, Q> whole = o;
#pragma unroll
    for (int i = 0; i < N; ++i) this->v[i] = static_cast<T>(whole[i]);
  }
  // Packed <-> unpacked with the same elements is implicit.
  template <bool Q, std::enable_if_t<Q != Packed, int> = 0>
  MTLINV_HD constexpr vec(const vec<T, N, Q>& o) : detail::vec_storage<T, N, Packed>{} {
#pragma unroll
    for (int i = 0; i < N; ++i) this->v[i] = o[i];
  }

  MTLINV_HD constexpr T& operator[](std::size_t i) { return this->v[i]; }
  MTLINV_HD constexpr const T& operator[](std::size_t i) const { return this->v[i]; }

  template <class O>
  MTLINV_HD vec& operator+=(const O& o) { return *this = *this + o; }
  template <class O>
  MTLINV_HD vec& operator-=(const O& o) { return *this = *this - o; }
  template <class O>
  MTLINV_HD vec& operator*=(const O& o) { return *this = *this * o; }
  template <class O>
  MTLINV_HD vec& operator/=(const O& o) { return *this = *this / o; }
  template <class O>
  MTLINV_HD vec& operator%=(const O& o) { return *this = *this % o; }
  template <class O>
  MTLINV_HD vec& operator&=(const O& o) { return *this = *this & o; }
  template <class O>
  MTLINV_HD vec& operator|=(const O& o) { return *this = *this | o; }
  template <class O>
  MTLINV_HD vec& operator^=(const O& o) { return *this = *this ^ o; }
  template <class O>
  MTLINV_HD vec& operator<<=(const O& o) { return *this = *this << o; }
  template <class O>
  MTLINV_HD vec& operator>>=(const O& o) { return *this = *this >> o; }

 private:
  template <class S>
  MTLINV_HD constexpr void put(int& i, const S& s) {
    if constexpr (is_vec<S>::value) {
#pragma unroll
      for (int k = 0; k < S::size; ++k) this->v[i++] = static_cast<T>(s[k]);
    } else {
      this->v[i++] = static_cast<T>(s);
    }
  }
};

// Element-wise operators: vector op vector (same element type and length), and vector op scalar either way, the
// scalar converted to the element type first (MSL: half4 * 2.0f is a half4).
#define MTLINV_CU_VEC_BINARY(op, R, constraint)                                                  \
  template <class T, int N, bool P, bool Q, std::enable_if_t<constraint, int> = 0>               \
  MTLINV_HD vec<R, N> operator op(const vec<T, N, P>& a, const vec<T, N, Q>& b) {                \
    vec<R, N> r;                                                                                 \
    _Pragma("unroll") for (int i = 0; i < N; ++i) r[i] = static_cast<R>(a[i] op b[i]);           \
    return r;                                                                                    \
  }                                                                                              \
  template <class T, int N, bool P, class S,                                                     \
            std::enable_if_t<(constraint) && detail::is_scalar_v<S>, int> = 0>                   \
  MTLINV_HD vec<R, N> operator op(const vec<T, N, P>& a, const S& s) {                           \
    const T b = static_cast<T>(s);                                                               \
    vec<R, N> r;                                                                                 \
    _Pragma("unroll") for (int i = 0; i < N; ++i) r[i] = static_cast<R>(a[i] op b);              \
    return r;                                                                                    \
  }                                                                                              \
  template <class T, int N, bool P, class S,                                                     \
            std::enable_if_t<(constraint) && detail::is_scalar_v<S>, int> = 0>                   \
  MTLINV_HD vec<R, N> operator op(const S& s, const vec<T, N, P>& b) {                           \
    const T a = static_cast<T>(s);                                                               \
    vec<R, N> r;                                                                                 \
    _Pragma("unroll") for (int i = 0; i < N; ++i) r[i] = static_cast<R>(a op b[i]);             \
    return r;                                                                                    \
  }
MTLINV_CU_VEC_BINARY(+, T, true)
MTLINV_CU_VEC_BINARY(-, T, true)
MTLINV_CU_VEC_BINARY(*, T, true)
MTLINV_CU_VEC_BINARY(/, T, true)
MTLINV_CU_VEC_BINARY(%, T, std::is_integral<T>::value)
MTLINV_CU_VEC_BINARY(&, T, std::is_integral<T>::value)
MTLINV_CU_VEC_BINARY(|, T, std::is_integral<T>::value)
MTLINV_CU_VEC_BINARY(^, T, std::is_integral<T>::value)
MTLINV_CU_VEC_BINARY(<<, T, std::is_integral<T>::value)
MTLINV_CU_VEC_BINARY(>>, T, std::is_integral<T>::value)
MTLINV_CU_VEC_BINARY(==, bool, true)
MTLINV_CU_VEC_BINARY(!=, bool, true)
MTLINV_CU_VEC_BINARY(<, bool, true)
MTLINV_CU_VEC_BINARY(<=, bool, true)
MTLINV_CU_VEC_BINARY(>, bool, true)
MTLINV_CU_VEC_BINARY(>=, bool, true)
#undef MTLINV_CU_VEC_BINARY

template <class T, int N, bool P>
MTLINV_HD vec<T, N> operator-(const vec<T, N, P>& a) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = static_cast<T>(-a[i]);
  return r;
}
template <class T, int N, bool P>
MTLINV_HD vec<T, N> operator+(const vec<T, N, P>& a) {
  return vec<T, N>(a);
}
template <class T, int N, bool P, std::enable_if_t<std::is_integral<T>::value, int> = 0>
MTLINV_HD vec<T, N> operator~(const vec<T, N, P>& a) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = static_cast<T>(~a[i]);
  return r;
}
template <int N, bool P>
MTLINV_HD vec<bool, N> operator!(const vec<bool, N, P>& a) {
  vec<bool, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = !a[i];
  return r;
}

template <int N, bool P>
MTLINV_HD bool all(const vec<bool, N, P>& a) {
  bool r = true;
#pragma unroll
  for (int i = 0; i < N; ++i) r = r && a[i];
  return r;
}
template <int N, bool P>
MTLINV_HD bool any(const vec<bool, N, P>& a) {
  bool r = false;
#pragma unroll
  for (int i = 0; i < N; ++i) r = r || a[i];
  return r;
}
MTLINV_HD bool all(bool a) { return a; }
MTLINV_HD bool any(bool a) { return a; }

// dot: products summed left to right, each rounded separately (no fma; --fmad=false keeps it so), the same fixed
// order as the emulator's.
template <class T, int N, bool P, bool Q, std::enable_if_t<detail::is_float_v<T>, int> = 0>
MTLINV_HD T dot(const vec<T, N, P>& a, const vec<T, N, Q>& b) {
  T s = static_cast<T>(a[0] * b[0]);
#pragma unroll
  for (int i = 1; i < N; ++i) s = static_cast<T>(s + a[i] * b[i]);
  return s;
}

// The MSL names, in namespace cu_msl (cuda_shim.cuh makes them visible to the kernels).
#define MTLINV_CU_VEC_NAMES(T, name)       \
  using name##2 = vec<T, 2>;               \
  using name##3 = vec<T, 3>;               \
  using name##4 = vec<T, 4>;               \
  using packed_##name##2 = vec<T, 2, true>; \
  using packed_##name##3 = vec<T, 3, true>; \
  using packed_##name##4 = vec<T, 4, true>;
MTLINV_CU_VEC_NAMES(float, float)
MTLINV_CU_VEC_NAMES(half, half)
MTLINV_CU_VEC_NAMES(bfloat, bfloat)
MTLINV_CU_VEC_NAMES(int, int)
MTLINV_CU_VEC_NAMES(unsigned int, uint)
MTLINV_CU_VEC_NAMES(short, short)
MTLINV_CU_VEC_NAMES(unsigned short, ushort)
MTLINV_CU_VEC_NAMES(char, char)
MTLINV_CU_VEC_NAMES(unsigned char, uchar)
MTLINV_CU_VEC_NAMES(bool, bool)

static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "MSL float4 layout");
static_assert(sizeof(float3) == 16 && alignof(float3) == 16, "MSL float3 layout");
static_assert(sizeof(half4) == 8 && alignof(half4) == 8, "MSL half4 layout");
static_assert(sizeof(bfloat4) == 8 && alignof(bfloat4) == 8, "MSL bfloat4 layout");
static_assert(sizeof(packed_float3) == 12 && alignof(packed_float3) == 4, "MSL packed_float3 layout");
static_assert(std::is_trivially_copyable<float4>::value, "vectors must be copyable as bytes");

}  // namespace cu_msl
