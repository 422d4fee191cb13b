#pragma once
#include "../dtype.h"
#include "../plan.h"

namespace mtlinv {

// Plans of the per-element decoder kernels (metal/decoder_ops.metal). Operands are listed per function.
Plan plan_add(DType dtype, int64_t count);                                               // 0 a, 1 b, 2 y
Plan plan_swiglu(DType dtype, int64_t count);                                            // 0 gate, 1 up, 2 y
Plan plan_swiglu_halves(DType dtype, int64_t rows, int64_t half_cols);                   // 0 x, 1 y
Plan plan_to_heads(bool rotate, DType dtype, int64_t rows, int64_t heads, int64_t head_dim, int64_t capacity,
                   int64_t seq_offset, int64_t start_pos, float rope_base);                // 0 x, 1 y
// freqs: pair frequencies from a table (operand 4, float32 [D / 2]) instead of rope_base^(-2j/D).
Plan plan_qkv_to_heads(DType dtype, int64_t rows, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                       int64_t capacity, int64_t seq_offset, int64_t start_pos, float rope_base,
                       bool freqs = false);  // 0 x, 1 q, 2 k, 3 v (, 4 freqs)
Plan plan_heads_to_rows(DType dtype, int64_t rows, int64_t heads, int64_t head_dim);     // 0 x, 1 y
Plan plan_gather_rows(DType dtype, int64_t rows, int64_t vocab, int64_t dim);            // 0 table, 1 ids, 2 y

}  // namespace mtlinv
