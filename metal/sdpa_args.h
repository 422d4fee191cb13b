// The sdpa family (metal/sdpa.metal, sdpa_mma.metal) as the kernels and the host (src/core/plans/sdpa.cpp) both see
// it: the argument struct, only 4-byte scalars so that the layout is the same everywhere (its size is
// static_assert'ed in src/core/plans/sdpa.cpp), the chunks of keys, and the geometry the plans size grids by.
//
// q [B, Hq, Lq, D], k and v [B, Hkv, C, D] (a cache of capacity C holding kv_len valid keys), out [B, Hq, Lq, D].
// Query i of a causal block sits at absolute position kv_len - q_len + i and sees keys 0 .. that position.
#pragma once
#include "shared.h"

// sdpa_blocks: threads of a threadgroup, most queries of its tile (Q: 4 or 8) and most keys of a block.
MTLINV_SHARED uint32_t SDPA_THREADS = 128;
MTLINV_SHARED uint32_t SDPA_QUERIES = 8;
MTLINV_SHARED uint32_t SDPA_BLOCK_KEYS = 256;
// sdpa_combine: block ranges merged in parallel, and float4 columns of the output per threadgroup.
MTLINV_SHARED uint32_t SDPA_COMBINE_GROUPS = 16;
MTLINV_SHARED uint32_t SDPA_COMBINE_COLUMNS = 8;
// sdpa_flash: queries of a threadgroup, and the threads (lanes of one simdgroup) that share a query's head dim.
MTLINV_SHARED uint32_t FLASH_QUERIES = 32;
MTLINV_SHARED uint32_t FLASH_LANES = 4;
// sdpa_mma: queries per tile (the builtin's A rows), simdgroups (each takes a quarter of a chunk's keys; the
// threadgroup is as wide as sdpa_blocks') and keys per step (the builtin's K in p v).
MTLINV_SHARED uint32_t SDPA_MMA_QUERIES = 16;
MTLINV_SHARED uint32_t SDPA_MMA_SIMDGROUPS = 4;
MTLINV_SHARED uint32_t SDPA_MMA_STEP = 32;

struct SdpaArgs {
  uint32_t q_heads;       // Hq
  uint32_t kv_heads;      // Hkv; Hq = group * Hkv
  uint32_t group;         // query heads per kv head (GQA factor)
  uint32_t q_len;         // Lq: queries per head
  uint32_t kv_len;        // valid keys
  uint32_t kv_capacity;   // C: keys per head in the k and v buffers (their row stride is C * D)
  uint32_t head_dim;      // D: 64, 80, 96, 128 or 256
  uint32_t causal;        // 1: bottom-right aligned causal mask
  float scale_log2;       // softmax scale * log2(e): scores are kept in base 2, so exp2 is the exponential
  uint32_t n_blocks;      // key blocks of the two-pass kernels (chunks on the canonical path): sdpa_chunk_range
  uint32_t block_keys;    // keys per block (sdpa_blocks: at most SDPA_BLOCK_KEYS); with tiers, those of tier 0
  uint32_t tier_keys;     // 0: every block holds block_keys keys; else where tier 0 ends (sdpa_chunk_range)
  uint32_t prefetch;      // 1: sdpa_mma asks L2 for each step's K and V a step ahead (a hint: never a change of bits)
  uint32_t rows_out;      // 1: out is [B, Lq, Hq, D], a row of heads per query; 0: [B, Hq, Lq, D], as q
};

// The buffer slots of every kernel of the family (shared.h). sdpa_blocks and sdpa_mma take them all; sdpa_combine
// (pass 2) only the partials and out, sdpa_flash only q, k, v and out.
enum SdpaSlot : uint32_t {
  SDPA_SLOT_ARGS = 0,     // SdpaArgs
  SDPA_SLOT_Q = 1,
  SDPA_SLOT_K = 2,
  SDPA_SLOT_V = 3,
  SDPA_SLOT_PART_O = 4,   // float32 scratch: each block's unnormalized output
  SDPA_SLOT_PART_ML = 5,  // float32 scratch: each block's (max, sum) of the scores
  SDPA_SLOT_OUT = 6,
};

// The blocks of the two-pass kernels, at absolute key positions. With tier_keys = 0, block j holds keys
// [j S, (j + 1) S), S = block_keys. Otherwise the blocks grow with the position: tier 0 holds keys [0, T) in blocks
// of S, and tier t > 0 holds [T 4^(t-1), T 4^t) in blocks of S 2^t (T = tier_keys, a multiple of 4 S). So a context
// of n >= T keys has about 1.5 (T / S) sqrt(n / T) blocks: short contexts get small blocks, which spread over the
// cores, and long ones large blocks, each a threadgroup's work, for fewer partials to write and merge. Both are
// functions of a key's position alone, never of a call's length, so a query's blocks are the same in every call.
struct SdpaChunk {
  uint32_t first;  // first key
  uint32_t keys;   // keys it holds (past kv_len as well: the kernels stop at the keys a query sees)
};

// Tier t > 0 of a tiered chunking: the blocks before it, its first key T 4^(t-1), its block size S 2^t, and so its
// 3 T 4^(t-1) / (S 2^t) blocks.
struct SdpaTier {
  uint32_t before;
  uint32_t start;
  uint32_t keys;
};
inline SdpaTier sdpa_first_tier(uint32_t block_keys, uint32_t tier_keys) {
  return SdpaTier{tier_keys / block_keys, tier_keys, 2 * block_keys};
}
inline uint32_t sdpa_tier_blocks(SdpaTier tier) {
  return 3 * (tier.start / tier.keys);
}
inline SdpaTier sdpa_next_tier(SdpaTier tier) {
  return SdpaTier{tier.before + sdpa_tier_blocks(tier), 4 * tier.start, 2 * tier.keys};
}

// Block `index`'s keys.
inline SdpaChunk sdpa_chunk_range(uint32_t block_keys, uint32_t tier_keys, uint32_t index) {
  if (tier_keys == 0 || index < tier_keys / block_keys) {
    return SdpaChunk{index * block_keys, block_keys};
  }
  SdpaTier tier = sdpa_first_tier(block_keys, tier_keys);
  while (index - tier.before >= sdpa_tier_blocks(tier)) {
    tier = sdpa_next_tier(tier);
  }
  return SdpaChunk{tier.start + (index - tier.before) * tier.keys, tier.keys};
}

// The block holding key `key`.
inline uint32_t sdpa_chunk_of(uint32_t block_keys, uint32_t tier_keys, uint32_t key) {
  if (tier_keys == 0 || key < tier_keys) {
    return key / block_keys;
  }
  SdpaTier tier = sdpa_first_tier(block_keys, tier_keys);
  while (key / 4 >= tier.start) {  // key >= 4 start, the next tier's first key, without overflow
    tier = sdpa_next_tier(tier);
  }
  return tier.before + (key - tier.start) / tier.keys;
}
