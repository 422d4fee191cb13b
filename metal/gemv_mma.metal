// Canonical GEMV on the matrix units: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for 16-bit W stored [N, K],
// on targets whose plans say DeviceCaps::matrix_units (CUDA). A threadgroup owns C tiles of 16 outputs (W rows) of a
// tile of R (8 or 16) rows of x and reads each weight once for all of them. K is dealt in blocks of 32 to k_splits
// splits in turn (split v: blocks v, v + k_splits, ...), each block one simd_mma_16x8x32 (metal/mma.h) per output
// tile and 8 rows. A simdgroup sums U splits, sg and then sg + k_splits / U, ..., so the threadgroup has k_splits / U
// simdgroups.
//
// Invariance (design.md §2): output (m, n) is acc <- mma(acc, block) over each split's blocks in K order, then the
// k_splits partial sums added in index order. Which blocks and splits there are depends on K and k_splits (from K,
// N, the dtype and the device), never on M; C and U (the plan's pick per tile height) change which simdgroup does a
// split's work, not its order. The builtin sums one (row, output) pair the same way in every position of its 8 rows,
// whatever the other rows hold, and a row's group of 8 gets the same weight operands in either tile height. Rows past
// M repeat the last row (computed, never stored), weight rows past N the last weight row, so no branch sits around
// the builtin, which all lanes must reach.
//
// Why matrix units for a memory-bound op: with scalar fmas a tile of 8 rows does 8 times the arithmetic of one row,
// and on an H200 that made 8 rows cost 1.5x one row (docs/decisions.md, "gemv: scalar kernel"). The tensor cores
// do a tile's arithmetic in two instructions per block, so the time stays the time of reading W.
//
// The tile layout (the _tiled kernels; mtlinv.tile_weights makes it from W [N, K]): W [N/16, K/32, 16, 32], block
// (tile x, b) holding K positions [32 b, 32 b + 32) of the tile's 16 rows (K a multiple of 32, so that the shape
// gives K: the op checks x against it). A simdgroup's loads of one block then read 1 KB in one piece, where the
// row layout has them read 64 bytes of each of 16 rows: on an H200 a call took 4-12% less time at M = 1..16 at
// 4096 x 4096 and 8192 x 8192, 0-4% at 4096 x 14336 (docs/decisions.md, "gemv: tile layout"). The same
// values reach the same calls in either layout, so the bits are the same.
//
// Why C and U: on an H200 one row ran 4-6% faster at N = 8192 and 14336 with two output tiles per threadgroup (C = 2)
// and twice the splits, but the 16-row tile ran slower with twice the simdgroups (fewer threadgroups fit a core at
// once); U = 2 lets it keep its simdgroups while it sums the same splits (docs/decisions.md, "gemv: split counts and
// forms"). The splits of a simdgroup run one after the other: summed side by side, their accumulators took nvcc to
// 74-90 registers. Two output tiles for 16 rows with 1 or 2 blocks in flight (66-78 registers), and two tiles of 8
// rows over the same weights, were 5-32% slower than the 16-row tile (docs/decisions.md, "gemv: the 16-row tile").
#include "common.h"
#include "gemv_args.h"  // GemvArgs, GEMV_MMA_BLOCK, GEMV_MMA_IN_FLIGHT
#include "load.h"
#include "mma.h"
#include "mma_tile.h"

// Weight row `row` (at K = 0 and position 8 t of a block) at K position k + more, a multiple of the block: that many
// elements on in the row layout; in the tile layout 16 times that, past the blocks of the tile's 16 rows before it.
// (The row layout adds k and more to the pointer one at a time: as one 32-bit sum nvcc gave the row layout's kernels
// other code, 2 registers more or less.)
template <bool TILED, typename T>
inline device const T* gemv_mma_at(device const T* row, uint k, uint more) {
  return TILED ? row + MMA_TILE_COLS * (k + more) : row + k + more;
}

// R: rows of x per tile, 8 or 16 (the plan's pick from M): R / 8 builtin calls per block and output tile share the
// weight loads, each with its own 8 rows of x and its own accumulators. C: output tiles per threadgroup (1 or 2),
// which share the loads of x. U: splits per simdgroup (1 or 2), summed one after the other. TILED: W in the tile
// layout (above; N a multiple of 16, one W for every batch entry).
// Grid: (ceil(N / 16 C), ceil(rows / R), batch); threadgroup: k_splits / U simdgroups.
template <typename T, uint R, uint C, uint U, bool TILED = false>
[[kernel]] void gemv_nk_mma(
    constant GemvArgs& args [[buffer(GEMV_SLOT_ARGS)]],
    device const T* x [[buffer(GEMV_SLOT_X)]],
    device const T* w [[buffer(GEMV_SLOT_W)]],
    device const T* bias [[buffer(GEMV_SLOT_BIAS)]],
    device T* y [[buffer(GEMV_SLOT_Y)]],
    uint3 tile [[threadgroup_position_in_grid]],
    ushort lane [[thread_index_in_simdgroup]],
    ushort sg [[simdgroup_index_in_threadgroup]]) {
  constexpr uint B = R / 8;  // B operands (groups of 8 rows of x) per block
  constexpr uint IN_FLIGHT = GEMV_MMA_IN_FLIGHT / C;
  threadgroup float4 partials[MMA_TILE_MAX_SPLITS][C * B][SIMD_WIDTH];  // mma_tile_keep's and mma_tile_store's

  // Lane 4 g + t brings K positions [8 t, 8 t + 8) of each block for weight rows g, g + 8 of each output tile and
  // row g of each group of 8 rows of x.
  const uint g = lane / 4;
  const uint t = lane % 4;
  const uint n0 = tile.x * C * MMA_TILE_COLS;
  const uint r0 = tile.y * R;
  const uint K = args.k;
  x += ulong(tile.z) * args.x_batch_stride;
  w += ulong(tile.z) * args.w_batch_stride;
  // Weight rows g and g + 8 of each output tile at K = 0, the row layout's clamped to N (the tile layout's tiles to
  // the last one); gemv_mma_at says where the block at k lies from there.
  device const T* w_lo[C];
  device const T* w_hi[C];
  for (uint c = 0; c < C; ++c) {
    if (TILED) {
      const uint tile_c = min(n0 / MMA_TILE_COLS + c, args.n / MMA_TILE_COLS - 1);
      w_lo[c] = w + ulong(tile_c) * K * MMA_TILE_COLS + GEMV_MMA_BLOCK * g + 8 * t;
      w_hi[c] = w_lo[c] + GEMV_MMA_BLOCK * 8;
    } else {
      w_lo[c] = w + ulong(min(n0 + MMA_TILE_COLS * c + g, args.n - 1)) * K + 8 * t;
      w_hi[c] = w + ulong(min(n0 + MMA_TILE_COLS * c + g + 8, args.n - 1)) * K + 8 * t;
    }
  }
  device const T* x_row[B];
  for (uint j = 0; j < B; ++j) {
    x_row[j] = x + ulong(min(r0 + 8 * j + g, args.rows - 1)) * K + 8 * t;
  }

  // Blocks dealt to the splits in turn. A split's IN_FLIGHT blocks lie k_splits blocks apart, so together the
  // splits read a contiguous stretch of each weight row: faster on an H200 than giving each IN_FLIGHT adjacent
  // blocks (docs/decisions.md, "gemv: tensor cores").
  const uint step = args.k_splits * GEMV_MMA_BLOCK;
  for (uint u = 0; u < U; ++u) {
    const uint split = sg + u * (args.k_splits / U);
    float4 acc[C * B];  // [output tile c][group j]
    for (uint i = 0; i < C * B; ++i) {
      acc[i] = float4(0.0f);
    }
    uint k = split * GEMV_MMA_BLOCK;  // the split's block, the same in all lanes (the loop bounds are uniform)
    if (args.vector_loads != 0) {
      for (; k + (IN_FLIGHT - 1) * step + GEMV_MMA_BLOCK <= K; k += IN_FLIGHT * step) {
        uint4 a_lo[IN_FLIGHT][C];
        uint4 a_hi[IN_FLIGHT][C];
        uint4 b[IN_FLIGHT][B];
        for (uint i = 0; i < IN_FLIGHT; ++i) {
          for (uint c = 0; c < C; ++c) {
            a_lo[i][c] = load16_streaming(gemv_mma_at<TILED>(w_lo[c], k, i * step));
            a_hi[i][c] = load16_streaming(gemv_mma_at<TILED>(w_hi[c], k, i * step));
          }
          for (uint j = 0; j < B; ++j) {
            b[i][j] = load16(x_row[j] + k + i * step);
          }
        }
        for (uint i = 0; i < IN_FLIGHT; ++i) {
          for (uint c = 0; c < C; ++c) {
            for (uint j = 0; j < B; ++j) {
              acc[c * B + j] = simd_mma_16x8x32<T>(acc[c * B + j], a_lo[i][c], a_hi[i][c], b[i][j], lane);
            }
          }
        }
      }
    }
    // The blocks left (all of them without vector loads): the same values in the same order, element by element
    // where a lane's group is cut by K or may be unaligned, zeros past K.
    for (; k < K; k += step) {
      const uint valid = k + 8 * t < K ? min(8u, K - k - 8 * t) : 0u;
      const bool whole = args.vector_loads != 0 && valid == 8;
      for (uint c = 0; c < C; ++c) {
        const uint4 a_lo = whole ? load16_streaming(gemv_mma_at<TILED>(w_lo[c], k, 0))
                                 : load16_upto(gemv_mma_at<TILED>(w_lo[c], k, 0), valid);
        const uint4 a_hi = whole ? load16_streaming(gemv_mma_at<TILED>(w_hi[c], k, 0))
                                 : load16_upto(gemv_mma_at<TILED>(w_hi[c], k, 0), valid);
        for (uint j = 0; j < B; ++j) {
          const uint4 b = whole ? load16(x_row[j] + k) : load16_upto(x_row[j] + k, valid);
          acc[c * B + j] = simd_mma_16x8x32<T>(acc[c * B + j], a_lo, a_hi, b, lane);
        }
      }
    }
    mma_tile_keep<C * B>(partials, acc, split, lane);
  }

  mma_tile_store<T, C, B>(partials, args.k_splits, args.has_bias != 0, bias, y + ulong(tile.z) * args.y_batch_stride,
                          n0, args.n, r0, args.rows, lane, sg);
}

// The plan's forms (src/core/plans/gemv.cpp): 8 rows with one or two output tiles, 16 rows with one or two splits
// per simdgroup; each for W in rows and in the tile layout.
MTLINV_KERNEL(gemv_nk_mma_r8_f16, gemv_nk_mma, half, 8, 1, 1, false)
MTLINV_KERNEL(gemv_nk_mma_r8_c2_f16, gemv_nk_mma, half, 8, 2, 1, false)
MTLINV_KERNEL(gemv_nk_mma_r16_f16, gemv_nk_mma, half, 16, 1, 1, false)
MTLINV_KERNEL(gemv_nk_mma_r16_u2_f16, gemv_nk_mma, half, 16, 1, 2, false)
MTLINV_KERNEL(gemv_nk_mma_r8_bf16, gemv_nk_mma, bfloat, 8, 1, 1, false)
MTLINV_KERNEL(gemv_nk_mma_r8_c2_bf16, gemv_nk_mma, bfloat, 8, 2, 1, false)
MTLINV_KERNEL(gemv_nk_mma_r16_bf16, gemv_nk_mma, bfloat, 16, 1, 1, false)
MTLINV_KERNEL(gemv_nk_mma_r16_u2_bf16, gemv_nk_mma, bfloat, 16, 1, 2, false)
MTLINV_KERNEL(gemv_nk_mma_r8_f16_tiled, gemv_nk_mma, half, 8, 1, 1, true)
MTLINV_KERNEL(gemv_nk_mma_r8_c2_f16_tiled, gemv_nk_mma, half, 8, 2, 1, true)
MTLINV_KERNEL(gemv_nk_mma_r16_f16_tiled, gemv_nk_mma, half, 16, 1, 1, true)
MTLINV_KERNEL(gemv_nk_mma_r16_u2_f16_tiled, gemv_nk_mma, half, 16, 1, 2, true)
MTLINV_KERNEL(gemv_nk_mma_r8_bf16_tiled, gemv_nk_mma, bfloat, 8, 1, 1, true)
MTLINV_KERNEL(gemv_nk_mma_r8_c2_bf16_tiled, gemv_nk_mma, bfloat, 8, 2, 1, true)
MTLINV_KERNEL(gemv_nk_mma_r16_bf16_tiled, gemv_nk_mma, bfloat, 16, 1, 1, true)
MTLINV_KERNEL(gemv_nk_mma_r16_u2_bf16_tiled, gemv_nk_mma, bfloat, 16, 1, 2, true)
