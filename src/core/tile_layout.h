// The tile layouts that the matrix-unit kernels read in whole blocks, made on the host from row-major weights: one
// implementation behind Python (mtlinv.tile_weights, mtlinv.quant.tile), C (mtlinv_tile_weights,
// mtlinv_quant_tile) and C++. gemv and qgemv take either layout; at or below the limit (the canonical kernels) they
// give the same bits, above it each layout has its own throughput kernel.
//   - Dense W [N, K] (16-bit), for gemv_nk_mma (metal/gemv_mma.metal): [N/16, K/32, 16, 32], block (t, b) holding
//     K positions [32 b, 32 b + 32) of rows 16 t .. 16 t + 15. K is a multiple of 32, so that the shape gives K:
//     gemv checks x against it (with a padded last block, an x a few positions short or long would pass).
//   - Quantized weights in MLX's affine format, for qgemv_mma (metal/qgemv_mma.metal): wq [N, K*bits/32] ->
//     [N/16, ceil(K/128), 16, 4*bits], a block holding 128 K positions of the tile's 16 rows (a last partial block
//     padded with zeros; the scales' shape gives K); scales and biases [N, K/group_size] -> [N/16, K/group_size,
//     16], a group's 16 rows side by side; in the super-block form (int8 codes) supers [N, K/256, 2] ->
//     [N/16, K/256, 16, 2], a super-block's 16 rows side by side.
// Host memory, row-major; outputs must not overlap inputs. The functions below the shapes throw InvalidArgument
// naming the argument for a shape the layout does not take, a size past 64 bits, or a null pointer.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor.h"

namespace mtlinv {

// The layouts' shapes, unchecked (the ops compare operands with them): dense W [N/16, K/32, 16, 32]; quantized wq
// [N/16, ceil(K/128), 16, 4*bits], scales and biases [N/16, K/group_size, 16].
Shape tiled_weight_shape(int64_t n, int64_t k);
Shape quant_tiled_shape(int64_t n, int64_t k, int bits);
Shape quant_tiled_group_shape(int64_t n, int64_t k, int group_size);

// Elements of dense W in the tile layout: N a positive multiple of 16, K a positive multiple of 32.
int64_t tiled_weight_elements(int64_t n, int64_t k);
// W [N, K] of elem_bytes bytes each (2: float16 or bfloat16, the dtypes gemv_nk_mma reads) -> w_tiled.
void tile_weights(const void* w, size_t elem_bytes, int64_t n, int64_t k, void* w_tiled);

// Words of quantized wq in the tile layout: bits 4 or 8, group_size 32, 64 or 128 (or 16 at bits 8), or a
// super-block format (bits 4 or 5 at group_size 32, 6 at 16); N a positive multiple of 16, K a positive multiple of
// group_size and of 32.
int64_t quant_tiled_words(int64_t n, int64_t k, int group_size, int bits);
// wq, scales and biases (scale_bytes bytes each: 2 for float16 or bfloat16, 4 for float32, 1 for the int8 codes of
// the super-block form, which take supers: bits 4 or 5 at group_size 32, 6 at 16, K a multiple of 256) -> the tile
// layout.
void quant_tile(const uint32_t* wq, const void* scales, const void* biases, size_t scale_bytes, int64_t n, int64_t k,
                int group_size, int bits, uint32_t* wq_tiled, void* scales_tiled, void* biases_tiled,
                const float* supers = nullptr, float* supers_tiled = nullptr);
// The tile layout's shape of supers: [N/16, K/256, 16, 2].
Shape quant_tiled_super_shape(int64_t n, int64_t k);

}  // namespace mtlinv
