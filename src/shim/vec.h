// MSL vector types: vec<T, N> (N = 2, 3, 4) with .x .y .z .w (and .r .g .b .a), operator[], element-wise
// arithmetic and comparisons, and MSL's sizes and alignments (so a `vec<bfloat, 4>*` load is one 8-byte access).
// Packed vectors (packed_float3, ...) are the same template with Packed = true: N * sizeof(T) bytes aligned like
// T; arithmetic on them yields plain vectors.
//
// Not provided: swizzles (.xy, .zyx, ...), and implicit scalar-to-vector conversion (write float4(0.0f)).
//
// The target defines first, in MTLINV_SHIM_NS::detail, where `explicit vec(vec<U, N>)` converts otherwise than
// element by element (the hottest conversion of the kernels: every 16-bit vector load of the matmuls):
//   template <class T, class U, int N> constexpr bool converts_whole: whether it does, for these types;
//   convert_whole(T* dst, const vec<U, N, Q>& src): sets dst[0..N) to src's elements converted to T, exactly as
//   static_cast<T> converts each.
#pragma once
#include <cstddef>
#include <type_traits>

#include "params.h"

namespace MTLINV_SHIM_NS {

template <class T, int N, bool Packed = false>
struct vec;

template <class T>
struct is_vec : std::false_type {};
template <class T, int N, bool P>
struct is_vec<vec<T, N, P>> : std::true_type {};

namespace detail {

// MSL layout: an N-vector takes N elements (a 3-vector takes 4) and is aligned to its size; packed vectors take
// N elements aligned like one.
template <int N, bool Packed>
constexpr int vec_slots = (N == 3 && !Packed) ? 4 : N;
template <class T, int N, bool Packed>
constexpr std::size_t vec_align = Packed ? alignof(T) : vec_slots<N, Packed> * sizeof(T);

// The union makes .x and v[0] the same object (both host compilers and nvcc define this type punning), so
// operator[] indexes an array instead of offsetting from a member; with constant indices (unrolled loops) CUDA
// keeps both in registers.
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
  MTLINV_SHIM_FN constexpr explicit vec(S s) : detail::vec_storage<T, N, Packed>{} {
    MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) this->v[i] = static_cast<T>(s);
  }

  // Scalars and vectors whose components add up to N, in order: float4(a, b, c, d), float4(f3, 1.0f), ...
  template <class... A, std::enable_if_t<(sizeof...(A) >= 2) && detail::all_components<A...> &&
                                             detail::total_components<A...> == N, int> = 0>
  MTLINV_SHIM_FN constexpr vec(const A&... parts) : detail::vec_storage<T, N, Packed>{} {
    int i = 0;
    (put(i, parts), ...);
  }

  // Element type conversion is explicit: float4(h4). Where the target has a better way, it converts (see the top).
  template <class U, bool Q, std::enable_if_t<!std::is_same<U, T>::value, int> = 0>
  MTLINV_SHIM_FN constexpr explicit vec(const vec<U, N, Q>& o) : detail::vec_storage<T, N, Packed>{} {
    if constexpr (detail::converts_whole<T, U, N>) {
      detail::convert_whole(this->v, o);
    } else {
      MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) this->v[i] = static_cast<T>(o[i]);
    }
  }
  // Packed <-> unpacked with the same elements is implicit.
  template <bool Q, std::enable_if_t<Q != Packed, int> = 0>
  MTLINV_SHIM_FN constexpr vec(const vec<T, N, Q>& o) : detail::vec_storage<T, N, Packed>{} {
    MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) this->v[i] = o[i];
  }

  MTLINV_SHIM_FN constexpr T& operator[](std::size_t i) { return this->v[i]; }
  MTLINV_SHIM_FN constexpr const T& operator[](std::size_t i) const { return this->v[i]; }

  template <class O>
  MTLINV_SHIM_FN vec& operator+=(const O& o) { return *this = *this + o; }
  template <class O>
  MTLINV_SHIM_FN vec& operator-=(const O& o) { return *this = *this - o; }
  template <class O>
  MTLINV_SHIM_FN vec& operator*=(const O& o) { return *this = *this * o; }
  template <class O>
  MTLINV_SHIM_FN vec& operator/=(const O& o) { return *this = *this / o; }
  template <class O>
  MTLINV_SHIM_FN vec& operator%=(const O& o) { return *this = *this % o; }
  template <class O>
  MTLINV_SHIM_FN vec& operator&=(const O& o) { return *this = *this & o; }
  template <class O>
  MTLINV_SHIM_FN vec& operator|=(const O& o) { return *this = *this | o; }
  template <class O>
  MTLINV_SHIM_FN vec& operator^=(const O& o) { return *this = *this ^ o; }
  template <class O>
  MTLINV_SHIM_FN vec& operator<<=(const O& o) { return *this = *this << o; }
  template <class O>
  MTLINV_SHIM_FN vec& operator>>=(const O& o) { return *this = *this >> o; }

 private:
  template <class S>
  MTLINV_SHIM_FN constexpr void put(int& i, const S& s) {
    if constexpr (is_vec<S>::value) {
      MTLINV_SHIM_UNROLL for (int k = 0; k < S::size; ++k) this->v[i++] = static_cast<T>(s[k]);
    } else {
      this->v[i++] = static_cast<T>(s);
    }
  }
};

// Element-wise operators: vector op vector (same element type and length), and vector op scalar either way, the
// scalar converted to the element type first (MSL: half4 * 2.0f is a half4).
#define MTLINV_SHIM_VEC_BINARY(op, R, constraint)                                                \
  template <class T, int N, bool P, bool Q, std::enable_if_t<constraint, int> = 0>               \
  MTLINV_SHIM_FN vec<R, N> operator op(const vec<T, N, P>& a, const vec<T, N, Q>& b) {           \
    vec<R, N> r;                                                                                 \
    MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = static_cast<R>(a[i] op b[i]);          \
    return r;                                                                                    \
  }                                                                                              \
  template <class T, int N, bool P, class S,                                                     \
            std::enable_if_t<(constraint) && detail::is_scalar_v<S>, int> = 0>                   \
  MTLINV_SHIM_FN vec<R, N> operator op(const vec<T, N, P>& a, const S& s) {                      \
    const T b = static_cast<T>(s);                                                               \
    vec<R, N> r;                                                                                 \
    MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = static_cast<R>(a[i] op b);             \
    return r;                                                                                    \
  }                                                                                              \
  template <class T, int N, bool P, class S,                                                     \
            std::enable_if_t<(constraint) && detail::is_scalar_v<S>, int> = 0>                   \
  MTLINV_SHIM_FN vec<R, N> operator op(const S& s, const vec<T, N, P>& b) {                      \
    const T a = static_cast<T>(s);                                                               \
    vec<R, N> r;                                                                                 \
    MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = static_cast<R>(a op b[i]);             \
    return r;                                                                                    \
  }
MTLINV_SHIM_VEC_BINARY(+, T, true)
MTLINV_SHIM_VEC_BINARY(-, T, true)
MTLINV_SHIM_VEC_BINARY(*, T, true)
MTLINV_SHIM_VEC_BINARY(/, T, true)
MTLINV_SHIM_VEC_BINARY(%, T, std::is_integral<T>::value)
MTLINV_SHIM_VEC_BINARY(&, T, std::is_integral<T>::value)
MTLINV_SHIM_VEC_BINARY(|, T, std::is_integral<T>::value)
MTLINV_SHIM_VEC_BINARY(^, T, std::is_integral<T>::value)
MTLINV_SHIM_VEC_BINARY(<<, T, std::is_integral<T>::value)
MTLINV_SHIM_VEC_BINARY(>>, T, std::is_integral<T>::value)
MTLINV_SHIM_VEC_BINARY(==, bool, true)
MTLINV_SHIM_VEC_BINARY(!=, bool, true)
MTLINV_SHIM_VEC_BINARY(<, bool, true)
MTLINV_SHIM_VEC_BINARY(<=, bool, true)
MTLINV_SHIM_VEC_BINARY(>, bool, true)
MTLINV_SHIM_VEC_BINARY(>=, bool, true)
#undef MTLINV_SHIM_VEC_BINARY

template <class T, int N, bool P>
MTLINV_SHIM_FN vec<T, N> operator-(const vec<T, N, P>& a) {
  vec<T, N> r;
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = static_cast<T>(-a[i]);
  return r;
}
template <class T, int N, bool P>
MTLINV_SHIM_FN vec<T, N> operator+(const vec<T, N, P>& a) {
  return vec<T, N>(a);
}
template <class T, int N, bool P, std::enable_if_t<std::is_integral<T>::value, int> = 0>
MTLINV_SHIM_FN vec<T, N> operator~(const vec<T, N, P>& a) {
  vec<T, N> r;
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = static_cast<T>(~a[i]);
  return r;
}
template <int N, bool P>
MTLINV_SHIM_FN vec<bool, N> operator!(const vec<bool, N, P>& a) {
  vec<bool, N> r;
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r[i] = !a[i];
  return r;
}

// True when every (any) element of a bool vector is true. No early exit: straight-line code once unrolled.
template <int N, bool P>
MTLINV_SHIM_FN bool all(const vec<bool, N, P>& a) {
  bool r = true;
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r = r && a[i];
  return r;
}
template <int N, bool P>
MTLINV_SHIM_FN bool any(const vec<bool, N, P>& a) {
  bool r = false;
  MTLINV_SHIM_UNROLL for (int i = 0; i < N; ++i) r = r || a[i];
  return r;
}
MTLINV_SHIM_FN constexpr bool all(bool a) { return a; }
MTLINV_SHIM_FN constexpr bool any(bool a) { return a; }

// dot: products summed left to right, each rounded separately (no fma; CUDA's --fmad=false keeps it so), so the
// order is fixed, documented, and the same on every target.
template <class T, int N, bool P, bool Q, std::enable_if_t<detail::is_float_v<T>, int> = 0>
MTLINV_SHIM_FN T dot(const vec<T, N, P>& a, const vec<T, N, Q>& b) {
  T s = static_cast<T>(a[0] * b[0]);
  MTLINV_SHIM_UNROLL for (int i = 1; i < N; ++i) s = static_cast<T>(s + a[i] * b[i]);
  return s;
}

static_assert(sizeof(vec<float, 4>) == 16 && alignof(vec<float, 4>) == 16, "MSL float4 layout");
static_assert(sizeof(vec<float, 3>) == 16 && alignof(vec<float, 3>) == 16, "MSL float3 layout");
static_assert(sizeof(vec<float, 2>) == 8 && alignof(vec<float, 2>) == 8, "MSL float2 layout");
static_assert(sizeof(vec<half, 4>) == 8 && alignof(vec<half, 4>) == 8, "MSL half4 layout");
static_assert(sizeof(vec<half, 3>) == 8 && alignof(vec<half, 3>) == 8, "MSL half3 layout");
static_assert(sizeof(vec<bfloat, 4>) == 8 && alignof(vec<bfloat, 4>) == 8, "MSL bfloat4 layout");
static_assert(sizeof(vec<unsigned char, 4>) == 4 && alignof(vec<unsigned char, 4>) == 4, "MSL uchar4 layout");
static_assert(sizeof(vec<float, 3, true>) == 12 && alignof(vec<float, 3, true>) == 4, "MSL packed_float3 layout");
static_assert(std::is_trivially_copyable<vec<float, 4>>::value, "vectors must be copyable as bytes");

}  // namespace MTLINV_SHIM_NS

// The element types of MSL's vector names, and the names of one element type: name2 ... packed_name4. A target
// expands MTLINV_SHIM_VEC_ELEMENTS(MTLINV_SHIM_VEC_NAMES) where its kernels look the names up, with the scalar
// names (half, uint, ...) visible there.
#define MTLINV_SHIM_VEC_ELEMENTS(X) \
  X(float) X(half) X(bfloat) X(int) X(uint) X(short) X(ushort) X(char) X(uchar) X(bool)
#define MTLINV_SHIM_VEC_NAMES(name)                              \
  using name##2 = ::MTLINV_SHIM_NS::vec<name, 2>;                \
  using name##3 = ::MTLINV_SHIM_NS::vec<name, 3>;                \
  using name##4 = ::MTLINV_SHIM_NS::vec<name, 4>;                \
  using packed_##name##2 = ::MTLINV_SHIM_NS::vec<name, 2, true>; \
  using packed_##name##3 = ::MTLINV_SHIM_NS::vec<name, 3, true>; \
  using packed_##name##4 = ::MTLINV_SHIM_NS::vec<name, 4, true>;
