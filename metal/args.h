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
};

// gemv / matmul: y[b, m, n] = sum_k x[b, m, k] * W[b](n, k) (+ bias[n]).
// W is stored [N, K] ("nk", a linear layer's weight) or [K, N] ("kn"). Strides are in elements; a batch stride of
// 0 broadcasts that operand over the batch.
struct GemvArgs {
  uint32_t rows;            // M: rows of x per batch entry
  uint32_t k;               // reduced extent
  uint32_t n;               // outputs per row
  uint32_t k_splits;        // simdgroups sharing one output tile's K range; from K, N, dtype, device (never M)
  uint32_t x_batch_stride;
  uint32_t w_batch_stride;
  uint32_t y_batch_stride;
  uint32_t has_bias;        // 1: add bias[n] in the epilogue
  uint32_t vector_loads;    // 1: rows start 16-byte aligned, full vectors may be loaded at once
  uint32_t w_kn;            // 1: W stored [K, N] (read by the throughput GEMM; the GEMVs are one per layout)
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
