// mtlinv's matrix-unit builtin: one simdgroup multiplies a 16 x 32 block of A by the transpose of an 8 x 32 block
// of B (both 16-bit, half or bfloat) into a 16 x 8 float accumulator, D[i][j] += sum_k A[i][k] * B[j][k].
//
//   simd_mma_16x8x32<T>(acc, a_lo, a_hi, b, lane) -> acc'
//
// Lane `lane` = 4 g + t (g in 0..7, t in 0..3) brings 16 bytes of each operand, raw, the same eight K positions
// [8 t, 8 t + 8) of: row g of A (a_lo), row g + 8 of A (a_hi), row g of B (b). It holds the four outputs
// acc = (D[g][2 t], D[g][2 t + 1], D[g + 8][2 t], D[g + 8][2 t + 1]). So a GEMV loads its operands with one
// 16-byte load per row and lane, and the builtin, not the kernel, moves values between lanes.
//
// What every target guarantees (design.md §2): D[i][j] is acc plus the 32 products of row i of A and row j of B,
// summed in an order the target fixes once, the same for every (i, j), and never touched by other rows' values
// (a NaN in row j' != j of B leaves D[i][j] alone). Products of 16-bit values are exact in float; the additions
// are the target's: IEEE fma in K order here, the tensor cores' own adder on CUDA (src/cuda/shim/mma.cuh, which
// defines MTLINV_TARGET_MMA and replaces this fallback). Bits therefore differ between targets, never between
// calls on one target. And a product that is exactly zero (a zero times a finite value) changes no sum, whatever
// its sign: D is the same with that B element replaced by any other finite value, or by 0, so sdpa_mma can give
// each query the call it would make alone without zeroing the keys it does not see (metal/sdpa_mma.metal). The
// tensor cores add aligned significands, where a zero is a zero (src/cuda/tests/shim_test.cu checks it); IEEE
// fma would turn a -0 sum into +0 on adding +0, so here such products are skipped. All 32 lanes call it together
// (converged control flow).
//
// This fallback, in plain MSL, serves the emulator and Metal. Apple GPUs have simdgroup matrices, but their lane
// layout is undocumented and mtlinv has never run on one, so Metal's plans do not pick the matrix-unit kernels
// (DeviceCaps::matrix_units is off there); the emulator turns it on only in tests, to run them (tests/conftest.py
// gpu_plans).
#pragma once
#include "load.h"

#if !defined(MTLINV_TARGET_MMA)
template <typename T>
inline float4 simd_mma_16x8x32(float4 acc, uint4 a_lo, uint4 a_hi, uint4 b, ushort lane) {
  const ushort g = lane / 4;
  const ushort t = lane % 4;
  // K positions 8 s .. 8 s + 7 come from lane 4 r + s of row r: rows g, g + 8 of A and rows 2 t, 2 t + 1 of B.
  for (ushort s = 0; s < 4; ++s) {
    float a0[8], a1[8], b0[8], b1[8];
    widen16<T>(simd_shuffle(a_lo, ushort(4 * g + s)), a0);
    widen16<T>(simd_shuffle(a_hi, ushort(4 * g + s)), a1);
    widen16<T>(simd_shuffle(b, ushort(8 * t + s)), b0);
    widen16<T>(simd_shuffle(b, ushort(8 * t + 4 + s)), b1);
    for (uint i = 0; i < 8; ++i) {
      const float4 x = float4(a0[i], a0[i], a1[i], a1[i]);
      const float4 y = float4(b0[i], b1[i], b0[i], b1[i]);
      const float4 sum = fma(x, y, acc);
      for (uint c = 0; c < 4; ++c) {  // an exact zero product (0 times a finite value) keeps the sum as it is
        const bool zero = (x[c] == 0.0f && isfinite(y[c])) || (y[c] == 0.0f && isfinite(x[c]));
        acc[c] = zero ? acc[c] : sum[c];
      }
    }
  }
  return acc;
}
#endif
