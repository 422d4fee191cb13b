#include "tile_layout.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "errors.h"
#include "plans/gemv.h"
#include "plans/qgemv.h"

namespace mtlinv {

namespace {

static_assert(kGemvMmaRows == kQgemvMmaRows, "both tile layouts hold tiles of 16 rows");
constexpr int64_t kRows = kGemvMmaRows;

void require_rows(const char* fn, int64_t n) {
  if (n <= 0 || n % kRows != 0) {
    throw InvalidArgument(fn, ": N=", n, " is not a positive multiple of ", kRows,
                          "; keep the row layout for this weight");
  }
}

void require_pointers(const char* fn, std::initializer_list<std::pair<const char*, const void*>> pointers) {
  for (const auto& [name, pointer] : pointers) {
    if (pointer == nullptr) throw InvalidArgument(fn, ": ", name, " is NULL");
  }
}

// The one rearrangement of every layout: rows of row_bytes bytes [N, row_bytes] -> [N/16, ceil(row_bytes /
// block_bytes), 16, block_bytes], a last partial block padded with zero bytes (the quantized layout's).
void tile_rows(const void* src, int64_t n, int64_t row_bytes, int64_t block_bytes, void* dst) {
  const auto* in = static_cast<const unsigned char*>(src);
  auto* out = static_cast<unsigned char*>(dst);
  const int64_t blocks = (row_bytes + block_bytes - 1) / block_bytes;
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t block = 0; block < blocks; ++block) {
      const unsigned char* from = in + row * row_bytes + block * block_bytes;
      unsigned char* to = out + (((row / kRows) * blocks + block) * kRows + row % kRows) * block_bytes;
      const int64_t bytes = std::min(block_bytes, row_bytes - block * block_bytes);
      std::memcpy(to, from, static_cast<size_t>(bytes));
      std::memset(to + bytes, 0, static_cast<size_t>(block_bytes - bytes));
    }
  }
}

// Every size the layouts compute (elements, bytes of a row) stays below 8 N K; refuse positive N and K whose 8 N K
// passes 64 bits rather than let the arithmetic wrap.
void require_size(const char* fn, int64_t n, int64_t k) {
  if (k > INT64_MAX / 8 / n) {
    throw InvalidArgument(fn, ": N=", n, " and K=", k, " make a weight too large to address (8 N K past 2^63)");
  }
}

// The formats with tiled kernels: the affine format at bits 4 and 8, every super-block format (bits 4, 5 and 6).
void check_quant_shape(int64_t n, int64_t k, int group_size, int bits) {
  if (bits != 4 && bits != 8 && !qgemv_super_format(bits, group_size)) {
    throw InvalidArgument("quant_tile: bits=", bits, " at group_size=", group_size, ": the tile layout is built for "
                          "bits 4 and 8, and for the super-block form's bits 4 and 5 at group_size 32 and 6 at 16");
  }
  if (!qgemv_supported_format(bits, group_size) && !qgemv_super_format(bits, group_size)) {
    throw InvalidArgument("quant_tile: group_size=", group_size, " is not supported at bits=", bits,
                          "; use 32, 64 or 128, or 16 at bits=", kQgemvGroup16Bits);
  }
  require_rows("quant_tile", n);
  if (k <= 0 || k % group_size != 0) {
    throw InvalidArgument("quant_tile: K=", k, " is not a positive multiple of group_size=", group_size);
  }
  require_whole_runs("quant_tile", k);
  require_size("quant_tile", n, k);
}

int64_t elements(const Shape& shape) {
  int64_t count = 1;
  for (const int64_t d : shape) count *= d;
  return count;
}

}  // namespace

Shape tiled_weight_shape(int64_t n, int64_t k) {
  return {n / kRows, k / kGemvMmaBlockK, kRows, kGemvMmaBlockK};
}

Shape quant_tiled_shape(int64_t n, int64_t k, int bits) {
  return {n / kRows, k / kQgemvMmaStepK + (k % kQgemvMmaStepK != 0), kRows, kQgemvMmaStepK * bits / 32};
}

Shape quant_tiled_group_shape(int64_t n, int64_t k, int group_size) {
  return {n / kRows, k / group_size, kRows};
}

Shape quant_tiled_super_shape(int64_t n, int64_t k) {
  return {n / kRows, k / kQgemvSuperK, kRows, 2};
}

int64_t tiled_weight_elements(int64_t n, int64_t k) {
  require_rows("tile_weights", n);
  if (k <= 0 || k % kGemvMmaBlockK != 0) {
    throw InvalidArgument("tile_weights: K=", k, " is not a positive multiple of ", kGemvMmaBlockK,
                          " (the layout's shape must give K); keep the row layout for this weight");
  }
  require_size("tile_weights", n, k);
  return elements(tiled_weight_shape(n, k));
}

void tile_weights(const void* w, size_t elem_bytes, int64_t n, int64_t k, void* w_tiled) {
  tiled_weight_elements(n, k);
  if (elem_bytes != 2) {
    throw InvalidArgument("tile_weights: elements of ", elem_bytes, " bytes; the tile layout is read by the 16-bit "
                          "(float16, bfloat16) matrix-unit kernel only");
  }
  require_pointers("tile_weights", {{"w", w}, {"w_tiled", w_tiled}});
  tile_rows(w, n, k * 2, kGemvMmaBlockK * 2, w_tiled);
}

int64_t quant_tiled_words(int64_t n, int64_t k, int group_size, int bits) {
  check_quant_shape(n, k, group_size, bits);
  return elements(quant_tiled_shape(n, k, bits));
}

void quant_tile(const uint32_t* wq, const void* scales, const void* biases, size_t scale_bytes, int64_t n, int64_t k,
                int group_size, int bits, uint32_t* wq_tiled, void* scales_tiled, void* biases_tiled,
                const float* supers, float* supers_tiled) {
  check_quant_shape(n, k, group_size, bits);
  const bool super_form = scale_bytes == 1;
  if (scale_bytes != 1 && scale_bytes != 2 && scale_bytes != 4) {
    throw InvalidArgument("quant_tile: scale_bytes=", scale_bytes,
                          " is not 2 (float16, bfloat16), 4 (float32) or 1 (int8 codes, with supers)");
  }
  if (super_form != (supers != nullptr || supers_tiled != nullptr)) {
    throw InvalidArgument("quant_tile: supers go with int8 scale codes (scale_bytes 1) and only with them; got "
                          "scale_bytes=", scale_bytes, super_form ? " without supers" : " with supers");
  }
  if (super_form && (!qgemv_super_format(bits, group_size) || k % kQgemvSuperK != 0)) {
    throw InvalidArgument("quant_tile: int8 scale codes are tiled at bits 4 or 5 with group_size 32, or 6 with 16, "
                          "and K a multiple of ", kQgemvSuperK, "; got bits=", bits, ", group_size=", group_size,
                          ", K=", k);
  }
  if (!super_form && bits != 4 && bits != 8) {
    throw InvalidArgument("quant_tile: bits=", bits, ": the tile layout of float scales is built for bits 4 and 8");
  }
  require_pointers("quant_tile", {{"wq", wq}, {"scales", scales}, {"biases", biases}, {"wq_tiled", wq_tiled},
                                  {"scales_tiled", scales_tiled}, {"biases_tiled", biases_tiled}});
  if (super_form) {
    require_pointers("quant_tile", {{"supers", supers}, {"supers_tiled", supers_tiled}});
    constexpr int64_t kPairBytes = 2 * sizeof(float);
    tile_rows(supers, n, k / kQgemvSuperK * kPairBytes, kPairBytes, supers_tiled);
  }
  tile_rows(wq, n, k * bits / 8, kQgemvMmaStepK * bits / 8, wq_tiled);
  const int64_t scale_row_bytes = k / group_size * static_cast<int64_t>(scale_bytes);
  tile_rows(scales, n, scale_row_bytes, static_cast<int64_t>(scale_bytes), scales_tiled);
  tile_rows(biases, n, scale_row_bytes, static_cast<int64_t>(scale_bytes), biases_tiled);
}

}  // namespace mtlinv
