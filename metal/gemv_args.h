// The gemv family (metal/gemv.metal, gemv_mma.metal, gemm.metal) as the kernels and the host (src/core/plans/gemv.cpp)
// both see it: the argument struct, 4-byte scalars only so that its layout is the same on every target (its size
// is static_assert'ed in src/core/kernel_args.h), and the geometry the plans size grids by.
#pragma once
#include "mma_tile_args.h"
#include "shared.h"

// gemv / matmul: y[b, m, n] = sum_k x[b, m, k] * W[b](n, k) (+ bias[n]).
// W is stored [N, K] ("nk", a linear layer's weight) or [K, N] ("kn"). Strides are in elements; a batch stride of
// 0 broadcasts that operand over the batch.
struct GemvArgs {
  uint32_t rows;            // M: rows of x per batch entry
  uint32_t k;               // reduced extent
  uint32_t n;               // outputs per row
  uint32_t k_splits;        // simdgroups sharing one output tile's K range; from K, N, dtype, device (never M)
  uint32_t x_batch_stride;
  uint32_t w_batch_stride;
  uint32_t y_batch_stride;
  uint32_t has_bias;        // 1: add bias[n] in the epilogue
  uint32_t vector_loads;    // 1: rows start 16-byte aligned, full vectors may be loaded at once
  uint32_t w_kn;            // 1: W stored [K, N] (read by the throughput GEMM; the GEMVs are one per layout)
};

// The buffer slots of every kernel of the family (shared.h).
enum GemvSlot : uint32_t {
  GEMV_SLOT_ARGS = 0,  // GemvArgs
  GEMV_SLOT_X = 1,
  GEMV_SLOT_W = 2,
  GEMV_SLOT_BIAS = 3,  // read only with has_bias
  GEMV_SLOT_Y = 4,
};

// gemv_nk: outputs per simdgroup, four weight rows read together (one float4 accumulator per row of x).
MTLINV_SHARED uint32_t GEMV_NK_COLS = 4;
// gemv_nk and gemv_kn: most simdgroups sharing one output tile (k_splits).
MTLINV_SHARED uint32_t GEMV_MAX_SPLITS = 8;
// gemv_kn: bytes of outputs a lane owns (one 16-byte group), so 32 * 16 / sizeof(T) outputs per threadgroup.
MTLINV_SHARED uint32_t GEMV_KN_LANE_BYTES = 16;
// gemv_nk_mma: K per builtin call (8 per lane for the 4 lanes of a row), also the K of a block of the tile layout;
// its output tile is the MMA tile (mma_tile_args.h).
MTLINV_SHARED uint32_t GEMV_MMA_BLOCK = 32;
// gemv_nk_mma: blocks of one output tile a split loads before it multiplies them: 8 weight loads of 16 bytes in
// flight per lane (GEMV_MMA_IN_FLIGHT / C blocks with C output tiles).
MTLINV_SHARED uint32_t GEMV_MMA_IN_FLIGHT = 4;
// gemm_tiled: outputs per threadgroup along M and along N, and its threads (a 16 x 16 layout, 2 x 2 outputs each).
MTLINV_SHARED uint32_t GEMM_TILE = 32;
MTLINV_SHARED uint32_t GEMM_THREADS = 256;
