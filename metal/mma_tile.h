// The output tile of the matrix-unit GEMVs (metal/gemv_mma.metal, metal/qgemv_mma.metal): a threadgroup owns C
// tiles of 16 outputs (each the builtin's 16 A rows, weight rows n0 + 16 c .. n0 + 16 c + 15) of a tile of R rows of
// x (R / 8 groups of 8, each the B operand of its own simd_mma_16x8x32 calls); its simdgroups sum k_splits splits,
// each a share of K.
#pragma once
#include "common.h"
#include "mma_tile_args.h"  // MMA_TILE_COLS, MMA_TILE_MAX_SPLITS

// Leaves a split's accumulators in partials, [k split][output tile c, group j of 8 rows][lane]: acc[c * B + j] is
// the sum for outputs n0 + 16 c .. n0 + 16 c + 15 and group j.
//
// partials is indexed as the 3-D array it is, not flattened: with a flat index nvcc 13 (sm_90) gave gemv_nk_mma's
// 16-row tile 56 registers instead of 62 and moved the second x load of each block behind the first block's HMMA,
// one more memory round trip per block: 10-14% slower on an H200 (docs/decisions.md, "gemv: the 16-row tile").
// tests/compile/test_sass_guard.py checks that load order wherever nvcc and cuobjdump are installed.
template <uint CB>
inline void mma_tile_keep(threadgroup float4 (*partials)[CB][SIMD_WIDTH], thread const float4* acc, uint split,
                          ushort lane) {
  for (uint cj = 0; cj < CB; ++cj) {
    partials[split][cj][lane] = acc[cj];
  }
}

// Once every split is kept: simdgroup 0 adds the k_splits splits in index order, then the bias, and stores. Lane
// 4 g + t holds outputs n0 + 16 c + g and + g + 8 of rows 2 t and 2 t + 1 of each group. All threads of the
// threadgroup call it (it has a barrier).
template <typename T, uint C, uint B>
inline void mma_tile_store(threadgroup float4 (*partials)[C * B][SIMD_WIDTH], uint k_splits, bool has_bias,
                           device const T* bias, device T* y, uint n0, uint n, uint r0, uint rows, ushort lane,
                           ushort sg) {
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg != 0) {
    return;
  }
  const uint g = lane / 4;
  const uint t = lane % 4;
  for (uint cj = 0; cj < C * B; ++cj) {
    float4 sum = partials[0][cj][lane];
    for (uint s = 1; s < k_splits; ++s) {
      sum += partials[s][cj][lane];
    }
    for (uint i = 0; i < 4; ++i) {
      const uint out = n0 + MMA_TILE_COLS * (cj / B) + g + 8 * (i / 2);
      const uint r = r0 + 8 * (cj % B) + 2 * t + i % 2;
      if (out < n && r < rows) {
        float v = sum[i];
        if (has_bias) {
          v += float(bias[out]);
        }
        y[ulong(r) * n + out] = T(v);
      }
    }
  }
}
