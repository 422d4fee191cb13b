// metal/pair16.h's operations as single instructions. pair16_add and pair16_fma: one packed instruction for two
// values, rounded once, which is the fallback's result. Explicit `.rn` keeps ptxas from contracting them (--fmad=false
// covers only what nvcc generates). A bfloat16 sum uses fma.rn.bf16x2, the form sm_80 has (add.bf16x2 came with
// sm_90): a + b as a * 1 + b, which is exactly the sum, signed zeros included.
#pragma once
#include "scalar.cuh"
#include "vec.cuh"

#include <type_traits>

#define MTLINV_TARGET_PAIR16 1

namespace cu_msl {

// One LOP3 (ptxas builds (a & imm) | imm from two instructions when given plain C++).
__device__ __forceinline__ unsigned pair16_and_or(unsigned a, unsigned mask, unsigned bits) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(mask), "r"(bits));  // 0xEA: (a & b) | c
  return d;
}

// Two byte permutes (PRMT): bytes 0-1 of a and b, then bytes 2-3 of a and b.
__device__ __forceinline__ vec<unsigned, 2> pair16_interleave(unsigned a, unsigned b) {
  return vec<unsigned, 2>(__byte_perm(a, b, 0x5410), __byte_perm(a, b, 0x7632));
}

template <class T>
__device__ __forceinline__ unsigned pair16_add(unsigned a, unsigned b) {
  unsigned d;
  if constexpr (std::is_same<T, bfloat>::value) {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(0x3F803F80u), "r"(b));
  } else {
    static_assert(std::is_same<T, half>::value, "pair16 takes half or bfloat");
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  }
  return d;
}

template <class T>
__device__ __forceinline__ unsigned pair16_fma(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  if constexpr (std::is_same<T, bfloat>::value) {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  } else {
    static_assert(std::is_same<T, half>::value, "pair16 takes half or bfloat");
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  }
  return d;
}

}  // namespace cu_msl
