// Loads widened to float. Kernels read 16 bytes at a time where the plan proved the rows 16-byte aligned
// (`load16`), and element by element with a bound otherwise and for the tail of a row (`load_floats`). Both hand
// the same floats to the same arithmetic, so the choice never changes results, only speed. The two differ only in
// how the bits arrive: each widens them with widen16, so a GPU converts them with the same instructions either way
// (a conversion of a bfloat subnormal may give it or zero, depending on whether it flushes float32 subnormals, but
// the same conversion gives the same one).
#pragma once
#include "common.h"
#include "pair16.h"

// The 16 / sizeof(T) values of a 16-byte group, widened to float: out[i] is the element at offset i. The
// 16-bit conversions are exact, so this gives what float(p[i]) gives element by element; four at a time, as
// vector conversions, which every target does well. This is the 16-bit version (half, bfloat); float's follows.
template <typename T>
inline void widen16(uint4 raw, thread float* out) {
  const float4 lo = float4(as_type<vec<T, 4>>(uint2(raw.x, raw.y)));
  const float4 hi = float4(as_type<vec<T, 4>>(uint2(raw.z, raw.w)));
  for (uint i = 0; i < 4; ++i) {
    out[i] = lo[i];
    out[4 + i] = hi[i];
  }
}
template <>
inline void widen16<float>(uint4 raw, thread float* out) {
  const float4 f = as_type<float4>(raw);
  for (uint i = 0; i < 4; ++i) {
    out[i] = f[i];
  }
}

// The inverse for 16-bit T: eight floats rounded to T (round to nearest even), packed as load16 reads them from
// memory holding those T values. Kernels that compute an operand of the matrix units (metal/sdpa_mma.metal) use it.
template <typename T>
inline uint4 narrow16(thread const float* in) {
  uint4 raw;
  for (uint i = 0; i < 4; ++i) {
    raw[i] = pair16_pack<T>(in[2 * i], in[2 * i + 1]);
  }
  return raw;
}

// 16 bytes from a 16-byte aligned address, raw: kept packed in registers until the arithmetic needs them.
template <typename T>
inline uint4 load16(device const T* p) {
  return *((device const uint4*)p);
}

// The bits load16 gives for the first `valid` elements of a row (all of the group's 16 / sizeof(T) when there are
// as many), zeros after them: the tail of a row that a 16-byte load would overrun, or any group of a row that may
// not be 16-byte aligned. This is the 16-bit version; float's follows.
template <typename T>
inline uint4 load16_upto(device const T* p, uint valid) {
  static_assert(sizeof(T) == 2, "load16_upto reads 16-bit elements");
  uint4 raw = uint4(0);
  for (uint i = 0; i < 8; ++i) {
    const uint bits = i < valid ? uint(as_type<ushort>(p[i])) : 0u;
    raw[i / 2] |= bits << (16 * (i % 2));
  }
  return raw;
}
template <>
inline uint4 load16_upto<float>(device const float* p, uint valid) {
  uint4 raw = uint4(0);
  for (uint i = 0; i < 4; ++i) {
    raw[i] = i < valid ? as_type<uint>(p[i]) : 0u;
  }
  return raw;
}

// The bits load16 gives, read element by element from a row that may not be 16-byte aligned: element i lands in
// bytes [i * sizeof(T), (i + 1) * sizeof(T)) either way, so widen16 turns both into the same floats. This is the
// 16-bit version; float's follows.
template <typename T>
inline uint4 load16_elements(device const T* p) {
  return load16_upto(p, 16 / sizeof(T));
}

// The raw bits of the 16-byte unit at p: one 16-byte load when VEC (the plan proved the rows aligned), else element
// by element. VEC is a template parameter, not a runtime flag: a compiler may execute both sides of a runtime
// choice and keep one, and a speculated 16-byte load from a misaligned row faults.
template <typename T, bool VEC>
inline uint4 load16_unit(device const T* p) {
  if (VEC) {
    return load16(p);
  }
  return load16_elements(p);
}

// The same for data read once (weights streaming past): a target may keep it out of its caches (load_streaming).
template <typename T>
inline uint4 load16_streaming(device const T* p) {
  return load_streaming((device const uint4*)p);
}

// N consecutive elements widened to float: by 16-byte loads when `vector_loads` (the plan proved the rows
// 16-byte aligned) and all N are valid, else element by element, those at or past `valid` reading as 0.
template <typename T, uint N>
inline void load_floats(device const T* p, uint valid, bool vector_loads, thread float* out) {
  constexpr uint PER_LOAD = 16 / sizeof(T);
  static_assert(N % PER_LOAD == 0, "load_floats reads whole 16-byte groups");
  if (vector_loads && valid >= N) {
    for (uint i = 0; i < N; i += PER_LOAD) {
      widen16<T>(load16(p + i), out + i);
    }
  } else {
    for (uint i = 0; i < N; i += PER_LOAD) {
      widen16<T>(load16_upto(p + i, valid > i ? valid - i : 0u), out + i);
    }
  }
}

