// The tile layout that qgemv's matrix-unit kernel reads in whole blocks (described at the top of
// metal/qgemv_mma.metal), made on the host from MLX's row layout. The one implementation behind mtlinv.quant.tile
// (Python), mtlinv_quant_tile (C) and mtlinv::quant_tile (C++): qgemv takes either layout and gives the same bits.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mtlinv {

// Words of wq in the tile layout, [N/16, ceil(K/128), 16, 4 bits]. Throws InvalidArgument where quant_tile would.
int64_t quant_tiled_words(int64_t n, int64_t k, int group_size, int bits);

// wq [N, K bits/32] -> wq_tiled (quant_tiled_words words; a last partial step of 128 K positions padded with zero
// words); scales and biases [N, K/group_size], of scale_bytes bytes each (2: float16 or bfloat16, 4: float32) ->
// [N/16, K/group_size, 16], a group's 16 rows side by side. Host memory, row-major; the outputs must not overlap
// the inputs. Throws InvalidArgument naming the argument for bits other than 4 and 8, a group size other than 32,
// 64 and 128, N not a positive multiple of 16, K not a positive multiple of group_size, scale_bytes other than 2
// and 4, or a null pointer.
void quant_tile(const uint32_t* wq, const void* scales, const void* biases, size_t scale_bytes, int64_t n, int64_t k,
                int group_size, int bits, uint32_t* wq_tiled, void* scales_tiled, void* biases_tiled);

}  // namespace mtlinv
