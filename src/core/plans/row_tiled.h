// Plan rules shared by the row-tiled GEMVs (gemv_nk, gemv_kn, qgemv): the tile height, the K split count rows
// above the limit take, and whether it really gives them another reduction order.
#pragma once
#include <algorithm>
#include <cstdint>

namespace mtlinv {

// The tile height R (the kernels' template parameter) for M rows: the smallest of 1, 2, 4, 8 that holds them, 8
// above (more rows run as further tiles).
inline uint32_t row_tile_height(int64_t rows) { return rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : 8; }

// The split count of every GEMV plan: the largest power of two that is at most `wanted` (what keeps the device
// busy) and at most `most` (what keeps each split enough K), and at least 1.
inline uint32_t power_of_two_splits(int64_t wanted, int64_t most) {
  int64_t splits = 1;
  while (splits * 2 <= wanted && splits * 2 <= most) splits *= 2;
  return static_cast<uint32_t>(splits);
}

// The throughput path's split count: tiles of 8 rows do more arithmetic per weight byte and run best with fewer
// simdgroups than the canonical count, which must also serve M = 1 (half of it on an H200,
// docs/decisions.md, "gemv: scalar kernel"); 2 where the canonical count is 1. Never the canonical count.
inline uint32_t throughput_k_splits(uint32_t canonical) { return canonical > 1 ? canonical / 2 : 2; }

// gemv_nk and qgemv deal K out in units (16-byte groups, 32-value runs) to 32 lanes per split, in turn. Two split
// counts give different reduction orders only when every split of both holds a unit; otherwise the extra splits add
// zeros and rows above the limit would reproduce the canonical bits (the negative controls rely on them differing).
inline bool split_counts_differ_in_order(int64_t units, uint32_t a, uint32_t b) {
  return units >= int64_t{32} * std::max(a, b);
}

}  // namespace mtlinv
