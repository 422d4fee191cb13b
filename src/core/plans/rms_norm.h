#pragma once
#include "../plan.h"
#include "../dtype.h"

namespace mtlinv {

// rms_norm over the last axis of a [rows, cols] tensor: one threadgroup per row, sized from `cols` only.
// Operands: 0 x, 1 weight, 2 y; with `residual` (add_rms_norm): 0 x, 1 r, 2 weight, 3 s, 4 y.
Plan plan_rms_norm(int64_t rows, int64_t cols, DType dtype, float eps, const DeviceCaps& caps, bool residual = false);

}  // namespace mtlinv
