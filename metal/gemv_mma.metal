// Canonical GEMV on the matrix units: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for 16-bit W stored [N, K],
// on targets whose plans say DeviceCaps::matrix_units (CUDA). A threadgroup owns 16 outputs (W rows) of a tile of 8
// rows of x and reads each weight once for all 8; its k_splits simdgroups take the K blocks of 32 in turn
// (simdgroup s: blocks s, s + k_splits, ...), each block one simd_mma_16x8x32 (metal/mma.h).
//
// Invariance (design.md §2): output (m, n) is acc <- mma(acc, block) over the simdgroup's blocks in K order, then
// the k_splits partial sums added in index order. Which blocks and splits there are depends on K and k_splits
// (from K, N, the dtype and the device), never on M; the builtin sums one (row, output) pair the same way in every
// position of the tile and whatever the other rows hold. Rows past M repeat the last row (computed, never
// stored), weight rows past N the last weight row, so no branch sits around the builtin, which all lanes must reach.
//
// Why matrix units for a memory-bound op: with scalar fmas a tile of 8 rows does 8 times the arithmetic of one row,
// and on an H200 that made 8 rows cost 1.5x one row (benchmarks/results/h200.md). The tensor cores do a tile's
// arithmetic in two instructions per block, so the time stays the time of reading W.
#include "common.h"
#include "args.h"
#include "load.h"
#include "mma.h"

constant constexpr uint GEMV_MMA_COLS = 16;       // outputs per threadgroup: the builtin's 16 A rows
constant constexpr uint GEMV_MMA_ROWS = 8;        // rows of x per tile: its 8 B rows
constant constexpr uint GEMV_MMA_BLOCK = 32;      // K per builtin call: 8 per lane for the 4 lanes of a row
constant constexpr uint GEMV_MMA_MAX_SPLITS = 16; // most simdgroups per threadgroup
// Blocks a simdgroup loads before it multiplies them: 8 weight loads of 16 bytes in flight per lane.
constant constexpr uint GEMV_MMA_IN_FLIGHT = 4;

// Grid: (ceil(N / 16), ceil(rows / 8), batch); threadgroup: k_splits simdgroups.
template <typename T>
[[kernel]] void gemv_nk_mma(
    constant GemvArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device const T* w [[buffer(2)]],
    device const T* bias [[buffer(3)]],
    device T* y [[buffer(4)]],
    uint3 tile [[threadgroup_position_in_grid]],
    ushort lane [[thread_index_in_simdgroup]],
    ushort sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float4 partials[GEMV_MMA_MAX_SPLITS][SIMD_WIDTH];  // [k split][lane]: each lane's four outputs

  // Lane 4 g + t brings K positions [8 t, 8 t + 8) of each block for weight rows g, g + 8 and row g of x.
  const uint g = lane / 4;
  const uint t = lane % 4;
  const uint n0 = tile.x * GEMV_MMA_COLS;
  const uint r0 = tile.y * GEMV_MMA_ROWS;
  const uint K = args.k;
  x += ulong(tile.z) * args.x_batch_stride;
  w += ulong(tile.z) * args.w_batch_stride;
  device const T* w_lo = w + ulong(min(n0 + g, args.n - 1)) * K + 8 * t;
  device const T* w_hi = w + ulong(min(n0 + g + 8, args.n - 1)) * K + 8 * t;
  device const T* x_row = x + ulong(min(r0 + g, args.rows - 1)) * K + 8 * t;

  float4 acc = float4(0.0f);
  const uint step = args.k_splits * GEMV_MMA_BLOCK;
  uint k = sg * GEMV_MMA_BLOCK;  // the simdgroup's block, the same in all its lanes (the loop bounds are uniform)
  if (args.vector_loads != 0) {
    for (; k + (GEMV_MMA_IN_FLIGHT - 1) * step + GEMV_MMA_BLOCK <= K; k += GEMV_MMA_IN_FLIGHT * step) {
      uint4 a_lo[GEMV_MMA_IN_FLIGHT];
      uint4 a_hi[GEMV_MMA_IN_FLIGHT];
      uint4 b[GEMV_MMA_IN_FLIGHT];
      for (uint i = 0; i < GEMV_MMA_IN_FLIGHT; ++i) {
        a_lo[i] = load16_streaming(w_lo + k + i * step);
        a_hi[i] = load16_streaming(w_hi + k + i * step);
        b[i] = load16(x_row + k + i * step);
      }
      for (uint i = 0; i < GEMV_MMA_IN_FLIGHT; ++i) {
        acc = simd_mma_16x8x32<T>(acc, a_lo[i], a_hi[i], b[i], lane);
      }
    }
  }
  // The blocks left (all of them without vector loads): the same values element by element, zeros past K.
  for (; k < K; k += step) {
    const uint valid = k + 8 * t < K ? min(8u, K - k - 8 * t) : 0u;
    uint4 a_lo, a_hi, b;
    if (args.vector_loads != 0 && valid == 8) {
      a_lo = load16_streaming(w_lo + k);
      a_hi = load16_streaming(w_hi + k);
      b = load16(x_row + k);
    } else {
      a_lo = load16_upto(w_lo + k, valid);
      a_hi = load16_upto(w_hi + k, valid);
      b = load16_upto(x_row + k, valid);
    }
    acc = simd_mma_16x8x32<T>(acc, a_lo, a_hi, b, lane);
  }

  partials[sg][lane] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);

  // Epilogue: simdgroup 0 adds the splits in index order, then the bias. Lane (g, t) holds outputs n0 + g and
  // n0 + g + 8 of rows r0 + 2 t and r0 + 2 t + 1.
  if (sg == 0) {
    float4 sum = partials[0][lane];
    for (uint s = 1; s < args.k_splits; ++s) {
      sum += partials[s][lane];
    }
    for (uint i = 0; i < 4; ++i) {
      const uint n = n0 + g + 8 * (i / 2);
      const uint r = r0 + 2 * t + i % 2;
      if (n < args.n && r < args.rows) {
        float v = sum[i];
        if (args.has_bias != 0) {
          v += float(bias[n]);
        }
        y[ulong(tile.z) * args.y_batch_stride + ulong(r) * args.n + n] = T(v);
      }
    }
  }
}

MTLINV_KERNEL(gemv_nk_mma_f16, gemv_nk_mma, half)
MTLINV_KERNEL(gemv_nk_mma_bf16, gemv_nk_mma, bfloat)
