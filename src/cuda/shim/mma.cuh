// simd_mma_16x8x32 on the tensor cores (the builtin's contract is in metal/mma.h): two mma.sync m16n8k16 with
// float accumulation, sm_80 and later. The fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix fragments for
// mma.m16n8k16") give lane 4 g + t the A elements (rows g and g + 8, K slots 2 t, 2 t + 1, 2 t + 8, 2 t + 9), the
// B elements (column g, the same K slots) and the accumulators (D[g][2 t], D[g][2 t + 1], D[g + 8][2 t],
// D[g + 8][2 t + 1]). Slots are only names: a sum does not care which K position a slot holds as long as A and B
// agree, and both take slot 2 t + j from the same lane t. So each lane's 16 loaded bytes feed the slots directly:
// 32-bit word 0 of every operand fills slots 2 t, 2 t + 1 and word 1 slots 2 t + 8, 2 t + 9 of the first mma;
// words 2 and 3 do the same for the second. No value moves between lanes.
#pragma once
#include "scalar.cuh"
#include "vec.cuh"

#include <type_traits>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "simd_mma_16x8x32 needs the sm_80 tensor cores (mma.sync m16n8k16 with bf16); set MTLINV_CUDA_ARCH >= 80"
#endif

#define MTLINV_TARGET_MMA 1

namespace cu_msl {
namespace detail {

// D = A B^T + C for one m16n8k16 step; a: {a0a1, a2a3, a4a5, a6a7}, b: {b0b1, b2b3}, c: {c0, c1, c2, c3}.
#define MTLINV_MMA_M16N8K16(TYPE)                                                                        \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, " \
      "{%8, %9}, {%0, %1, %2, %3};"                                                                     \
      : "+f"(c.x), "+f"(c.y), "+f"(c.z), "+f"(c.w)                                                      \
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))

template <class T>
__device__ __forceinline__ void mma_m16n8k16(vec<float, 4>& c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                             unsigned b0, unsigned b1) {
  if constexpr (std::is_same<T, bfloat>::value) {
    MTLINV_MMA_M16N8K16("bf16");
  } else {
    static_assert(std::is_same<T, half>::value, "simd_mma_16x8x32 takes half or bfloat");
    MTLINV_MMA_M16N8K16("f16");
  }
}
#undef MTLINV_MMA_M16N8K16

}  // namespace detail

template <class T>
__device__ __forceinline__ vec<float, 4> simd_mma_16x8x32(vec<float, 4> acc, vec<unsigned, 4> a_lo,
                                                          vec<unsigned, 4> a_hi, vec<unsigned, 4> b,
                                                          unsigned short /*lane: the hardware knows*/) {
  detail::mma_m16n8k16<T>(acc, a_lo.x, a_hi.x, a_lo.y, a_hi.y, b.x, b.y);
  detail::mma_m16n8k16<T>(acc, a_lo.z, a_hi.z, a_lo.w, a_hi.w, b.z, b.w);
  return acc;
}

}  // namespace cu_msl
