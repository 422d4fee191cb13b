// Kernels with planted bugs, built into the emulator only (never into the Metal library or CUDA): the
// emulator's checking mode must catch each of them (tests/runtime/test_emulator_checks.py).
#include "common.h"

struct PlantedArgs {
  uint32_t n;
  uint32_t offset;
};

// Correct: publish, barrier, read a neighbour.
template <typename T>
[[kernel]] void planted_neighbour(
    constant PlantedArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device T* y [[buffer(2)]],
    uint tid [[thread_index_in_threadgroup]]) {
  threadgroup T slots[64];
  slots[tid] = x[tid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[tid] = slots[(tid + 1) % args.n];
}

// Planted race: the barrier is missing, so what a thread reads depends on the order threads run in.
template <typename T>
[[kernel]] void planted_race(
    constant PlantedArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device T* y [[buffer(2)]],
    uint tid [[thread_index_in_threadgroup]]) {
  threadgroup T slots[64];
  slots[tid] = x[tid];
  y[tid] = slots[(tid + 1) % args.n];
}

// Planted divergent barrier: only even threads reach it.
template <typename T>
[[kernel]] void planted_divergent_barrier(
    constant PlantedArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device T* y [[buffer(2)]],
    uint tid [[thread_index_in_threadgroup]]) {
  if (tid % 2 == 0) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  y[tid] = x[tid] + float(args.n);
}

// Planted divergent simd call: only half of the simdgroup shuffles.
template <typename T>
[[kernel]] void planted_divergent_simd(
    constant PlantedArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device T* y [[buffer(2)]],
    uint lane [[thread_index_in_simdgroup]]) {
  float v = x[lane];
  if (lane < 16) {
    v = simd_shuffle_down(v, ushort(1));
  }
  y[lane] = v + float(args.n);
}

// Planted out-of-range load: reads `offset` elements past each thread's own.
template <typename T>
[[kernel]] void planted_out_of_range(
    constant PlantedArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device T* y [[buffer(2)]],
    uint tid [[thread_position_in_grid]]) {
  y[tid] = x[tid + args.offset];
}

// Planted out-of-range prefetch: thread 0 asks L2 for the n elements from `offset`, then every thread copies its
// own. A prefetch changes nothing, but a range outside its buffer is a bug, which the checked build reports.
template <typename T>
[[kernel]] void planted_prefetch_overrun(
    constant PlantedArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device T* y [[buffer(2)]],
    uint tid [[thread_position_in_grid]]) {
  if (tid == 0) {
    prefetch_l2(x + args.offset, args.n);
  }
  y[tid] = x[tid];
}

MTLINV_KERNEL(emutest_neighbour, planted_neighbour, float)
MTLINV_KERNEL(emutest_race, planted_race, float)
MTLINV_KERNEL(emutest_divergent_barrier, planted_divergent_barrier, float)
MTLINV_KERNEL(emutest_divergent_simd, planted_divergent_simd, float)
MTLINV_KERNEL(emutest_out_of_range, planted_out_of_range, float)
MTLINV_KERNEL(emutest_prefetch_overrun, planted_prefetch_overrun, float)
