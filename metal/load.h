// Loads of N consecutive elements widened to float. With `vector_loads` (the plan proved the rows 16-byte
// aligned) a full group is read with 4-wide vector loads; otherwise, and for the tail of a row, element by
// element with a bound. Both paths hand the same floats to the same arithmetic, so the choice never changes
// results, only speed.
#pragma once
#include "common.h"

template <typename T, uint N>
inline void load_floats(device const T* p, uint valid, bool vector_loads, thread float* out) {
  if (vector_loads && valid >= N) {
    for (uint i = 0; i < N; i += 4) {
      float4 v = float4(*((device const vec<T, 4>*)(p + i)));
      out[i] = v.x;
      out[i + 1] = v.y;
      out[i + 2] = v.z;
      out[i + 3] = v.w;
    }
  } else {
    for (uint i = 0; i < N; ++i) {
      out[i] = i < valid ? float(p[i]) : 0.0f;
    }
  }
}
