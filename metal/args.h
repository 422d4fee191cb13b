// Argument structs shared by the host (C++) and the kernels (MSL, emulator, CUDA).
// Each kernel takes exactly one of these in `constant XArgs& args [[buffer(0)]]`; the host fills it with
// designated fields. Only 4-byte scalars, so the layout is identical on every target (sizes are
// static_assert'ed on the host in src/core/kernel_args.h).
#pragma once
#ifndef __METAL_VERSION__
#include <cstdint>
#endif

// rms_norm: y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w
struct RmsNormArgs {
  uint32_t rows;
  uint32_t cols;
  float eps;
  uint32_t q_heads;   // qk_rms_norm: a row is head (row % (q_heads + 2 kv_heads)) of a q|k|v projection's output
  uint32_t kv_heads;
};

// The small per-element kernels of a decoder layer (metal/decoder_ops.metal). Each output element depends on its
// own inputs only, so they are row-invariant by construction.
struct DecoderOpArgs {
  uint32_t rows;       // tokens in this call (L)
  uint32_t heads;      // heads of the tensor being moved / rotated
  uint32_t head_dim;   // D
  uint32_t capacity;   // KV cache capacity C (cache writes)
  uint32_t start_pos;  // absolute position of row 0
  uint32_t count;      // elements for the flat kernels (add, swiglu)
  float rope_base;     // RoPE theta base (rope kernels)
  uint32_t vocab;      // rows of the embedding table (gather)
  uint32_t seq_offset; // sequence index of row 0 in the destination ([heads, capacity, D] layouts)
  uint32_t kv_heads;   // key and value heads after the `heads` query heads (qkv_to_heads)
  uint32_t half_cols;  // columns of each half of a row (swiglu_halves)
};
