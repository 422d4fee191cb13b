#pragma once
#include "../plan.h"
#include "../dtype.h"

namespace mtlinv {

// rms_norm over the last axis of a [rows, cols] tensor: one threadgroup per row, sized from `cols` only.
// Operands: 0 x, 1 weight, 2 y; with `residual` (add_rms_norm): 0 x, 1 r, 2 weight, 3 s, 4 y.
Plan plan_rms_norm(int64_t rows, int64_t cols, DType dtype, float eps, const DeviceCaps& caps, bool residual = false);
// qk_rms_norm over x [rows, q_heads + 2 kv_heads, head_dim]: one threadgroup per head's row, sized as rms_norm's for
// cols = head_dim. Operands: 0 x, 1 q weight, 2 k weight, 3 y.
Plan plan_qk_rms_norm(int64_t rows, int64_t q_heads, int64_t kv_heads, int64_t head_dim, DType dtype, float eps,
                      const DeviceCaps& caps);

}  // namespace mtlinv
