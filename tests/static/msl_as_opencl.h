// MSL seen through clang's C++ for OpenCL (-x clcpp -cl-std=clc++2021), force-included by tools/check_static.py.
//
// Why: nothing on Linux compiles MSL, but OpenCL has the same address spaces with the same rules. Mapping
// device/threadgroup/constant/thread onto __global/__local/__constant/__private makes clang reject what the
// Metal compiler rejects: a threadgroup pointer passed where a device pointer is expected, a store through a
// constant pointer or reference, a device pointer converted to a threadgroup one.
//
// The declarations below are the part of metal_stdlib the kernels may use. Keep the list in step with
// src/emu/msl_shim.h (the emulator's implementation of the same names): a kernel that needs a new builtin adds
// it to both. Overloads are explicit per type, as in metal_stdlib, so a call with a type MSL has no overload for
// fails here too. Nothing here is ever run: bodies are absent (or dummies where constexpr needs one).
#pragma once

// common.h and args.h then take their Metal branches, which is what this check is for.
#define __METAL_VERSION__ 310
#define __HAVE_BFLOAT__ 1

#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#define device __global
#define threadgroup __local
#define constant __constant
#define thread __private

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;

// The check's rewrite of a block-scope `threadgroup T name[N];` (OpenCL allows __local variables only in
// kernel functions, and kernel templates not at all) binds `name` to __local storage of the same type.
namespace mtlinv_static {
template <class A>
__local A& threadgroup_var();

// The check's rewrite of `[[buffer(i)]]` evaluates i here: Metal takes an integral constant expression (a number or
// an enumerator of a family's slot enum) naming one of its 31 buffer slots. Anything else fails to compile.
template <unsigned long long I>
struct buffer_slot {
  static_assert(I <= 30, "[[buffer(i)]]: Metal's buffer slots are 0..30");
  static constexpr unsigned value = I;
};
}  // namespace mtlinv_static

namespace metal {

// bfloat (MSL 3.1): a distinct 16-bit float type. Conversions to and from float are explicit here; code that
// writes them explicitly is valid MSL either way.
struct bfloat {
  ushort bits;
  bfloat() = default;
  explicit bfloat(float f);
  explicit bfloat(half h);
  explicit operator float() const;
  explicit operator float() const __constant;
  explicit operator half() const;
};
bfloat operator+(bfloat a, bfloat b);
bfloat operator-(bfloat a, bfloat b);
bfloat operator*(bfloat a, bfloat b);
bfloat operator/(bfloat a, bfloat b);
bfloat operator-(bfloat a);
bool operator<(bfloat a, bfloat b);
bool operator>(bfloat a, bfloat b);
bool operator<=(bfloat a, bfloat b);
bool operator>=(bfloat a, bfloat b);
bool operator==(bfloat a, bfloat b);
bool operator!=(bfloat a, bfloat b);

// vec<T, N>: MSL's vector types with their constructors (splat, concatenation of scalars and vectors,
// explicit element-type conversion), .x/.y/.z/.w and []. Multi-letter swizzles (.xy) are not modelled.
template <class T, int N>
struct vec_members;
template <class T>
struct vec_members<T, 2> {
  T x, y;
};
template <class T>
struct vec_members<T, 3> {
  T x, y, z;
};
template <class T>
struct vec_members<T, 4> {
  T x, y, z, w;
};

template <class T, int N>
struct vec;
template <class A>
struct components {
  static constexpr int value = 1;
};
template <class U, int M>
struct components<vec<U, M>> {
  static constexpr int value = M;
};

template <class T, int N>
struct vec : vec_members<T, N> {
  static_assert(N >= 2 && N <= 4, "MSL vectors have 2, 3 or 4 components");
  vec() = default;
  vec(const vec&) = default;
  vec(const __constant vec& other);
  vec(T scalar);
  template <class A, class B, class... R>
  vec(A a, B b, R... rest) {
    static_assert(components<A>::value + components<B>::value + (0 + ... + components<R>::value) == N,
                  "vector constructor: the components do not add up to the vector size");
  }
  template <class U>
  explicit vec(vec<U, N> other);
  vec& operator=(const vec&) = default;
  T& operator[](uint i);
  T operator[](uint i) const;
  T operator[](uint i) const __constant;
};

#define MTLINV_VEC_BINARY(op)                          \
  template <class T, int N>                            \
  vec<T, N> operator op(vec<T, N> a, vec<T, N> b);     \
  template <class T, int N>                            \
  vec<T, N> operator op(vec<T, N> a, T b);             \
  template <class T, int N>                            \
  vec<T, N> operator op(T a, vec<T, N> b);             \
  template <class T, int N>                            \
  vec<T, N>& operator op##=(vec<T, N>& a, vec<T, N> b); \
  template <class T, int N>                            \
  vec<T, N>& operator op##=(vec<T, N>& a, T b);
MTLINV_VEC_BINARY(+)
MTLINV_VEC_BINARY(-)
MTLINV_VEC_BINARY(*)
MTLINV_VEC_BINARY(/)
MTLINV_VEC_BINARY(%)
MTLINV_VEC_BINARY(&)
MTLINV_VEC_BINARY(|)
MTLINV_VEC_BINARY(^)
MTLINV_VEC_BINARY(<<)
MTLINV_VEC_BINARY(>>)
#undef MTLINV_VEC_BINARY
#define MTLINV_VEC_COMPARE(op) \
  template <class T, int N>    \
  vec<bool, N> operator op(vec<T, N> a, vec<T, N> b);
MTLINV_VEC_COMPARE(<)
MTLINV_VEC_COMPARE(>)
MTLINV_VEC_COMPARE(<=)
MTLINV_VEC_COMPARE(>=)
MTLINV_VEC_COMPARE(==)
MTLINV_VEC_COMPARE(!=)
#undef MTLINV_VEC_COMPARE
template <class T, int N>
vec<T, N> operator-(vec<T, N> a);

#define MTLINV_VEC_TYPES(T) \
  typedef vec<T, 2> T##2;   \
  typedef vec<T, 3> T##3;   \
  typedef vec<T, 4> T##4;
MTLINV_VEC_TYPES(float)
MTLINV_VEC_TYPES(half)
MTLINV_VEC_TYPES(bfloat)
MTLINV_VEC_TYPES(int)
MTLINV_VEC_TYPES(uint)
MTLINV_VEC_TYPES(short)
MTLINV_VEC_TYPES(ushort)
MTLINV_VEC_TYPES(char)
MTLINV_VEC_TYPES(uchar)
MTLINV_VEC_TYPES(bool)
#undef MTLINV_VEC_TYPES

// packed_float3: three tightly packed floats (12 bytes), converted to float3 for arithmetic.
struct packed_float3 {
  float x, y, z;
  packed_float3() = default;
  packed_float3(float3 v);
  operator float3() const;
  operator float3() const __constant;
  float operator[](uint i) const;
};

// ---- the builtin list: one place; mirror of src/emu/msl_shim.h ---------------------------------------------

// Type lists the overload sets are stamped from.
#define MTLINV_FLOAT_SCALARS(X) X(float) X(half)
#define MTLINV_FLOAT_VECTORS(X) X(float2) X(float3) X(float4) X(half2) X(half3) X(half4)
#define MTLINV_FLOATS(X) MTLINV_FLOAT_SCALARS(X) MTLINV_FLOAT_VECTORS(X)
#define MTLINV_INT_SCALARS(X) X(int) X(uint) X(short) X(ushort) X(char) X(uchar)
#define MTLINV_INT_VECTORS(X) \
  X(int2) X(int3) X(int4) X(uint2) X(uint3) X(uint4) X(short2) X(short3) X(short4) X(ushort2) X(ushort3) X(ushort4)
#define MTLINV_INTS(X) MTLINV_INT_SCALARS(X) MTLINV_INT_VECTORS(X)

// Floating-point math, per element.
#define MTLINV_UNARY_FLOAT(T)                                                                                  \
  T exp(T x);                                                                                                  \
  T exp2(T x);                                                                                                 \
  T log(T x);                                                                                                  \
  T log2(T x);                                                                                                 \
  T sqrt(T x);                                                                                                 \
  T rsqrt(T x);                                                                                                \
  T fabs(T x);                                                                                                 \
  T floor(T x);                                                                                                \
  T ceil(T x);                                                                                                 \
  T round(T x);                                                                                                \
  T rint(T x);                                                                                                 \
  T trunc(T x);                                                                                                \
  T sin(T x);                                                                                                  \
  T cos(T x);                                                                                                  \
  T tanh(T x);                                                                                                 \
  T pow(T x, T y);                                                                                             \
  T copysign(T x, T y);                                                                                        \
  T fmax(T x, T y);                                                                                            \
  T fmin(T x, T y);                                                                                            \
  T fma(T a, T b, T c);
MTLINV_FLOATS(MTLINV_UNARY_FLOAT)

#define MTLINV_CLASSIFY_SCALAR(T) \
  bool isnan(T x);                \
  bool isinf(T x);                \
  bool isfinite(T x);
MTLINV_FLOAT_SCALARS(MTLINV_CLASSIFY_SCALAR)
#define MTLINV_CLASSIFY_VECTOR(T) \
  template <int N>                \
  vec<bool, N> isnan(vec<T, N> x); \
  template <int N>                \
  vec<bool, N> isinf(vec<T, N> x); \
  template <int N>                \
  vec<bool, N> isfinite(vec<T, N> x);
MTLINV_FLOAT_SCALARS(MTLINV_CLASSIFY_VECTOR)

// precise:: and fast:: variants exist for float only.
#define MTLINV_FLOAT_ONLY(X) X(float) X(float2) X(float3) X(float4)
namespace precise {
MTLINV_FLOAT_ONLY(MTLINV_UNARY_FLOAT)
}
namespace fast {
MTLINV_FLOAT_ONLY(MTLINV_UNARY_FLOAT)
}
#undef MTLINV_FLOAT_ONLY

// Arithmetic on every numeric type.
#define MTLINV_ARITH(T)           \
  T abs(T x);                     \
  T max(T x, T y);                \
  T min(T x, T y);                \
  T clamp(T x, T lo, T hi);       \
  T select(T a, T b, bool c);
MTLINV_FLOATS(MTLINV_ARITH)
MTLINV_INTS(MTLINV_ARITH)
template <class T, int N>
vec<T, N> select(vec<T, N> a, vec<T, N> b, vec<bool, N> c);

// Geometric and relational functions on vectors.
#define MTLINV_DOT(T) \
  T dot(T##2 a, T##2 b);     \
  T dot(T##3 a, T##3 b);     \
  T dot(T##4 a, T##4 b);
MTLINV_DOT(float)
MTLINV_DOT(half)
#undef MTLINV_DOT
template <int N>
bool all(vec<bool, N> v);
template <int N>
bool any(vec<bool, N> v);

// numeric_limits, for the numeric scalar types (constexpr as in MSL; the values are not modelled).
template <class T>
struct numeric_limits {
  static constexpr T min() { return T(); }
  static constexpr T max() { return T(); }
  static constexpr T lowest() { return T(); }
  static constexpr T epsilon() { return T(); }
  static constexpr T infinity() { return T(); }
  static constexpr T quiet_NaN() { return T(); }
  static constexpr T denorm_min() { return T(); }
};

// Reinterpretation of bits; MSL requires equal sizes.
template <class To, class From>
To as_type(From from) {
  static_assert(sizeof(To) == sizeof(From), "as_type: source and destination sizes differ");
  return To();
}

// Synchronisation.
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4, mem_threadgroup_imageblock = 16 };
mem_flags operator|(mem_flags a, mem_flags b);
void threadgroup_barrier(mem_flags flags);
void simdgroup_barrier(mem_flags flags);

// SIMD-group functions. Moves: the numeric scalar and vector types and bfloat; reductions and prefix sums:
// numeric types; bitwise reductions: integers; simd_all / simd_any: bool.
#define MTLINV_SIMD_VALUE(T)                              \
  T simd_shuffle(T data, ushort lane);                    \
  T simd_shuffle_down(T data, ushort delta);              \
  T simd_shuffle_up(T data, ushort delta);                \
  T simd_shuffle_xor(T data, ushort mask);                \
  T simd_broadcast(T data, ushort lane);                  \
  T simd_broadcast_first(T data);
#define MTLINV_SIMD_ARITH(T)                              \
  T simd_sum(T data);                                     \
  T simd_max(T data);                                     \
  T simd_min(T data);                                     \
  T simd_prefix_inclusive_sum(T data);                    \
  T simd_prefix_exclusive_sum(T data);
#define MTLINV_SIMD_LOGIC(T) \
  T simd_and(T data);        \
  T simd_or(T data);         \
  T simd_xor(T data);
MTLINV_FLOATS(MTLINV_SIMD_VALUE)
MTLINV_INTS(MTLINV_SIMD_VALUE)
MTLINV_SIMD_VALUE(bfloat)
MTLINV_FLOATS(MTLINV_SIMD_ARITH)
MTLINV_INTS(MTLINV_SIMD_ARITH)
MTLINV_INTS(MTLINV_SIMD_LOGIC)
bool simd_all(bool expr);
bool simd_any(bool expr);
bool simd_is_first();

#undef MTLINV_UNARY_FLOAT
#undef MTLINV_CLASSIFY_SCALAR
#undef MTLINV_CLASSIFY_VECTOR
#undef MTLINV_ARITH
#undef MTLINV_SIMD_VALUE
#undef MTLINV_SIMD_ARITH
#undef MTLINV_SIMD_LOGIC
#undef MTLINV_FLOAT_SCALARS
#undef MTLINV_FLOAT_VECTORS
#undef MTLINV_FLOATS
#undef MTLINV_INT_SCALARS
#undef MTLINV_INT_VECTORS
#undef MTLINV_INTS

}  // namespace metal

// Constants of metal_stdlib (macros there too).
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define FLT_MAX 0x1.fffffep127f
#define FLT_MIN 0x1p-126f
#define HALF_MAX ((half)65504.0f)
#define HALF_MIN ((half)0x1p-14f)
#define M_PI_F 3.14159265358979323846264338327950288f
#define M_LOG2E_F 1.44269504088896340735992468100189214f
#define M_LN2_F 0.693147180559945309417232121458176568f
