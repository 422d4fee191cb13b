// Kernel-side bindings on CUDA: the context a kernel body reads its thread position and buffers from, the bind_*
// and attr functions the pre-pass (tools/msl2cpp.py --target cuda) emits for a kernel's parameters, and
// MTLINV_KERNEL, which turns each instantiation into a __global__ entry registered under its host name.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../launch.h"
#include "vec.cuh"

namespace cu {

struct dim3u {
  uint32_t x, y, z;
};

// The MSL thread-position attributes (the same fields as the emulator's emu::KernelCtx), derived from CUDA's
// built-ins. The entry builds it and the kernel body, inlined, keeps only the fields it reads.
struct KernelCtx {
  const LaunchArgs* launch;
  dim3u threadgroup_position_in_grid;
  dim3u threadgroups_per_grid;
  dim3u thread_position_in_threadgroup;
  dim3u threads_per_threadgroup;
  dim3u thread_position_in_grid;
  uint32_t thread_index_in_threadgroup;
  uint32_t simdgroup_index_in_threadgroup;
  uint32_t thread_index_in_simdgroup;
  uint32_t simdgroups_per_threadgroup;
  uint32_t threads_per_simdgroup;
};

__device__ __forceinline__ KernelCtx make_ctx(const LaunchArgs& launch) {
  KernelCtx c;
  c.launch = &launch;
  // x is never cut into pieces (src/core/grid_pieces.h says why): no offset there.
  const dim3u tile = {blockIdx.x, blockIdx.y + launch.origin_y, blockIdx.z + launch.origin_z};
  c.threadgroup_position_in_grid = tile;
  c.threadgroups_per_grid = {launch.grid[0], launch.grid[1], launch.grid[2]};
  c.thread_position_in_threadgroup = {threadIdx.x, threadIdx.y, threadIdx.z};
  c.threads_per_threadgroup = {blockDim.x, blockDim.y, blockDim.z};
  c.thread_position_in_grid = {tile.x * blockDim.x + threadIdx.x, tile.y * blockDim.y + threadIdx.y,
                               tile.z * blockDim.z + threadIdx.z};
  const uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
  c.thread_index_in_threadgroup = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  c.simdgroup_index_in_threadgroup = c.thread_index_in_threadgroup / 32;
  c.thread_index_in_simdgroup = c.thread_index_in_threadgroup % 32;
  c.simdgroups_per_threadgroup = (threads + 31) / 32;
  c.threads_per_simdgroup = 32;
  return c;
}

// [[buffer(i)]] as a device pointer; the backend checked that the dispatch binds it. The parameter's name, which
// the emulator puts in its fault messages, is not needed here (compute-sanitizer names the source line).
template <class T>
__device__ __forceinline__ T* bind_device(const KernelCtx& ctx, int i, const char* = nullptr) {
  return static_cast<T*>(ctx.launch->buffers[i]);
}

// [[buffer(0)]] as the argument struct, read in place from the kernel's parameter space (__grid_constant__).
template <class S>
__device__ __forceinline__ const S& bind_constant(const KernelCtx& ctx, int i) {
  static_assert(sizeof(S) <= kMaxArgBytes, "argument struct larger than cu::kMaxArgBytes");
  static_assert(std::is_trivially_copyable<S>::value, "argument structs are plain data");
  // Only slot 0 is inline; a constant struct bound from a buffer would be read from device memory.
  return i == 0 ? *reinterpret_cast<const S*>(ctx.launch->arg_bytes)
                : *static_cast<const S*>(ctx.launch->buffers[i]);
}

// A thread-position attribute in the parameter's declared type: uint/ushort (the x component), uint2/uint3/...
// (the leading components), or uint/ushort from a scalar index.
template <class T>
__device__ __forceinline__ std::remove_cv_t<T> attr(const dim3u& d) {
  using U = std::remove_cv_t<T>;
  if constexpr (::cu_msl::is_vec<U>::value) {
    using E = typename U::value_type;
    const uint32_t c[3] = {d.x, d.y, d.z};
    U r;
#pragma unroll
    for (int i = 0; i < U::size; ++i) r[i] = static_cast<E>(c[i]);
    return r;
  } else {
    static_assert(std::is_integral<U>::value, "position attributes are integers or integer vectors");
    return static_cast<U>(d.x);
  }
}
template <class T>
__device__ __forceinline__ std::remove_cv_t<T> attr(uint32_t v) {
  static_assert(std::is_integral<std::remove_cv_t<T>>::value, "index attributes are integers");
  return static_cast<std::remove_cv_t<T>>(v);
}

// Programmatic dependent launch (sm_90 and later): the backend launches every kernel allowed to start before the
// kernel ahead of it in the stream has finished (src/cuda/backend_cuda.cu). Each entry first waits until the kernel
// before it has finished and its writes are visible, so no kernel sees a partial result; then it lets the kernel
// after it launch, which happens once all of its own threadgroups have got that far. What overlaps is the launch
// and the filling of the cores: the next kernel's threadgroups are resident while this one runs and start the
// moment it ends, instead of after the grid's completion has gone round the front end. Both instructions do
// nothing in a kernel launched without the attribute. A kernel registered with MTLINV_KERNEL_WAITS does this itself,
// where its body calls wait_for_previous_kernels() (metal/common.h), after loads of what no kernel ahead writes.
//
// Wait first, then let the next launch: one kernel ahead, never more. In the other order (this file's first
// version) a waiting kernel let its own successor launch too, so a chain of small kernels could
// run several launches ahead, their threadgroups resident and waiting wherever the running kernel had left room.
// On an H200 the decoder's forward of SmolLM2-135M took the same time at one row and 2-6% less at five rows with
// this order (real GGUF: 860-892 / 907-914 us against 870-902 / 934-976), and with the MLP's SwiGLU fused into
// its gate|up projection (30 kernels fewer) the old order made the forward 6% slower, this one did not
// (docs/decisions.md, "CUDA runtime" and "Decoder step: fused ops").
__device__ __forceinline__ void follow_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace cu

namespace cu_msl {
// load_streaming (an mtlinv builtin beside MSL's, see metal/common.h): 16 bytes read once, such as weights that
// stream past. L1::no_allocate keeps them from evicting the data that is reused (a GEMV's activations) from L1;
// .nc reads through the read-only path, valid because no kernel writes what it streams. L2::128B asks L2 to fetch
// the whole 128-byte line on a miss: a matrix-unit GEMV's load touches 64 bytes of each of 8 rows, and the other
// half of each line comes with another simdgroup's load soon after. On an H200 that made gemv_nk_mma 1.4-2.7%
// faster at one row and 1.8-4.9% at 16, and left qgemv as it was (L2::256B: no better; docs/decisions.md, "gemv:
// loads and L2 hints").
__device__ __forceinline__ vec<unsigned, 4> load_streaming(const vec<unsigned, 4>* p) {
  vec<unsigned, 4> v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// prefetch_l2 (metal/common.h): one cp.async.bulk.prefetch.L2 (sm_90) of the range's 16-byte aligned part, so that
// the loads that follow find it in L2; it holds no registers and nothing waits for it. Below sm_90, nothing.
template <class T>
__device__ __forceinline__ void prefetch_l2(const T* p, unsigned n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const size_t begin = (__cvta_generic_to_global(p) + 15) & ~size_t{15};
  const size_t end = __cvta_generic_to_global(p + n) & ~size_t{15};
  if (end > begin) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(begin), "r"(static_cast<unsigned>(end - begin)));
  }
#else
  (void)p;
  (void)n;
#endif
}
// wait_for_previous_kernels (metal/common.h): where a kernel registered with MTLINV_KERNEL_WAITS starts to depend on
// the kernels before it.
__device__ __forceinline__ void wait_for_previous_kernels() { ::cu::follow_previous_grid(); }
}  // namespace cu_msl

// One __global__ entry per instantiation, named after the kernel's host name (so profilers and
// compute-sanitizer name it too) in namespace <variant>::entry, and registered under that name. The body is
// named with its full qualification: a host name may equal the template's name. The template arguments may
// contain commas (fn<half, 8>). The body starts once the kernel before it has finished (follow_previous_grid);
// with MTLINV_KERNEL_WAITS at once, and it waits itself (wait_for_previous_kernels).
#define MTLINV_KERNEL_ENTRY(name, fn, waits, ...)                                               \
  namespace entry {                                                                             \
  __global__ void name(const __grid_constant__ ::cu::LaunchArgs launch) {                       \
    if (!(waits)) ::cu::follow_previous_grid();                                                 \
    ::MTLINV_VARIANT_NS::fn<__VA_ARGS__>(::cu::make_ctx(launch));                               \
  }                                                                                             \
  static const ::cu::Registrar registrar_##name(#name, reinterpret_cast<::cu::KernelHandle>(&name)); \
  }
#define MTLINV_KERNEL(name, fn, ...) MTLINV_KERNEL_ENTRY(name, fn, false, __VA_ARGS__)
#define MTLINV_KERNEL_WAITS(name, fn, ...) MTLINV_KERNEL_ENTRY(name, fn, true, __VA_ARGS__)
