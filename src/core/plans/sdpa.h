#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../dtype.h"
#include "../plan.h"

namespace mtlinv {

// log2(e): the kernels take scale * log2(e) as a float32 (SdpaArgs.scale_log2) and use exp2.
constexpr double kLog2e = 1.4426950408889634074;

// The head dims the kernels are built for: sdpa_flash has an instance per dim (sdpa_flash_d<D>_...), sdpa_blocks a
// loop per dim (metal/sdpa.metal). The op and plan_sdpa refuse any other.
constexpr int64_t kSdpaHeadDims[] = {64, 80, 96, 128, 256};
bool sdpa_head_dim_supported(int64_t head_dim);
// "64, 80, 96, 128, 256": kSdpaHeadDims for messages.
std::string sdpa_head_dims_str();

// One sdpa call after validation. q [batch, q_heads, q_len, head_dim]; k and v [batch, kv_heads, capacity,
// head_dim] of which the first kv_len keys are valid.
struct SdpaShape {
  int64_t batch = 1;
  int64_t q_heads = 1;
  int64_t kv_heads = 1;
  int64_t q_len = 1;
  int64_t kv_len = 1;
  int64_t capacity = 1;
  int64_t head_dim = 64;
  DType dtype = DType::f32;
  bool causal = true;
  float scale = 1.0f;     // the softmax scale (the op has already applied the 1/sqrt(D) default)
  bool aligned = false;   // q, k, v 16-byte aligned: full-vector loads allowed
  bool rows_out = false;  // out as [B, Lq, Hq, D] (SdpaOptions::rows_out)
};

// Operands: 0 q, 1 k, 2 v, 3 out.
// q_len <= limit (and q_len == 1 always) -> canonical: the two-pass sdpa_blocks (or sdpa_mma, see
// sdpa_mma_applies) + sdpa_combine (two scratch buffers of float32 partials) over the chunks of sdpa_chunking().
// Otherwise q_len <= kSdpaSplitMaxQueries -> the same two passes over sdpa_split_blocks() blocks, and longer
// blocks -> the single-pass sdpa_flash of the head dim.
// Without `aligned`, the kernels reading q, k, v are the element-load builds (sdpa_blocks_unaligned_*, ...),
// with the same bits. Expects a valid shape: the op validates it, with the operands' names; introspection calls
// check_sdpa_shape first.
Plan plan_sdpa(const SdpaShape& s, int limit, const DeviceCaps& caps);
// InvalidArgument unless B, Lq, Hkv >= 1, Hq a multiple of Hkv, kv_len in [1, 2^31) and the head dim supported.
void check_sdpa_shape(const SdpaShape& s);

// The chunks covering keys 0 .. kv_len - 1 (kv_len >= 1) under (block_keys, tier_keys), as the kernels place them
// (sdpa_chunk_range in metal/sdpa_args.h): (first key, keys) each.
std::vector<std::pair<uint32_t, uint32_t>> sdpa_chunks(uint32_t block_keys, uint32_t tier_keys, uint32_t kv_len);

// Above the limit, blocks of at most this many queries per head take the split kernel (MLX's vector mode bound).
constexpr int64_t kSdpaSplitMaxQueries = 8;

// The chunks of the canonical path: SdpaArgs.block_keys and tier_keys, which place every chunk at absolute key
// positions (sdpa_chunk_range in metal/sdpa_args.h). A function of the head dim, dtype and device only, never of
// the query or key count.
struct SdpaChunking {
  uint32_t block_keys;  // S: keys per chunk (of tier 0, when there are tiers)
  uint32_t tier_keys;   // 0: chunks of S throughout; else where tier 0 ends
};
SdpaChunking sdpa_chunking(int64_t head_dim, DType dtype, const DeviceCaps& caps);

// Whether the canonical pass 1 is sdpa_mma (metal/sdpa_mma.metal), on the matrix units, instead of sdpa_blocks:
// on devices with matrix units (CUDA), for 16-bit dtypes and head dims 64 and 128. A function of the device, dtype
// and head dim, never of Lq, so every canonical call of a shape takes the same kernel.
bool sdpa_mma_applies(int64_t head_dim, DType dtype, const DeviceCaps& caps);

// Queries per sdpa_blocks threadgroup (4 or 8), from Lq * group: it sets which queries share K and V loads, never
// a query's reduction order.
uint32_t sdpa_query_tile(const SdpaShape& s);

// The key blocks of the throughput two-pass path (ceil(kv_len / blocks) consecutive keys each), derived from the
// query count and kv_len to fill the device.
uint32_t sdpa_split_blocks(const SdpaShape& s, const DeviceCaps& caps);

}  // namespace mtlinv
