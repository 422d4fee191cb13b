#include "quant_tile.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "errors.h"
#include "plans/qgemv.h"

namespace mtlinv {

namespace {

constexpr int64_t kRows = kQgemvMmaRows;  // rows of a tile
constexpr int64_t kStep = kQgemvMmaStepK; // K positions of a step

void check_tile_shape(int64_t n, int64_t k, int group_size, int bits) {
  if (bits != 4 && bits != 8) {
    throw InvalidArgument("quant_tile: bits=", bits, ": the tile layout is built for bits 4 and 8");
  }
  if (!qgemv_supported_group_size(group_size)) {
    throw InvalidArgument("quant_tile: group_size=", group_size, " is not supported; use 32, 64 or 128");
  }
  if (n <= 0 || n % kRows != 0) {
    throw InvalidArgument("quant_tile: N=", n, " is not a positive multiple of ", kRows,
                          "; keep the row layout for this weight");
  }
  if (k <= 0 || k % group_size != 0) {
    throw InvalidArgument("quant_tile: K=", k, " is not a positive multiple of group_size=", group_size);
  }
}

// [N, groups] -> [N/16, groups, 16]: a group's 16 rows side by side.
void tile_groups(const unsigned char* src, size_t bytes, int64_t n, int64_t groups, unsigned char* dst) {
  for (int64_t row = 0; row < n; ++row) {
    const int64_t tile = row / kRows;
    for (int64_t group = 0; group < groups; ++group) {
      std::memcpy(dst + ((tile * groups + group) * kRows + row % kRows) * bytes, src + (row * groups + group) * bytes,
                  bytes);
    }
  }
}

}  // namespace

int64_t quant_tiled_words(int64_t n, int64_t k, int group_size, int bits) {
  check_tile_shape(n, k, group_size, bits);
  return n * ((k + kStep - 1) / kStep) * (kStep * bits / 32);
}

void quant_tile(const uint32_t* wq, const void* scales, const void* biases, size_t scale_bytes, int64_t n, int64_t k,
                int group_size, int bits, uint32_t* wq_tiled, void* scales_tiled, void* biases_tiled) {
  check_tile_shape(n, k, group_size, bits);
  if (scale_bytes != 2 && scale_bytes != 4) {
    throw InvalidArgument("quant_tile: scale_bytes=", scale_bytes, " is not 2 (float16, bfloat16) or 4 (float32)");
  }
  const std::pair<const char*, const void*> pointers[] = {
      {"wq", wq}, {"scales", scales}, {"biases", biases}, {"wq_tiled", wq_tiled}, {"scales_tiled", scales_tiled},
      {"biases_tiled", biases_tiled}};
  for (const auto& [name, pointer] : pointers) {
    if (pointer == nullptr) throw InvalidArgument("quant_tile: ", name, " is NULL");
  }
  const int64_t row_words = k * bits / 32;
  const int64_t step_words = kStep * bits / 32;
  const int64_t steps = (k + kStep - 1) / kStep;
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t step = 0; step < steps; ++step) {
      const uint32_t* src = wq + row * row_words + step * step_words;
      uint32_t* dst = wq_tiled + (((row / kRows) * steps + step) * kRows + row % kRows) * step_words;
      const int64_t words = std::min(step_words, row_words - step * step_words);
      std::copy(src, src + words, dst);
      std::fill(dst + words, dst + step_words, 0u);
    }
  }
  const int64_t groups = k / group_size;
  tile_groups(static_cast<const unsigned char*>(scales), scale_bytes, n, groups,
              static_cast<unsigned char*>(scales_tiled));
  tile_groups(static_cast<const unsigned char*>(biases), scale_bytes, n, groups,
              static_cast<unsigned char*>(biases_tiled));
}

}  // namespace mtlinv
