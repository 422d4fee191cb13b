// MSL vector types on CUDA: src/shim/vec.h, with the element type conversion it leaves to the target. In
// namespace cu_msl: CUDA's own float4, uint2, ... stay untouched at global scope.
#pragma once
#include "scalar.cuh"
#include "target.cuh"

namespace cu_msl {
namespace detail {

// Every conversion of `explicit vec(vec<U, N>)` copies the source whole first: float4(*(half4*)p) then reads
// memory as one 8-byte vector load, where element-wise reads became four 2-byte loads (seen in the PTX).
template <class T, class U, int N>
constexpr bool converts_whole = true;
template <class T, class V>
MTLINV_HD constexpr void convert_whole(T* dst, const V& src) {
  const V whole = src;
  MTLINV_SHIM_UNROLL for (int i = 0; i < V::size; ++i) dst[i] = static_cast<T>(whole[i]);
}

}  // namespace detail
}  // namespace cu_msl

#include "../../shim/vec.h"

namespace cu_msl {
// The MSL names, in namespace cu_msl (cuda_shim.cuh makes them visible to the kernels).
MTLINV_SHIM_VEC_ELEMENTS(MTLINV_SHIM_VEC_NAMES)
}  // namespace cu_msl
