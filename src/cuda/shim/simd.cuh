// Barriers and the simd_* functions on CUDA warps (a simdgroup is a warp: 32 lanes, formed from the linear thread
// index in x-fastest order, as Metal forms simdgroups). The same results as the emulator's src/emu/shim/simd.h:
// - A shuffle whose source lane is out of range returns the calling lane's own value.
// - simd_sum / _max / _min / _and / _or / _xor reduce by a fixed pairwise tree over lane indices: level 1 combines
//   lanes (0,1) (2,3) ..., level 2 combines those pairs, up to 32. It runs as an xor butterfly in which every lane
//   evaluates op(lower half, upper half) of its group, so every lane computes the very same operations and holds
//   the tree's root.
// - simd_prefix_*_sum add left to right in lane order (a serial chain of broadcasts: slow, but that is the order).
// All lanes of a warp must call (converged control flow, design rule 6); the full mask makes the hardware, not a
// convention, enforce that.
//
// Whole warps only: the CUDA backend refuses a threadgroup whose size is not a multiple of 32 (every plan's is), so
// every mask here is the constant 0xffffffff. With the mask worked out from blockDim instead, as the shim did to
// serve a partial last warp, nvcc checked each shuffle's mask against the active lanes at run time (MATCH, REDUX,
// VOTE and a branch per shuffle) and kept the memory descriptor of every load outside the uniform registers:
// sdpa_mma's step loop was 1359 instructions of SASS, 1200 with the constant mask (docs/decisions.md, "CUDA shim
// and build"). The emulator, like Metal, still runs partial simdgroups.
#pragma once
#include <cstring>
#include <type_traits>

#include "math.cuh"
#include "scalar.cuh"
#include "vec.cuh"

namespace cu_msl {

enum class mem_flags : unsigned { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
MTLINV_HD constexpr mem_flags operator|(mem_flags a, mem_flags b) {
  return static_cast<mem_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

namespace detail {

#define MTLINV_D __device__ __forceinline__

MTLINV_D unsigned linear_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
MTLINV_D unsigned lane_id() { return linear_thread() & 31u; }
constexpr unsigned kWarp = 0xffffffffu;  // every lane: threadgroups are whole warps

// Any plain value moves as 32-bit words, one shuffle each (a float4 is four, a half one).
template <class T>
MTLINV_D T shuffle_words(const T& v, int src) {
  static_assert(std::is_trivially_copyable<T>::value, "simd_* values must be plain data");
  constexpr int kWords = (sizeof(T) + 3) / 4;
  unsigned w[kWords] = {};
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_sync(kWarp, w[i], src);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}

// v from lane `src`, or the caller's own v when that lane is out of range.
template <class T>
MTLINV_D T shuffle_from(const T& v, int src) {
  return shuffle_words(v, src >= 0 && src < 32 ? src : static_cast<int>(lane_id()));
}

template <class T, class Op>
MTLINV_D T tree(T v, Op op) {
  const unsigned lane = lane_id();
#pragma unroll
  for (unsigned width = 1; width < 32; width *= 2) {
    const T other = shuffle_words(v, static_cast<int>(lane ^ width));
    v = (lane & width) ? op(other, v) : op(v, other);
  }
  return v;
}

template <class T>
MTLINV_D T prefix_sum(const T& v, bool inclusive) {
  const unsigned lane = lane_id();
  T acc = shuffle_words(v, 0);
  T mine = inclusive ? acc : T{};
  for (int j = 1; j < 32; ++j) {
    if (!inclusive && lane == static_cast<unsigned>(j)) mine = acc;
    acc = static_cast<T>(acc + shuffle_words(v, j));
    if (inclusive && lane == static_cast<unsigned>(j)) mine = acc;
  }
  return mine;
}

template <class T>
constexpr bool is_integer_value_v = std::is_integral<T>::value;
template <class T, int N, bool P>
constexpr bool is_integer_value_v<vec<T, N, P>> = std::is_integral<T>::value;

}  // namespace detail

// __syncthreads orders shared and global memory among the threadgroup's threads, which covers every flag.
MTLINV_D void threadgroup_barrier(mem_flags) { __syncthreads(); }
MTLINV_D void simdgroup_barrier(mem_flags) { __syncwarp(detail::kWarp); }

template <class T>
MTLINV_D T simd_shuffle(T v, ushort lane) {
  return detail::shuffle_from(v, lane);
}
template <class T>
MTLINV_D T simd_broadcast(T v, ushort lane) {
  return detail::shuffle_from(v, lane);
}
template <class T>
MTLINV_D T simd_shuffle_down(T v, ushort delta) {
  return detail::shuffle_from(v, static_cast<int>(detail::lane_id()) + delta);
}
template <class T>
MTLINV_D T simd_shuffle_up(T v, ushort delta) {
  return detail::shuffle_from(v, static_cast<int>(detail::lane_id()) - delta);
}
template <class T>
MTLINV_D T simd_shuffle_xor(T v, ushort mask) {
  return detail::shuffle_from(v, static_cast<int>(detail::lane_id() ^ mask));
}
template <class T>
MTLINV_D T simd_broadcast_first(T v) {
  return detail::shuffle_from(v, 0);
}
template <class T>
MTLINV_D T simd_sum(T v) {
  return detail::tree(v, [](const T& a, const T& b) { return static_cast<T>(a + b); });
}
template <class T>
MTLINV_D T simd_max(T v) {
  return detail::tree(v, [](const T& a, const T& b) { return static_cast<T>(max(a, b)); });
}
template <class T>
MTLINV_D T simd_min(T v) {
  return detail::tree(v, [](const T& a, const T& b) { return static_cast<T>(min(a, b)); });
}
template <class T>
MTLINV_D T simd_prefix_inclusive_sum(T v) {
  return detail::prefix_sum(v, true);
}
template <class T>
MTLINV_D T simd_prefix_exclusive_sum(T v) {
  return detail::prefix_sum(v, false);
}
template <class T>
MTLINV_D T simd_and(T v) {
  static_assert(detail::is_integer_value_v<T>, "simd_and takes integers");
  return detail::tree(v, [](const T& a, const T& b) { return static_cast<T>(a & b); });
}
template <class T>
MTLINV_D T simd_or(T v) {
  static_assert(detail::is_integer_value_v<T>, "simd_or takes integers");
  return detail::tree(v, [](const T& a, const T& b) { return static_cast<T>(a | b); });
}
template <class T>
MTLINV_D T simd_xor(T v) {
  static_assert(detail::is_integer_value_v<T>, "simd_xor takes integers");
  return detail::tree(v, [](const T& a, const T& b) { return static_cast<T>(a ^ b); });
}
MTLINV_D bool simd_all(bool v) { return __all_sync(detail::kWarp, v); }
MTLINV_D bool simd_any(bool v) { return __any_sync(detail::kWarp, v); }
MTLINV_D bool simd_is_first() { return detail::lane_id() == 0; }

#undef MTLINV_D

}  // namespace cu_msl
