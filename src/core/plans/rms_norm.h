#pragma once
#include "../plan.h"
#include "../dtype.h"

namespace mtlinv {

// rms_norm over the last axis of a [rows, cols] tensor: one threadgroup per row, sized from `cols` only.
Plan plan_rms_norm(int64_t rows, int64_t cols, DType dtype, float eps, const DeviceCaps& caps);

}  // namespace mtlinv
