// The argument struct of the sdpa kernels (metal/sdpa.metal), shared by the host and every target. Only 4-byte
// scalars, so the layout is the same everywhere (its size is static_assert'ed in src/core/plans/sdpa.cpp).
//
// q [B, Hq, Lq, D], k and v [B, Hkv, C, D] (a cache of capacity C holding kv_len valid keys), out [B, Hq, Lq, D].
// Query i of a causal block sits at absolute position kv_len - q_len + i and sees keys 0 .. that position.
#pragma once
#ifndef __METAL_VERSION__
#include <cstdint>
#endif

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
  uint32_t n_blocks;      // key blocks of the two-pass kernels: block j holds keys [j, j + 1) * block_keys
  uint32_t block_keys;    // keys per block, at most SDPA_BLOCK_KEYS: the chunk size S on the canonical path
  uint32_t prefetch;      // 1: sdpa_mma asks L2 for each step's K and V a step ahead (a hint: never a change of bits)
};
