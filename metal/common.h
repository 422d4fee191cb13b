// Included first by every kernel file. On Metal it pulls in metal_stdlib; on the emulator and CUDA targets the
// pre-pass (tools/msl2cpp.py) has already included the target's shim, which defines the same names.
#pragma once
#if defined(__METAL_VERSION__)
#include <metal_stdlib>
using namespace metal;

// The one registration point of a kernel: `MTLINV_KERNEL(host_name, template_fn, template args...)`.
// On Metal it is an explicit instantiation under `host_name`; the emulator and CUDA shims define it to register
// the same instantiation in their host-side registry, so the name is written exactly once.
#define MTLINV_KERNEL(name, fn, ...) \
  template [[host_name(#name)]] [[kernel]] decltype(fn<__VA_ARGS__>) fn<__VA_ARGS__>;
// The same for a kernel whose body calls wait_for_previous_kernels() itself (below); Metal starts a dispatch after
// the one before it has finished, so the two are one here.
#define MTLINV_KERNEL_WAITS(name, fn, ...) MTLINV_KERNEL(name, fn, __VA_ARGS__)

// mtlinv's builtins beside MSL's, defined by every target. None changes a value.
// load_streaming: a 16-byte load of data read once (weights streaming past), which a target may keep out of its
// caches so that reused data stays there. A plain load on Metal; the CUDA shim skips L1 with it.
inline uint4 load_streaming(device const uint4* p) {
  return *p;
}
// prefetch_l2: elements p[0 .. n) will be read soon; a target may start fetching them into its last-level cache,
// holding no registers and waiting for nothing. Nothing on Metal (MSL has no such instruction); one bulk prefetch
// on CUDA; in the emulator's checked build, a check that the range lies in its buffer, as a load's would be.
template <typename T>
inline void prefetch_l2(device const T* p, uint n) {
  (void)p;
  (void)n;
}
// wait_for_previous_kernels: the point from which a kernel registered with MTLINV_KERNEL_WAITS may read what the
// kernels before it wrote, and write what they read; every other kernel waits before its first instruction. On
// CUDA a kernel starts while the one before it still runs (programmatic dependent launch, src/cuda/shim/device.cuh),
// so what comes before the call overlaps that kernel: index arithmetic, and loads of what no kernel that may still
// run writes (qgemv_mma's weights, where its caller says so). Nothing on Metal and in the emulator, which start a
// kernel after the one before it has finished. tools/check_static.py fails a _WAITS kernel whose body does not call
// it, and a plain one that does.
inline void wait_for_previous_kernels() {}
#endif

// Lanes per simdgroup on every target we build for (Apple GPUs, the emulator, NVIDIA warps).
constant constexpr uint SIMD_WIDTH = 32;

// Sum of v (a float or a float vector, lane-wise) over the 32 lanes by a fixed shuffle ladder (16, 8, 4, 2, 1).
// Only lane 0 holds the full sum. Every lane must call it (converged control flow): the order of additions is
// fixed, unlike simd_sum, whose order is the hardware's.
template <typename V>
inline V simd_ladder_sum(V v) {
  for (ushort delta = SIMD_WIDTH / 2; delta > 0; delta >>= 1) {
    v += simd_shuffle_down(v, delta);
  }
  return v;
}
