// Argument structs shared by the host (C++) and the kernels (MSL, emulator, CUDA), each with its buffer slots.
// Each kernel takes exactly one of these in `constant XArgs& args [[buffer(X_SLOT_ARGS)]]` (`enum XSlot`, as
// metal/shared.h describes); the host fills it with designated fields. Only 4-byte scalars, so the layout is
// identical on every target (sizes are static_assert'ed on the host in src/core/kernel_args.h).
#pragma once
#ifndef __METAL_VERSION__
#include <cstdint>
#endif
#include "shared.h"

// rms_norm: y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w
struct RmsNormArgs {
  uint32_t rows;
  uint32_t cols;
  float eps;
  uint32_t q_heads;   // qk_rms_norm: a row is head (row % (q_heads + 2 kv_heads)) of a q|k|v projection's output
  uint32_t kv_heads;
};

// Columns a thread of rms_norm_row (metal/rms_norm.metal) holds in registers; the rest of a wider row it loads
// one at a time. The plans give a GPU's row enough threads to hold it up to 8192 columns (threads_per_row,
// src/core/plans/rms_norm.cpp).
MTLINV_SHARED uint32_t RMS_NORM_HELD = 8;

// The buffer slots of rms_norm (x, w, y) and add_rms_norm (all five).
enum RmsNormSlot : uint32_t {
  RMS_NORM_SLOT_ARGS = 0,      // RmsNormArgs
  RMS_NORM_SLOT_X = 1,
  RMS_NORM_SLOT_W = 2,         // the weight
  RMS_NORM_SLOT_Y = 3,
  RMS_NORM_SLOT_RESIDUAL = 4,  // add_rms_norm: r, added to x
  RMS_NORM_SLOT_SUM = 5,       // add_rms_norm: s = x + r, written
  RMS_NORM_SLOT_W_K = 6,       // qk_rms_norm: the key heads' weight (the query heads' is RMS_NORM_SLOT_W)
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

// The buffer slots of the decoder kernels: one input and one output each, a second input for add, swiglu and
// gather_rows, and two more outputs for qkv_to_heads (which writes q to DECODER_SLOT_OUT).
enum DecoderOpSlot : uint32_t {
  DECODER_SLOT_ARGS = 0,   // DecoderOpArgs
  DECODER_SLOT_IN = 1,     // x; add's a, swiglu's gate, gather_rows' table
  DECODER_SLOT_OUT = 2,    // y; qkv_to_heads' q
  DECODER_SLOT_IN2 = 3,    // add's b, swiglu's up, gather_rows' ids
  DECODER_SLOT_OUT_K = 4,  // qkv_to_heads' k
  DECODER_SLOT_OUT_V = 5,  // qkv_to_heads' v
  DECODER_SLOT_FREQS = 6,  // qkv_to_heads_freqs' RoPE frequencies (float32)
};
