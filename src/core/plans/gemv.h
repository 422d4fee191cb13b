#pragma once
#include "../../../metal/gemv_args.h"
#include "../dtype.h"
#include "../plan.h"

namespace mtlinv {

// One gemv/matmul call after validation: `batch` independent products of `rows` x K by K x N.
struct GemvShape {
  int64_t batch = 1;
  int64_t rows = 1;       // M per batch entry
  int64_t k = 0;
  int64_t n = 0;
  DType dtype = DType::f32;
  bool w_kn = false;      // W stored [K, N] (transpose=False) instead of [N, K]
  bool has_bias = false;
  bool x_batched = true;  // false: one x broadcast over a batched W
  bool w_batched = false; // false: one W shared by every batch entry
  bool aligned = false;   // operands 16-byte aligned: full-vector loads allowed
  bool tiled = false;     // W [N, K] in gemv_nk_mma's tile layout (mtlinv.tile_weights), N a multiple of 16
};

// gemv_nk_mma's output tile (16 weight rows) and K block (32 positions): also the blocks of the tile layout,
// W [N/16, K/32, 16, 32].
constexpr int64_t kGemvMmaRows = MMA_TILE_COLS;
constexpr int64_t kGemvMmaBlockK = GEMV_MMA_BLOCK;

// Operands: 0 x, 1 w, 2 bias (or any valid buffer when absent), 3 y.
// M <= limit (and M == 1 always) -> canonical gemv_nk_mma (16-bit W [N, K] on a device with matrix units),
// gemv_nk or gemv_kn; above the limit the same row-tiled kernels with
// another K split up to 32 rows, and the tiled GEMM beyond. W in the tile layout takes
// gemv_nk_mma_r{8,16}[_c2|_u2]_{dtype}_tiled at every M (the split count of the canonical or the throughput path):
// the row layout's bits, read in whole blocks; it needs 16-bit x, matrix units and an unbatched W.
// Expects a shape check_gemv_operands accepted (the op validates once, at the boundary).
Plan plan_gemv(const GemvShape& s, int limit, const DeviceCaps& caps);
// The op's check of what no kernel serves (w in the tile layout where no kernel reads it): InvalidArgument. Also
// for a call with nothing to compute, so that whether a call is refused does not depend on M or N.
void check_gemv_operands(const GemvShape& s, const DeviceCaps& caps);

// The number of simdgroups that split one output tile's K range, from K, N, the dtype, the layout and the device
// (never M).
uint32_t gemv_k_splits(int64_t k, int64_t n, DType dtype, bool w_kn, const DeviceCaps& caps);
// gemv_nk_mma's canonical form, from K, N and the device (never M): its split count, which fixes every output's
// order, and whether the tile of 8 rows takes two output tiles per threadgroup and the tile of 16 two splits per
// simdgroup (`wide`), or both one.
struct GemvMmaForm {
  uint32_t k_splits = 1;
  bool wide = false;
};
GemvMmaForm gemv_mma_form(int64_t k, int64_t n, const DeviceCaps& caps);

}  // namespace mtlinv
